#!/usr/bin/env bash
# Real OpenStack Heat (PyPI openstack-heat 27.0.1, the 2026.2 release) on the
# test cloud that start-openstack.sh / cloud.sh runs, as the reference Ember is
# measured against.  heat-api (WSGI under gunicorn, 1 worker) on
# 127.0.0.1:$HEAT_PORT (18004) and heat-engine (1 worker, convergence), on the
# cloud's MariaDB (database `heat`) and RabbitMQ.  Idempotent: what is done or
# running already is skipped.  The cloud must be up first.
#
#   tests/openstack/cloud.sh            # the cloud (or start-openstack.sh)
#   tests/openstack/heat.sh             # Heat; prints where it listens
#   target/openstack/venv/bin/python tests/openstack/heat_smoke.py
#   tests/openstack/heat.sh stop        # stops exactly heat-api and heat-engine
#
# (stop-openstack.sh does not know Heat: run `heat.sh stop` before it.)
#
# Where: into the cloud's own venv $OS_BASE/venv.  `pip install --dry-run` with
# requirements.lock as constraints adds 16 packages (heat, heatclient and
# the clients heat imports: aodh, blazar, ironic, magnum, mistral, octavia,
# swift, trove, zaqar, zun, plus croniter, docker, websocket-client, yaql)
# and changes none of the 179 pins; `pip check` is clean afterwards.  The
# heatclient OSC plugin comes with it: `openstack stack ...` works in that venv.
# If a later lock ever conflicts, the script falls back to its own venv
# $OS_BASE/heat-venv.
#
# Keystone additions (idempotent, nothing existing is changed): user `heat`
# (admin + service in project `service`), role `heat_stack_user`, domain
# `heat` with its admin `heat_domain_admin` (role admin on that domain) for
# stack-domain users, and the `orchestration` service with public/internal/admin
# endpoints http://127.0.0.1:18004/v1/%(tenant_id)s in RegionOne.  No
# heat_stack_owner role: Heat 27's default policies let project members
# (role `member`, which demo has) create stacks.
#
# Measured (2 cores, Rust builds running alongside): install from a warm pip
# cache 5 s; heat.sh from nothing to up 11 s (db_sync 2 s); heat_smoke.py's
# 7-resource stack CREATE_COMPLETE in 5-13 s (the server is most of it), delete 3.6-5.8 s.
#
# Traps hit (exact errors) and fixes:
#  1. Waiting for heat-engine with GET /v1/<project>/services (an RPC call) right
#     after starting it cost 60 s: the call went out before the engine had
#     declared its queue, and heat-api logged, after rpc_response_timeout,
#     `ERROR heat.common.wsgi [...] Returning 503 to user: The server is
#     currently unavailable. Please try again at a later time.` (the same as
#     RECIPE.md's trap 8).  Fix: wait for the engine's row in heat.service (its
#     RPC server starts before it writes the row), then ask GET /services once.
#  2. The first stack failed with `CREATE_FAILED: EndpointNotFound:
#     resources.server: public endpoint for cloudformation service in RegionOne
#     region not found`.  OS::Nova::Server's default user_data_format
#     HEAT_CFNTOOLS writes the CFN metadata URL into the user data, taken from
#     [DEFAULT] heat_metadata_server_url or else the catalog's `cloudformation`
#     service, and no heat-api-cfn runs here.  Fix: heat_metadata_server_url
#     (and heat_waitcondition_server_url) = http://127.0.0.1:18000; nothing
#     listens there and nothing is put in the catalog (the fake virt driver's
#     servers never call back).  CFN signals (WaitCondition, SoftwareDeployment
#     over POLL_SERVER_CFN) therefore do not work here.
#  3. python-blazarclient 4.6.0 (the newest, pulled in by Heat's
#     python-blazarclient>=1.0.1) made every `openstack` CLI call of the cloud's
#     venv print to stderr `Could not load 'reservation_host_unset': module
#     'blazarclient.v1.shell_commands.hosts' has no attribute
#     'UnsetAttributeHost'` (its entry point names UnsetAttributeHost, the class
#     is UnsetAttributesHost).  Fix: python-blazarclient==4.5.0 (no such entry
#     point), and the install step checks that `openstack help token issue`
#     prints nothing on stderr.
#  Noise in the logs: `Option "convergence_engine" ... is deprecated for
#  removal`, the same for `deferred_auth_method` (both set explicitly all the
#  same), `The python binding code in neutronclient is deprecated`, the
#  in-process token cache warning of keystonemiddleware, and the long list of
#  HIDDEN/DEPRECATED resource types at engine start.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
OS=${OS_BASE:-$REPO/target/openstack}
VENV=$OS/venv
ETC=$OS/etc
LOGS=$OS/logs
RUN=$OS/run
DATA=$OS/data
WSGI=$OS/wsgi

