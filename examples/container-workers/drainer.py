#!/usr/bin/env python3
"""The drainer: receives Ember's scale-in lifecycle hooks and lets a worker
container finish its work before Ember removes it.

For each hook message (a signed webhook POST):
  1. find the victim node's container (label ember.instance_id = the node's
     physical id) on the container engine;
  2. tell the worker to drain (`touch /tmp/drain` inside it, through the
     engine's exec API);
  3. wait until the worker says it has no job in hand (/tmp/drained),
     sending lifecycle heartbeats meanwhile so the hook does not time out;
  4. call complete_lifecycle: only now does Ember remove the container.

Python's standard library only. Settings from the environment:
  EMBER_URL             the gateway (default http://127.0.0.1:8004)
  EMBER_TOKEN           a token (default: the member's, from
                        ember-data/dev-credentials.json of `ember dev`)
  EMBER_WEBHOOK_SECRET  lifecycle_hook.webhook_secret, to check signatures
  DOCKER_HOST           the container engine (unix://…), as Ember uses it
  DRAINER_PORT          where hooks are received (default 8099)
"""

import hashlib
import hmac
import http.client
import http.server
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

EMBER_URL = os.environ.get("EMBER_URL", "http://127.0.0.1:8004").rstrip("/")
SECRET = os.environ.get("EMBER_WEBHOOK_SECRET", "")
DOCKER_HOST = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
PORT = int(os.environ.get("DRAINER_PORT", "8099"))
HEARTBEAT_EVERY = 30  # seconds; the hook's timeout is longer


def log(message):
    print(f"drainer: {message}", flush=True)


def token():
    if os.environ.get("EMBER_TOKEN"):
        return os.environ["EMBER_TOKEN"]
    data_dir = os.environ.get("EMBER_DATA_DIR", "ember-data")
    with open(os.path.join(data_dir, "dev-credentials.json")) as credentials:
        return json.load(credentials)["member"]["token"]


def ember(method, path, body=None):
    """One Ember REST call: (status, JSON body)."""
    request = urllib.request.Request(
        EMBER_URL + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"X-Auth-Token": token(), "Content-Type": "application/json",
                 "OpenStack-API-Version": "clustering 1.12"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


class UnixConnection(http.client.HTTPConnection):
    """HTTP over the container engine's unix socket."""

    def __init__(self, path):
        super().__init__("localhost", timeout=60)
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.socket_path)


def engine(method, path, body=None):
    """One Docker Engine API call: (status, JSON body or None)."""
    if not DOCKER_HOST.startswith("unix://"):
        sys.exit("drainer: DOCKER_HOST must be a unix:// socket")
    connection = UnixConnection(DOCKER_HOST[len("unix://"):])
    payload = None if body is None else json.dumps(body)
    connection.request(method, "/v1.41" + path, body=payload,
                       headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    text = response.read()
    connection.close()
    try:
        return response.status, json.loads(text) if text else None
    except ValueError:
        return response.status, None


def container_of(instance_uuid):
    filters = json.dumps({"label": [f"ember.instance_id={instance_uuid}"]})
    status, containers = engine("GET", "/containers/json?all=true&filters=" + urllib.parse.quote(filters))
    if status != 200 or not containers:
        return None
    return containers[0]["Id"]


def run_in(container, argv):
    """Runs argv inside the container; its exit code."""
    status, created = engine("POST", f"/containers/{container}/exec",
                             {"Cmd": argv, "AttachStdout": False, "AttachStderr": False})
    if status != 201:
        raise RuntimeError(f"exec in {container[:12]}: HTTP {status}: {created}")
    exec_id = created["Id"]
    engine("POST", f"/exec/{exec_id}/start", {"Detach": True, "Tty": False})
    for _ in range(600):
        _, state = engine("GET", f"/exec/{exec_id}/json")
        if state and not state.get("Running"):
            return state.get("ExitCode")
        time.sleep(0.1)
    raise RuntimeError(f"exec {argv} in {container[:12]} did not end")


def drain(message):
    cluster_id = message["cluster_id"]
    action_token = message["lifecycle_action_token"]
    node_id = message["node_id"]
    status, node = ember("GET", f"/clustering/v1/nodes/{node_id}")
    if status != 200:
        log(f"node {node_id}: HTTP {status}; completing so the scale-in goes on")
    else:
        instance = node["node"]["physical_id"]
        container = container_of(instance)
        if container is None:
            log(f"node {node_id}: no container for instance {instance} (already gone)")
        else:
            log(f"node {node['node']['name']}: draining container {container[:12]}")
            run_in(container, ["touch", "/tmp/drain"])
            last_heartbeat = time.monotonic()
            while run_in(container, ["test", "-e", "/tmp/drained"]) != 0:
                if time.monotonic() - last_heartbeat > HEARTBEAT_EVERY:
                    ember("POST", f"/clustering/v1/clusters/{cluster_id}/actions",
                          {"record_lifecycle_heartbeat": {"lifecycle_action_token": action_token}})
                    last_heartbeat = time.monotonic()
                time.sleep(1)
            log(f"node {node['node']['name']}: worker drained, no job in hand")
    status, answer = ember("POST", f"/clustering/v1/clusters/{cluster_id}/actions",
                           {"complete_lifecycle": {"lifecycle_action_token": action_token}})
    log(f"complete_lifecycle {action_token}: HTTP {status}"
        + ("" if status == 202 else f" {answer}"))


class Hooks(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if SECRET:
            expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            if not hmac.compare_digest(expected, self.headers.get("X-Ember-Signature", "")):
                log("refused a message with a bad signature")
                self.send_response(401)
                self.end_headers()
                return
        try:
            message = json.loads(body)
        except ValueError:
            self.send_response(400)
            self.end_headers()
            return
        # Answer at once (a webhook that takes long is retried); drain aside.
        self.send_response(200)
        self.end_headers()
        threading.Thread(target=self.drain_logged, args=(message,), daemon=True).start()

    @staticmethod
    def drain_logged(message):
        try:
            drain(message)
        except Exception as error:  # the hook's deadline still removes the node
            log(f"draining {message.get('node_id')} failed: {error}")

    def log_message(self, *_):
        pass


if __name__ == "__main__":
    server = http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Hooks)
    log(f"receiving hooks on http://127.0.0.1:{PORT}/hook (engine {DOCKER_HOST})")
    server.serve_forever()
