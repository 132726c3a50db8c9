#!/usr/bin/env python3
"""Start a real OpenStack Keystone (PyPI `keystone`) for Ember's tests.

Usage (with the interpreter of the venv that tests/keystone/setup.sh makes):

    target/test-tools/keystone-venv/bin/python tests/keystone/run.py \
        --port PORT --dir DIR [--service-password PW] [--demo-password PW] \
        [--admin-password PW] [--workers N] [--threads N] [--cache]

DIR (created if missing; use a fresh one per run) receives keystone.conf,
keystone.db (SQLite), fernet-keys/, fernet-receipts/, credential-keys/,
policy.yaml (empty: oslo.policy defaults), gunicorn.conf.py and the logs
(keystone.log, manage.log, gunicorn.log).  The launcher runs keystone-manage
db_sync, fernet_setup, credential_setup and bootstrap (user `admin` with role
admin on project `admin`; roles admin/manager/member/reader/service; region
RegionOne; identity endpoint http://127.0.0.1:PORT/v3), serves the Keystone
WSGI app under gunicorn on 127.0.0.1:PORT, and then, through the REST API
with the admin token, creates:
  * project `service` with user `ember` holding role `service` there (what
    GET /v3/auth/tokens needs under the default policy, identity:validate_token
    = admin or reader@system or service or token subject); revoking someone
    else's token (DELETE /v3/auth/tokens) needs the admin credentials;
  * project `demo` with user `demo` holding role `member` there.
All in domain Default.  Once both can get tokens it prints ONE JSON line on
stdout and flushes:

  {"url": "http://127.0.0.1:PORT/v3", "region": "RegionOne",
   "domain": "Default", "domain_id": "default", "dir": DIR, "pid": PID,
   "admin":   {"user", "password", "project", "user_id", "project_id"},
   "service": {... same keys, user "ember", project "service"},
   "demo":    {... same keys, user "demo", project "demo"}}

Nothing else goes to stdout; errors go to stderr (with the log tails) and the
exit status is non-zero.  It then runs until SIGTERM/SIGINT, stops gunicorn
(and its workers) and exits 0.  If this process is SIGKILLed, gunicorn and
its workers die with it (PR_SET_PDEATHSIG).

Speed: without a cache Keystone re-reads assignments on every call (issue a
token ~90 ms, validate ~250 ms); --cache (in-process dogpile memory cache,
single worker only) makes that ~15 ms / ~4 ms.  Startup: ~7 s on an idle
2-core machine (keystone-manage steps ~1.3 s each, partly in parallel).
"""

import argparse
import ctypes
import grp
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HOST = "127.0.0.1"
PR_SET_PDEATHSIG = 1
# Never through an http_proxy from the environment: the server is local.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Stop(Exception):
    pass


def die_with_parent(sig=signal.SIGTERM):
    """preexec_fn: the child gets `sig` when this process dies."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def write_config(d, args):
    def p(*parts):
        return os.path.join(d, *parts)

    # Off by default. --cache: an in-process dict (no memcached), coherent
    # only with a single gunicorn worker, whose own writes invalidate it.
    cache = ("enabled = true\nbackend = dogpile.cache.memory" if args.cache
             else "enabled = false")

    with open(p("policy.yaml"), "w") as f:
        f.write("{}\n")
    with open(p("keystone.conf"), "w") as f:
        f.write(f"""[DEFAULT]
debug = false
log_file = {p("keystone.log")}
use_stderr = false

[database]
connection = sqlite:///{p("keystone.db")}
sqlite_synchronous = false

[token]
provider = fernet

[fernet_tokens]
key_repository = {p("fernet-keys")}

[fernet_receipts]
key_repository = {p("fernet-receipts")}

[credential]
key_repository = {p("credential-keys")}

[identity]
# bcrypt's minimum cost: every password check is ~1 ms instead of ~250 ms.
password_hash_rounds = 4

[cache]
{cache}