DB_PORT=${DB_PORT:-3317}
RABBIT_PORT=${RABBIT_PORT:-5674}
KEYSTONE_PORT=${KEYSTONE_PORT:-15000}
HEAT_PORT=${HEAT_PORT:-18004}
HEAT_CFN_PORT=${HEAT_CFN_PORT:-18000}   # only written into user data; nothing listens
SERVICE_PASSWORD=${SERVICE_PASSWORD:-secret}
DB_USER=openstack
DB_PASS=${DB_PASS:-secret}
H=127.0.0.1
KS=http://$H:$KEYSTONE_PORT
TRANSPORT=rabbit://guest:guest@$H:$RABBIT_PORT/
dburl() { echo "mysql+pymysql://$DB_USER:$DB_PASS@$H:$DB_PORT/$1?charset=utf8mb4"; }

# openstack-heat 27.0.1 and what it adds to the cloud's venv, pinned (from the
# dry run against requirements.lock; python-blazarclient held at 4.5.0, trap 3).
HEAT_PKGS="openstack-heat==27.0.1 python-heatclient==5.3.0 aodhclient==3.12.0
  croniter==7.0.0 docker==7.2.0 python-blazarclient==4.5.0 python-ironicclient==6.3.0
  python-magnumclient==5.0.0 python-mistralclient==6.3.0 python-octaviaclient==3.15.0
  python-swiftclient==4.11.0 python-troveclient==8.11.0 python-zaqarclient==4.7.0
  python-zunclient==5.5.0 websocket-client==1.9.2 yaql==3.2.0"
LOCK=$HERE/requirements.lock

T0=$(date +%s)
log() { echo "[$(($(date +%s)-T0))s] $*"; }
die() { echo "ERROR: $*" >&2; exit 1; }

alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }
group_alive() { kill -0 -- "-$1" 2>/dev/null; }

# ---------------------------------------------------------------- stop
if [ "${1:-}" = stop ]; then
  pids=()
  for n in heat-api heat-engine; do
    if alive "$n"; then
      p=$(cat "$RUN/$n.pid"); kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
      pids+=("$p"); echo "stopping $n ($p)"
    fi
  done
  for ((i=0; i<40; i++)); do
    left=0; for p in "${pids[@]}"; do group_alive "$p" && left=1; done
    [ $left = 0 ] && break; sleep 0.5
  done
  for p in "${pids[@]}"; do group_alive "$p" && { echo "  KILL group $p"; kill -KILL -- "-$p" 2>/dev/null || true; }; done
  rm -f "$RUN/heat-api.pid" "$RUN/heat-engine.pid"
  exit 0
fi

# start_bg NAME CMD...: own session (setsid), log to logs/NAME.log, PID in run/NAME.pid
start_bg() {
  local name=$1; shift
  if alive "$name"; then log "$name already running (pid $(cat "$RUN/$name.pid"))"; return 0; fi
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$RUN/$name.pid"
  log "started $name (pid $!)"
}
wait_http() { # NAME URL [timeout]: until the URL answers any HTTP status < 500
  local name=$1 url=$2 t=${3:-120} i code
  for ((i=0; i<t; i++)); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url" || true)
    if [ -n "$code" ] && [ "$code" != 000 ] && [ "$code" -lt 500 ]; then log "$name answers ($code)"; return 0; fi
    alive "$name" || { tail -30 "$LOGS/$name.log"; die "$name died (see $LOGS/$name.log)"; }
    sleep 1
  done
  tail -30 "$LOGS/$name.log"; die "$name did not answer on $url within ${t}s"
}
once() { # NAME STAMP CMD...: one-shot step unless STAMP exists; log to logs/NAME.log
  local name=$1 stamp=$2; shift 2
  [ -f "$stamp" ] && return 0
  log "$name"
  "$@" > "$LOGS/$name.log" 2>&1 || { tail -20 "$LOGS/$name.log"; die "$name failed (see $LOGS/$name.log)"; }
  touch "$stamp"
}

mkdir -p "$ETC/heat" "$LOGS" "$RUN" "$DATA/heat" "$WSGI"

# ---------------------------------------------------------------- 0. the cloud must be up
[ -x "$VENV/bin/python" ] || die "no cloud venv at $VENV: run tests/openstack/cloud.sh first"
curl -sf -o /dev/null --max-time 5 "$KS/v3" || die "Keystone does not answer on $KS: run tests/openstack/cloud.sh first"
mariadb --defaults-file="$ETC/my.cnf" -uroot -e 'select 1' >/dev/null 2>&1 || die "MariaDB on $H:$DB_PORT does not answer"
(exec 3<>"/dev/tcp/$H/$RABBIT_PORT") 2>/dev/null || die "RabbitMQ on $H:$RABBIT_PORT does not answer"
if (exec 3<>"/dev/tcp/$H/$HEAT_PORT") 2>/dev/null && ! alive heat-api; then
  die "something not started by heat.sh answers on $H:$HEAT_PORT (set HEAT_PORT)"
fi

# ---------------------------------------------------------------- 1. install
# HV: the venv Heat runs from.  The cloud's venv if Heat fits its pins, else heat-venv.
HV=$VENV
[ -f "$OS/heat-venv/.installed" ] && HV=$OS/heat-venv
if [ ! -f "$HV/.heat-installed" ]; then
  # shellcheck disable=SC2086
  if "$VENV/bin/pip" install -q --dry-run $HEAT_PKGS -c "$LOCK" > "$LOGS/heat-pip-dryrun.log" 2>&1; then
    log "pip install openstack-heat 27.0.1 into $VENV (no pin of requirements.lock changes)"
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install -q $HEAT_PKGS -c "$LOCK" > "$LOGS/heat-pip.log" 2>&1 \
      || { tail -20 "$LOGS/heat-pip.log"; die "pip install failed (see $LOGS/heat-pip.log)"; }
    "$VENV/bin/pip" check > "$LOGS/heat-pip-check.log" 2>&1 \
      || { cat "$LOGS/heat-pip-check.log"; die "pip check fails after installing Heat"; }
    # the cloud's `openstack` CLI must stay quiet (trap 3)
    err=$(OS_CLOUD= OS_CLIENT_CONFIG_FILE=/dev/null "$VENV/bin/openstack" help token issue 2>&1 >/dev/null || true)
    [ -z "$err" ] || die "the openstack CLI complains after installing Heat's client plugins: $err"
    HV=$VENV
  else
    # Fallback (not needed with today's lock): own venv, with the lock's pins
    # (less Heat's own packages) as constraints; if pip cannot resolve with
    # them, without constraints.
    log "Heat does not fit requirements.lock (see $LOGS/heat-pip-dryrun.log): own venv $OS/heat-venv"
    HV=$OS/heat-venv
    [ -x "$HV/bin/python" ] || "${PYTHON:-python3}" -m venv "$HV"
    "$HV/bin/pip" install -q -U pip setuptools wheel
    names=$(echo $HEAT_PKGS | tr ' ' '\n' | sed 's/==.*//' | tr 'A-Z_.' 'a-z--')
    : > "$OS/heat-constraints.txt"
    while IFS= read -r line; do
      n=$(echo "${line%%==*}" | tr 'A-Z_.' 'a-z--')
      echo "$names" | grep -qx "$n" || echo "$line" >> "$OS/heat-constraints.txt"
    done < "$LOCK"
    # shellcheck disable=SC2086
    "$HV/bin/pip" install -q openstack-heat==27.0.1 python-heatclient==5.3.0 gunicorn PyMySQL \
      -c "$OS/heat-constraints.txt" > "$LOGS/heat-pip.log" 2>&1 \
      || "$HV/bin/pip" install -q openstack-heat==27.0.1 python-heatclient==5.3.0 gunicorn PyMySQL \
      >> "$LOGS/heat-pip.log" 2>&1 || { tail -20 "$LOGS/heat-pip.log"; die "pip install failed (see $LOGS/heat-pip.log)"; }
    touch "$HV/.installed"
  fi
  touch "$HV/.heat-installed"