[oslo_policy]
policy_file = {p("policy.yaml")}
""")
    with open(p("gunicorn.conf.py"), "w") as f:
        f.write(
            "import ctypes, signal, sys\n\n"
            "def post_fork(server, worker):\n"
            "    # Workers die with the gunicorn master, whatever kills it.\n"
            f"    ctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, int(signal.SIGKILL), 0, 0, 0)\n"
            "    # Keystone parses sys.argv with oslo.config: hide gunicorn's.\n"
            "    sys.argv = sys.argv[:1]\n"
        )


class Launcher:
    def __init__(self, args):
        self.args = args
        self.dir = os.path.abspath(args.dir)
        self.conf = os.path.join(self.dir, "keystone.conf")
        self.base = f"http://{HOST}:{args.port}"
        self.url = f"{self.base}/v3"
        self.children = []
        self.server = None
        self.env = dict(os.environ, PYTHONWARNINGS="ignore",
                        OS_KEYSTONE_CONFIG_FILES=self.conf)
        self.env.pop("OS_KEYSTONE_CONFIG_DIR", None)
        self.manage_log = open(os.path.join(self.dir, "manage.log"), "ab")

    # --- processes -------------------------------------------------------
    def spawn(self, argv, log, stop_signal=signal.SIGTERM):
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=self.env, cwd=self.dir,
            preexec_fn=lambda: die_with_parent(stop_signal))
        proc.stop_signal = stop_signal
        self.children.append(proc)
        return proc

    def manage(self, *cmd):
        km = os.path.join(os.path.dirname(sys.executable), "keystone-manage")
        argv = [sys.executable, km, "--config-file", self.conf, *cmd]
        return self.spawn(argv, self.manage_log), cmd[0]

    def wait_all(self, procs):
        for proc, name in procs:
            while True:
                try:
                    rc = proc.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    pass
            if rc != 0:
                raise RuntimeError(f"keystone-manage {name} failed (exit {rc})")

    def start_server(self):
        a = self.args
        argv = [sys.executable, "-m", "gunicorn",
                "--config", os.path.join(self.dir, "gunicorn.conf.py"),
                "--bind", f"{HOST}:{a.port}",
                "--workers", str(a.workers), "--threads", str(a.threads),
                "--worker-class", "gthread",
                "--timeout", "120", "--graceful-timeout", "5",
                "--error-logfile", os.path.join(self.dir, "gunicorn.log"),
                "--log-level", "warning",
                "keystone.wsgi.api:application"]
        log = open(os.path.join(self.dir, "gunicorn.log"), "ab")
        # SIGINT: gunicorn's quick shutdown (SIGTERM waits for the workers).
        self.server = self.spawn(argv, log, stop_signal=signal.SIGINT)

    def stop(self):
        for proc in self.children:
            if proc.poll() is None:
                proc.send_signal(proc.stop_signal)
        deadline = time.monotonic() + 10
        for proc in self.children:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    # --- HTTP ------------------------------------------------------------
    def http(self, method, path, body=None, token=None, timeout=30):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("X-Auth-Token", token)
        try:
            with OPENER.open(req, timeout=timeout) as r:
                raw = r.read()
                return r.status, dict(r.headers), (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                parsed = json.loads(raw) if raw else None
            except ValueError:
                parsed = raw.decode(errors="replace")
            return e.code, dict(e.headers), parsed

    def call(self, method, path, body=None, token=None, ok=(200, 201, 204)):
        status, headers, doc = self.http(method, path, body, token)
        if status not in ok:
            raise RuntimeError(f"{method} {path} -> {status}: {doc}")
        return headers, doc

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            if self.server.poll() is not None:
                raise RuntimeError(f"gunicorn exited (status {self.server.returncode})")
            try:
                status, _, _ = self.http("GET", "", timeout=10)
                if status == 200:
                    return
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"Keystone did not answer GET {self.url} in {timeout}s")
            time.sleep(0.1)

    def token(self, user, password, project):
        body = {"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": user, "password": password, "domain": {"id": "default"}}}},
            "scope": {"project": {"name": project, "domain": {"id": "default"}}}}}
        headers, doc = self.call("POST", "/auth/tokens", body, ok=(201,))
        return headers["X-Subject-Token"], doc["token"]

    def find(self, token, coll, name):
        _, doc = self.call("GET", f"/{coll}?name={urllib.parse.quote(name)}", token=token)
        # Roles are global (domain_id null); users and projects: domain Default.
        items = [i for i in doc[coll] if i.get("domain_id") in (None, "default")]
        return items[0]["id"] if items else None

    def create_or_update(self, token, coll, name, attrs, update=None):
        """POST first (a fresh DIR needs no look-ups); on 409 reuse, updated."""
        kind = coll[:-1]
        status, _, doc = self.http("POST", f"/{coll}", {kind: dict(name=name, **attrs)}, token)
        if status == 201:
            return doc[kind]["id"]
        if status != 409:
            raise RuntimeError(f"POST /{coll} ({name}) -> {status}: {doc}")
        ident = self.find(token, coll, name)
        if ident is None:
            raise RuntimeError(f"POST /{coll} ({name}) -> 409 but no such {kind}")
        if update:
            self.call("PATCH", f"/{coll}/{ident}", {kind: update}, token)
        return ident

    def setup_accounts(self, admin_token):
        a = self.args
        # keystone-manage bootstrap creates admin, manager, member, reader, service.
        _, doc = self.call("GET", "/roles", token=admin_token)
        roles = {r["name"]: r["id"] for r in doc["roles"] if r.get("domain_id") is None}
        out = {}
        for key, user, password, project, role in (
                ("service", a.service_user, a.service_password, "service", "service"),
                ("demo", "demo", a.demo_password, "demo", "member")):
            if role not in roles:
                roles[role] = self.create_or_update(admin_token, "roles", role, {})
            pid = self.create_or_update(admin_token, "projects", project,
                                        {"domain_id": "default", "enabled": True})
            uid = self.create_or_update(
                admin_token, "users", user,
                {"domain_id": "default", "enabled": True, "password": password,
                 "default_project_id": pid},
                update={"password": password, "enabled": True,
                        "default_project_id": pid})
            self.call("PUT", f"/projects/{pid}/users/{uid}/roles/{roles[role]}",
                      token=admin_token)
            out[key] = {"user": user, "password": password, "project": project,
                        "user_id": uid, "project_id": pid}
        return out

    # --- main ------------------------------------------------------------
    def run(self):
        a = self.args
        t0 = time.monotonic()
        write_config(self.dir, a)
        user = pwd.getpwuid(os.geteuid()).pw_name
        group = grp.getgrgid(os.getegid()).gr_name
        owner = ("--keystone-user", user, "--keystone-group", group)
        # Key repositories do not need the database: set them up alongside.
        self.wait_all([self.manage("db_sync"),
                       self.manage("fernet_setup", *owner),
                       self.manage("credential_setup", *owner)])
        # The server can load while bootstrap fills the database.
        self.start_server()
        self.wait_all([self.manage(
            "bootstrap", "--bootstrap-password", a.admin_password,
            "--bootstrap-username", "admin", "--bootstrap-project-name", "admin",
            "--bootstrap-role-name", "admin", "--bootstrap-region-id", "RegionOne",
            "--bootstrap-public-url", self.url)])
        self.wait_ready(a.startup_timeout)
        admin_token, admin = self.token("admin", a.admin_password, "admin")
        accounts = self.setup_accounts(admin_token)
        # Prove the printed credentials work before announcing them.
        for acc in accounts.values():
            self.token(acc["user"], acc["password"], acc["project"])
        info = {
            "url": self.url, "region": "RegionOne",
            "domain": "Default", "domain_id": "default",
            "dir": self.dir, "pid": os.getpid(),
            "admin": {"user": "admin", "password": a.admin_password,
                      "project": "admin", "user_id": admin["user"]["id"],
                      "project_id": admin["project"]["id"]},
            **accounts,
        }
        sys.stdout.write(json.dumps(info) + "\n")
        sys.stdout.flush()
        print(f"keystone ready on {self.url} in {time.monotonic() - t0:.1f}s",
              file=sys.stderr, flush=True)
        while True:
            try:
                self.server.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                continue
            raise RuntimeError(f"gunicorn exited (status {self.server.returncode})")


def tail(path, n=40):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode(errors="replace").splitlines()[-n:]
        return "\n".join(f"  {l}" for l in lines)
    except OSError:
        return "  (none)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--admin-password", default="admin-secret")
    ap.add_argument("--service-user", default="ember")
    ap.add_argument("--service-password", default="ember-secret")
    ap.add_argument("--demo-password", default="demo-secret")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--startup-timeout", type=float, default=60)
    ap.add_argument("--cache", action="store_true",
                    help="in-process memory cache (~15x faster token issue/"
                         "validation); needs --workers 1")
    args = ap.parse_args()
    if args.cache and args.workers != 1:
        ap.error("--cache needs --workers 1 (each worker would cache on its own)")
    os.makedirs(args.dir, exist_ok=True)

    with socket.socket() as s:  # fail fast rather than talk to someone else
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gunicorn does
        try:
            s.bind((HOST, args.port))
        except OSError as e:
            print(f"keystone: port {args.port} is not free: {e}", file=sys.stderr)
            return 1

    def on_signal(signum, frame):
        raise Stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    launcher = Launcher(args)
    try:
        launcher.run()
    except Stop:
        return 0
    except Exception as e:
        d = launcher.dir
        print(f"keystone: {e}", file=sys.stderr)
        for name in ("manage.log", "gunicorn.log", "keystone.log"):
            print(f"--- {os.path.join(d, name)} (tail):\n{tail(os.path.join(d, name))}",
                  file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        launcher.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