fi
HEAT_VERSION=$("$HV/bin/python" -c 'from heat import version; print(version.version_info.version_string())')
log "openstack-heat $HEAT_VERSION in $HV"

# ---------------------------------------------------------------- 2. heat.conf
cp "$HV/etc/heat/api-paste.ini" "$ETC/heat/"
rm -rf "$ETC/heat/environment.d" "$ETC/heat/templates"
cp -r "$HV/etc/heat/environment.d" "$HV/etc/heat/templates" "$ETC/heat/"
cat > "$ETC/heat/heat.conf" <<EOF
[DEFAULT]
transport_url = $TRANSPORT
num_engine_workers = 1
convergence_engine = true
deferred_auth_method = trusts
region_name_for_services = RegionOne
stack_user_domain_name = heat
stack_domain_admin = heat_domain_admin
stack_domain_admin_password = $SERVICE_PASSWORD
environment_dir = $ETC/heat/environment.d
template_dir = $ETC/heat/templates
plugin_dirs = $DATA/heat/plugins
# trap 2: no heat-api-cfn runs; the servers of the fake virt driver never call back.
heat_metadata_server_url = http://$H:$HEAT_CFN_PORT
heat_waitcondition_server_url = http://$H:$HEAT_CFN_PORT/v1/waitcondition
[database]
connection = $(dburl heat)
[paste_deploy]
api_paste_config = $ETC/heat/api-paste.ini
[heat_api]
bind_host = $H
bind_port = $HEAT_PORT
workers = 1
[keystone_authtoken]
www_authenticate_uri = $KS
auth_url = $KS
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = heat
password = $SERVICE_PASSWORD
service_token_roles_required = true
[trustee]
auth_url = $KS
auth_type = password
user_domain_name = Default
username = heat
password = $SERVICE_PASSWORD
[clients]
endpoint_type = public
[clients_keystone]
auth_uri = $KS
[ec2authtoken]
auth_uri = $KS/v3
[oslo_concurrency]
lock_path = $DATA/locks
[oslo_messaging_notifications]
driver = noop
EOF
mkdir -p "$DATA/heat/plugins" "$DATA/locks"

# ---------------------------------------------------------------- 3. database
mariadb --defaults-file="$ETC/my.cnf" -uroot <<EOF
CREATE DATABASE IF NOT EXISTS heat CHARACTER SET utf8mb4;
GRANT ALL ON heat.* TO '$DB_USER'@'127.0.0.1'; GRANT ALL ON heat.* TO '$DB_USER'@'localhost';
EOF
HC="--config-file $ETC/heat/heat.conf"
once heat-dbsync "$DATA/heat/.dbsynced" "$HV/bin/heat-manage" $HC db_sync

# ---------------------------------------------------------------- 4. Keystone
log "keystone: heat user, stack-user domain, orchestration endpoints"
OS_CLIENT_CONFIG_FILE=$OS/clouds.yaml "$VENV/bin/python" - <<EOF
import openstack
c = openstack.connect(cloud='os-admin')
idn = c.identity
def one(gen):
    l = list(gen); return l[0] if l else None
dflt = idn.find_domain('default')
service = idn.find_project('service', domain_id=dflt.id)
role = lambda n: idn.find_role(n) or idn.create_role(name=n)
def user(name, dom):
    return idn.find_user(name, domain_id=dom.id) or idn.create_user(
        name=name, password='$SERVICE_PASSWORD', domain_id=dom.id)
heat = user('heat', dflt)
for rn in ('admin', 'service'):
    idn.assign_project_role_to_user(service, heat, role(rn))
role('heat_stack_user')
hd = idn.find_domain('heat') or idn.create_domain(
    name='heat', description='Owns users and projects created by heat')
hda = user('heat_domain_admin', hd)
idn.assign_domain_role_to_user(hd, hda, role('admin'))
svc = one(idn.services(type='orchestration')) or idn.create_service(
    name='heat', type='orchestration', description='Orchestration')
have = {e.interface for e in idn.endpoints(service_id=svc.id)}
for iface in ('public', 'internal', 'admin'):
    if iface not in have:
        idn.create_endpoint(service_id=svc.id, interface=iface, region_id='RegionOne',
                            url='http://$H:$HEAT_PORT/v1/%(tenant_id)s')
print('keystone ok')
EOF

# ---------------------------------------------------------------- 5. heat-api, heat-engine
cat > "$WSGI/heat_wsgi.py" <<EOF
import os, sys
os.environ.update({})
sys.argv = ['heat-api', '--config-file', '$ETC/heat/heat.conf']
from heat.wsgi.api import application  # noqa
EOF
start_bg heat-api "$HV/bin/gunicorn" --chdir "$WSGI" --name os-heat-api -b "$H:$HEAT_PORT" \
  -w 1 --timeout 300 --graceful-timeout 10 --access-logfile - heat_wsgi:application
wait_http heat-api "http://$H:$HEAT_PORT/"
# heat-engine is up when it has registered itself in heat.service; that row is
# written after its RPC server started (trap 1: not by calling GET /services).
since=1970-01-01
alive heat-engine || since=$(mariadb --defaults-file="$ETC/my.cnf" -uroot -N -e 'SELECT UTC_TIMESTAMP() - INTERVAL 1 SECOND')
start_bg heat-engine "$HV/bin/heat-engine" $HC
for ((i=0; i<120; i++)); do
  n=$(mariadb --defaults-file="$ETC/my.cnf" -uroot -N -e \
    "SELECT COUNT(*) FROM heat.service WHERE deleted_at IS NULL AND created_at >= '$since'" 2>/dev/null || echo 0)
  [ "${n:-0}" -ge 1 ] && break
  alive heat-engine || { tail -30 "$LOGS/heat-engine.log"; die "heat-engine died (see $LOGS/heat-engine.log)"; }
  sleep 1
done
[ "${n:-0}" -ge 1 ] || { tail -30 "$LOGS/heat-engine.log"; die "heat-engine did not register within 120s (see $LOGS/heat-engine.log)"; }
# and it answers RPC through heat-api (GET /services is admin-only)
OS_CLIENT_CONFIG_FILE=$OS/clouds.yaml "$VENV/bin/python" - <<'PYEOF' || die "heat-api -> heat-engine RPC fails (see $LOGS/heat-api.log)"
import openstack, sys
c = openstack.connect(cloud='os-admin')
r = c.orchestration.get('/services')
up = [s for s in r.json().get('services', []) if s.get('status') == 'up'] if r.ok else []
print('heat-engine up: %d engine service(s) report up' % len(up)); sys.exit(0 if up else 1)
PYEOF
alive heat-api || die "heat-api died (see $LOGS/heat-api.log)"
log "HEAT UP in $(($(date +%s)-T0))s: openstack-heat $HEAT_VERSION ($HV); heat-api http://$H:$HEAT_PORT/v1/%(tenant_id)s (catalog type orchestration), heat-engine pid $(cat "$RUN/heat-engine.pid"); logs $LOGS/heat-{api,engine}.log; stop: $0 stop"
