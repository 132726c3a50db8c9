#!/usr/bin/env bash
# (Ember's copy of ../shared/openstack/start-openstack.sh; changed only where
# marked "Ember:": tests/openstack/cloud.sh runs it.)
# Start a minimal but real OpenStack (2026.2 wheels from PyPI) on 127.0.0.1.
# Keystone, Glance, Placement, Nova (fake virt driver), Neutron (ML2 + fake
# agent mech driver), Cinder (fake volume driver), on a private MariaDB and a
# private RabbitMQ node.  Idempotent: re-running skips what is already done or
# already running.  See RECIPE.md next to this file.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)   # this script, requirements.lock and fake_agent.py
OS=${OS_BASE:-$PWD/target/openstack}   # runtime files: venv, configs, data, logs, pids
VENV=$OS/venv
ETC=$OS/etc
LOGS=$OS/logs
RUN=$OS/run
DATA=$OS/data
WSGI=$OS/wsgi
PY=${PYTHON:-python3}

# --- ports (all on 127.0.0.1) ---
DB_PORT=${DB_PORT:-3317}
RABBIT_PORT=${RABBIT_PORT:-5674}
RABBIT_DIST_PORT=${RABBIT_DIST_PORT:-25674}
EPMD_PORT=${EPMD_PORT:-4372}
KEYSTONE_PORT=${KEYSTONE_PORT:-15000}
GLANCE_PORT=${GLANCE_PORT:-19292}
PLACEMENT_PORT=${PLACEMENT_PORT:-18778}
NOVA_PORT=${NOVA_PORT:-18774}
NEUTRON_PORT=${NEUTRON_PORT:-19696}
CINDER_PORT=${CINDER_PORT:-18776}

ADMIN_PASSWORD=${ADMIN_PASSWORD:-admin}
DEMO_PASSWORD=${DEMO_PASSWORD:-demo}
SERVICE_PASSWORD=${SERVICE_PASSWORD:-secret}
DB_USER=openstack
DB_PASS=${DB_PASS:-secret}
COMPUTE_HOST=${COMPUTE_HOST:-oscompute1}   # nova-compute host == fake neutron agent host
H=127.0.0.1
KS=http://$H:$KEYSTONE_PORT
TRANSPORT=rabbit://guest:guest@$H:$RABBIT_PORT/
dburl() { echo "mysql+pymysql://$DB_USER:$DB_PASS@$H:$DB_PORT/$1?charset=utf8mb4"; }

T0=$(date +%s)
log() { echo "[$(($(date +%s)-T0))s] $*"; }
die() { echo "ERROR: $*" >&2; exit 1; }

mkdir -p "$ETC" "$LOGS" "$RUN" "$DATA" "$WSGI"

# ---------------------------------------------------------------- helpers
alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

# start_bg NAME CMD...: run in its own session (setsid), log to logs/NAME.log,
# remember the PID in run/NAME.pid.  Skips if that PID is still alive.
start_bg() {
  local name=$1; shift
  if alive "$name"; then log "$name already running (pid $(cat "$RUN/$name.pid"))"; return 0; fi
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$RUN/$name.pid"
  log "started $name (pid $!)"
}

# wait_http NAME URL [timeout]: until the URL answers any HTTP status < 500
wait_http() {
  local name=$1 url=$2 t=${3:-120} i code
  for ((i=0; i<t; i++)); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url" || true)
    if [ -n "$code" ] && [ "$code" != 000 ] && [ "$code" -lt 500 ]; then log "$name answers ($code)"; return 0; fi
    alive "$name" || { tail -30 "$LOGS/$name.log"; die "$name died (see $LOGS/$name.log)"; }
    sleep 1
  done
  tail -30 "$LOGS/$name.log"; die "$name did not answer on $url within ${t}s"
}

# once NAME STAMP CMD...: run a one-shot step (db sync) unless STAMP exists; log to logs/NAME.log
once() {
  local name=$1 stamp=$2; shift 2
  [ -f "$stamp" ] && return 0
  log "$name"
  "$@" > "$LOGS/$name.log" 2>&1 || { tail -20 "$LOGS/$name.log"; die "$name failed (see $LOGS/$name.log)"; }
  touch "$stamp"
}

gunicorn_svc() { # NAME PORT MODULE WORKERS
  start_bg "$1" "$VENV/bin/gunicorn" --chdir "$WSGI" --name "os-$1" -b "$H:$2" \
    -w "$4" --timeout 300 --graceful-timeout 10 --access-logfile - "$3:application"
}

# ---------------------------------------------------------------- 1. venv
if [ ! -f "$VENV/.installed" ]; then
  log "creating venv + pip install (one pip process)"
  [ -x "$VENV/bin/python" ] || $PY -m venv "$VENV"
  "$VENV/bin/pip" install -q -U pip setuptools wheel
  if [ -f "$HERE/requirements.lock" ]; then
    "$VENV/bin/pip" install -q -r "$HERE/requirements.lock"
  else
    "$VENV/bin/pip" install -q keystone==30.0.0 glance==33.0.0 \
      openstack-placement==16.0.0 nova==34.0.0 neutron==29.0.0 cinder==29.0.0 \
      python-openstackclient gunicorn PyMySQL pyroute2  # pyroute2: trap, see RECIPE.md
  fi
  touch "$VENV/.installed"
  log "venv ready"
fi
# Ember: `--venv-only` installs the venv and stops there (CI installs it in
# the background while it builds); the binary check moved below it for that.
[ "${1:-}" = --venv-only ] && exit 0
for b in mariadbd mariadb-install-db epmd curl; do
  command -v $b >/dev/null || die "$b missing: apt-get update && apt-get install -y mariadb-server rabbitmq-server curl"
done
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || die "rabbitmq-server missing: apt-get install -y rabbitmq-server"
export PATH=$VENV/bin:$PATH
SP=$("$VENV/bin/python" -c 'import sysconfig;print(sysconfig.get_paths()["purelib"])')

# ---------------------------------------------------------------- 2. configs
mkdir -p "$ETC"/{keystone,glance,placement,nova,neutron,cinder} \
  "$DATA"/{keystone/fernet-keys,keystone/credential-keys,glance/images,glance/staging,glance/tasks,nova/instances,neutron,cinder,locks,mysql,rabbit} "$LOGS/rabbit"

authtoken() { # USER
cat <<EOF
[keystone_authtoken]
www_authenticate_uri = $KS
auth_url = $KS
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $1
password = $SERVICE_PASSWORD
service_token_roles_required = true
EOF
}
ksauth() { # SECTION USER  (service-user credentials for calls to other services)
cat <<EOF
[$1]
auth_url = $KS
auth_type = password
project_domain_name = Default
user_domain_name = Default
project_name = service
username = $2
password = $SERVICE_PASSWORD
region_name = RegionOne
EOF
}

cat > "$ETC/my.cnf" <<EOF
[mysqld]
datadir=$DATA/mysql
port=$DB_PORT
bind-address=$H
socket=$RUN/mysql.sock
pid-file=$RUN/mariadbd.pid
log-error=$LOGS/mariadb.log
user=root
innodb_buffer_pool_size=128M
innodb_flush_log_at_trx_commit=2
max_connections=1000
skip-log-bin
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
[client]
socket=$RUN/mysql.sock
port=$DB_PORT
EOF

cat > "$ETC/rabbitmq.conf" <<EOF
listeners.tcp.default = $H:$RABBIT_PORT
loopback_users.guest = true
disk_free_limit.absolute = 50MB
EOF
echo '[].' > "$ETC/rabbit_enabled_plugins"
: > "$ETC/rabbitmq-env.conf"
cat > "$ETC/rabbit-env.sh" <<EOF
export HOME=$DATA/rabbit
export RABBITMQ_NODENAME=osrabbit@localhost
export RABBITMQ_NODE_IP_ADDRESS=$H
export RABBITMQ_NODE_PORT=$RABBIT_PORT
export RABBITMQ_DIST_PORT=$RABBIT_DIST_PORT
export ERL_EPMD_PORT=$EPMD_PORT
export ERL_EPMD_ADDRESS=$H
export RABBITMQ_MNESIA_BASE=$DATA/rabbit/mnesia
export RABBITMQ_LOG_BASE=$LOGS/rabbit
export RABBITMQ_CONFIG_FILE=$ETC/rabbitmq.conf
export RABBITMQ_ENABLED_PLUGINS_FILE=$ETC/rabbit_enabled_plugins
export RABBITMQ_PID_FILE=$RUN/rabbit.pid
export RABBITMQ_CONF_ENV_FILE=$ETC/rabbitmq-env.conf
export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
EOF

# keystone
cat > "$ETC/keystone/keystone.conf" <<EOF
[DEFAULT]
[database]
connection = $(dburl keystone)
[token]
provider = fernet
[fernet_tokens]
key_repository = $DATA/keystone/fernet-keys
[credential]
key_repository = $DATA/keystone/credential-keys
EOF

# glance
cp "$VENV/etc/glance/glance-api-paste.ini" "$ETC/glance/"
cat > "$ETC/glance/glance-api.conf" <<EOF
[DEFAULT]
enabled_backends = fs:file
worker_self_reference_url = http://$H:$GLANCE_PORT
[database]
connection = $(dburl glance)
$(authtoken glance)
[paste_deploy]
flavor = keystone
config_file = $ETC/glance/glance-api-paste.ini
[glance_store]
default_backend = fs
[fs]
filesystem_store_datadir = $DATA/glance/images
[os_glance_staging_store]
filesystem_store_datadir = $DATA/glance/staging
[os_glance_tasks_store]
filesystem_store_datadir = $DATA/glance/tasks
[import_filtering_opts]
# Ember: its tests serve image data for web-download imports on this port
# (tests/openstack/cloud.sh); Glance allows only 80 and 443 by default. Both
# lists are bounded: written in brackets, or Glance refuses every URI.
allowed_ports = [80,443,${IMAGE_SERVER_PORT:-18780}]
# and on loopback, which Glance refuses unless allowed by name.
allowed_hosts = [127.0.0.1]
[oslo_concurrency]
lock_path = $DATA/locks
EOF

# placement
cat > "$ETC/placement/placement.conf" <<EOF
[DEFAULT]
[api]
auth_strategy = keystone
[placement_database]
connection = $(dburl placement)
$(authtoken placement)
EOF

# nova
cp "$VENV/etc/nova/api-paste.ini" "$ETC/nova/"
cat > "$ETC/nova/nova.conf" <<EOF
[DEFAULT]
transport_url = $TRANSPORT
host = $COMPUTE_HOST
my_ip = $H
compute_driver = fake.FakeDriverWithoutFakeNodes
state_path = $DATA/nova
instances_path = $DATA/nova/instances
vif_plugging_is_fatal = false
vif_plugging_timeout = 0
osapi_compute_workers = 1
metadata_workers = 1
[api]
auth_strategy = keystone
[wsgi]
api_paste_config = $ETC/nova/api-paste.ini
[api_database]
connection = $(dburl nova_api)
[database]
connection = $(dburl nova)
$(authtoken nova)
$(ksauth placement nova)
$(ksauth neutron nova)
$(ksauth cinder nova)
os_region_name = RegionOne
$(ksauth service_user nova)
send_service_user_token = true
[conductor]
workers = 1
[scheduler]
workers = 1
discover_hosts_in_cells_interval = 30
[glance]
region_name = RegionOne
[oslo_concurrency]
lock_path = $DATA/locks
[oslo_messaging_notifications]
driver = noop
[vnc]
enabled = false
EOF

# nova-compute gets the same file minus DB connections (like devstack's nova-cpu.conf);
# with [api_database] set it tries direct DB access at start and logs
# "ERROR nova.db.main.api ... No DB access allowed in nova-compute".
awk '/^\[/{skip=($0=="[api_database]"||$0=="[database]")} !skip' "$ETC/nova/nova.conf" > "$ETC/nova/nova-cpu.conf"

# neutron
cp "$VENV/etc/neutron/api-paste.ini" "$ETC/neutron/"
cat > "$ETC/neutron/neutron.conf" <<EOF
[DEFAULT]
core_plugin = ml2
service_plugins = router
transport_url = $TRANSPORT
auth_strategy = keystone
api_paste_config = $ETC/neutron/api-paste.ini
state_path = $DATA/neutron
api_workers = 1
rpc_workers = 1
rpc_state_report_workers = 1
notify_nova_on_port_status_changes = true
notify_nova_on_port_data_changes = true
[database]
connection = $(dburl neutron)
$(authtoken neutron)
$(ksauth nova neutron)
[oslo_concurrency]
lock_path = $DATA/locks
[oslo_messaging_notifications]
driver = noop
EOF
cat > "$ETC/neutron/ml2_conf.ini" <<EOF
[ml2]
type_drivers = flat,vlan
tenant_network_types = vlan
mechanism_drivers = fake_agent
extension_drivers = port_security
[ml2_type_flat]
flat_networks = public
[ml2_type_vlan]
network_vlan_ranges = physnet1:1000:1999
[securitygroup]
enable_security_group = true
EOF

# cinder
cp "$VENV/etc/cinder/api-paste.ini" "$VENV/etc/cinder/resource_filters.json" "$ETC/cinder/"
cat > "$ETC/cinder/cinder.conf" <<EOF
[DEFAULT]
transport_url = $TRANSPORT
auth_strategy = keystone
api_paste_config = $ETC/cinder/api-paste.ini
resource_query_filters_file = $ETC/cinder/resource_filters.json
state_path = $DATA/cinder
my_ip = $H
host = oscinder1
osapi_volume_workers = 1
enabled_backends = fake
[fake]
volume_driver = cinder.tests.fake_driver.FakeLoggingVolumeDriver
volume_backend_name = fake
[database]
connection = $(dburl cinder)
$(authtoken cinder)
$(ksauth nova cinder)
$(ksauth service_user cinder)
send_service_user_token = true
[oslo_concurrency]
lock_path = $DATA/locks
[oslo_messaging_notifications]
driver = noop
EOF

# WSGI wrappers: point each app at its config and hide gunicorn's argv from oslo.config
wsgi_wrapper() { # FILE ARGV-PYLIST ENV-PYDICT IMPORT
cat > "$WSGI/$1.py" <<EOF
import os, sys
os.environ.update($3)
sys.argv = $2
from $4 import application  # noqa
EOF
}
wsgi_wrapper keystone_wsgi "['keystone-api']" "{'OS_KEYSTONE_CONFIG_FILES': '$ETC/keystone/keystone.conf'}" keystone.wsgi.api
wsgi_wrapper glance_wsgi "['glance-api']" "{'OS_GLANCE_CONFIG_DIR': '$ETC/glance'}" glance.wsgi.api
wsgi_wrapper placement_wsgi "['placement-api']" "{'OS_PLACEMENT_CONFIG_DIR': '$ETC/placement'}" placement.wsgi.api
wsgi_wrapper nova_wsgi "['nova-api']" "{'OS_NOVA_CONFIG_DIR': '$ETC/nova'}" nova.wsgi.osapi_compute
wsgi_wrapper neutron_wsgi "['neutron-api']" "{'OS_NEUTRON_CONFIG_DIR': '$ETC/neutron', 'OS_NEUTRON_CONFIG_FILES': 'neutron.conf;ml2_conf.ini'}" neutron.wsgi.api
wsgi_wrapper cinder_wsgi "['cinder-api', '--config-file', '$ETC/cinder/cinder.conf']" "{}" cinder.wsgi.api

cat > "$OS/openrc" <<EOF
export OS_AUTH_URL=$KS/v3
export OS_IDENTITY_API_VERSION=3
export OS_USERNAME=admin
export OS_PASSWORD=$ADMIN_PASSWORD
export OS_PROJECT_NAME=admin
export OS_USER_DOMAIN_NAME=Default
export OS_PROJECT_DOMAIN_NAME=Default
export OS_REGION_NAME=RegionOne
EOF
cat > "$OS/clouds.yaml" <<EOF
clouds:
  os-admin:
    auth: {auth_url: "$KS/v3", username: admin, password: "$ADMIN_PASSWORD", project_name: admin, user_domain_name: Default, project_domain_name: Default}
    region_name: RegionOne
    identity_api_version: 3
  os-demo:
    auth: {auth_url: "$KS/v3", username: demo, password: "$DEMO_PASSWORD", project_name: demo, user_domain_name: Default, project_domain_name: Default}
    region_name: RegionOne
    identity_api_version: 3
EOF

# ---------------------------------------------------------------- 3. MariaDB
if [ ! -d "$DATA/mysql/mysql" ]; then
  log "initialising MariaDB datadir"
  mariadb-install-db --defaults-file="$ETC/my.cnf" --auth-root-authentication-method=normal > "$LOGS/mariadb-install.log" 2>&1
fi
start_bg mariadb mariadbd --defaults-file="$ETC/my.cnf"
for i in $(seq 60); do mariadb --defaults-file="$ETC/my.cnf" -uroot -e 'select 1' >/dev/null 2>&1 && break; sleep 1; done
mariadb --defaults-file="$ETC/my.cnf" -uroot -e 'select 1' >/dev/null || die "MariaDB not answering (see $LOGS/mariadb.log)"
log "MariaDB up on $H:$DB_PORT"
{
  echo "CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';"
  echo "CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';"
  for d in keystone glance placement nova_api nova nova_cell0 neutron cinder; do
    echo "CREATE DATABASE IF NOT EXISTS $d CHARACTER SET utf8mb4;"
    echo "GRANT ALL ON $d.* TO '$DB_USER'@'127.0.0.1'; GRANT ALL ON $d.* TO '$DB_USER'@'localhost';"
  done
} | mariadb --defaults-file="$ETC/my.cnf" -uroot

# ---------------------------------------------------------------- 4. RabbitMQ (own node + own epmd)
. "$ETC/rabbit-env.sh"
start_bg epmd epmd -port "$EPMD_PORT" -address "$H"
sleep 0.5
if ! alive rabbitmq; then
  rm -f "$RUN/rabbit.pid"
  start_bg rabbitmq /usr/lib/rabbitmq/bin/rabbitmq-server
fi
/usr/lib/rabbitmq/bin/rabbitmqctl wait --timeout 120 "$RUN/rabbit.pid" > "$LOGS/rabbit-wait.log" 2>&1 || die "RabbitMQ did not start (see $LOGS/rabbitmq.log, $LOGS/rabbit/)"
log "RabbitMQ up on $H:$RABBIT_PORT"

# ---------------------------------------------------------------- 5. Keystone
KC="--config-file $ETC/keystone/keystone.conf"
if [ ! -f "$DATA/keystone/.bootstrapped" ]; then
  log "keystone db_sync + bootstrap"
  keystone-manage $KC db_sync
  keystone-manage $KC fernet_setup --keystone-user root --keystone-group root
  keystone-manage $KC credential_setup --keystone-user root --keystone-group root
  keystone-manage $KC bootstrap --bootstrap-password "$ADMIN_PASSWORD" \
    --bootstrap-admin-url "$KS/v3/" --bootstrap-internal-url "$KS/v3/" \
    --bootstrap-public-url "$KS/v3/" --bootstrap-region-id RegionOne
  touch "$DATA/keystone/.bootstrapped"
fi
gunicorn_svc keystone "$KEYSTONE_PORT" keystone_wsgi 2
wait_http keystone "$KS/v3"

log "keystone: service users, demo project, catalog"
OS_CLIENT_CONFIG_FILE=$OS/clouds.yaml "$VENV/bin/python" - <<EOF
import openstack
c = openstack.connect(cloud='os-admin')
idn = c.identity
def one(gen):
    l = list(gen); return l[0] if l else None
dom = idn.find_domain('default')
def project(name):
    return idn.find_project(name, domain_id=dom.id) or idn.create_project(name=name, domain_id=dom.id)
def role(name):
    return idn.find_role(name) or idn.create_role(name=name)
def user(name, pw):
    u = idn.find_user(name, domain_id=dom.id)
    return u or idn.create_user(name=name, password=pw, domain_id=dom.id)
service, demo = project('service'), project('demo')
r = {n: role(n) for n in ('admin', 'member', 'reader', 'service')}
for s in ('glance', 'placement', 'nova', 'neutron', 'cinder'):
    u = user(s, '$SERVICE_PASSWORD')
    for rn in ('admin', 'service'):
        idn.assign_project_role_to_user(service, u, r[rn])
d = user('demo', '$DEMO_PASSWORD')
idn.assign_project_role_to_user(demo, d, r['member'])
cat = {
  ('glance', 'image'): 'http://$H:$GLANCE_PORT',
  ('placement', 'placement'): 'http://$H:$PLACEMENT_PORT',
  ('nova', 'compute'): 'http://$H:$NOVA_PORT/v2.1',
  ('neutron', 'network'): 'http://$H:$NEUTRON_PORT',
  ('cinderv3', 'volumev3'): 'http://$H:$CINDER_PORT/v3',
  ('cinder', 'block-storage'): 'http://$H:$CINDER_PORT/v3',
}
for (name, typ), url in cat.items():
    svc = one(idn.services(type=typ)) or idn.create_service(name=name, type=typ)
    have = {e.interface for e in idn.endpoints(service_id=svc.id)}
    for iface in ('public', 'internal', 'admin'):
        if iface not in have:
            idn.create_endpoint(service_id=svc.id, interface=iface, url=url, region_id='RegionOne')
print('keystone ok')
EOF

# ---------------------------------------------------------------- 6. Glance
once glance-dbsync "$DATA/glance/.dbsynced" glance-manage --config-file "$ETC/glance/glance-api.conf" db_sync
gunicorn_svc glance "$GLANCE_PORT" glance_wsgi 1
wait_http glance "http://$H:$GLANCE_PORT/"

# ---------------------------------------------------------------- 7. Placement
once placement-dbsync "$DATA/placement.dbsynced" placement-manage --config-file "$ETC/placement/placement.conf" db sync
gunicorn_svc placement "$PLACEMENT_PORT" placement_wsgi 1
wait_http placement "http://$H:$PLACEMENT_PORT/"

# ---------------------------------------------------------------- 8. Nova
NC="--config-file $ETC/nova/nova.conf"
if [ ! -f "$DATA/nova/.dbsynced" ]; then
  log "nova: api_db sync, cells v2, db sync"
  nova-manage $NC api_db sync
  nova-manage $NC cell_v2 list_cells 2>/dev/null | grep -q ' cell0 ' || nova-manage $NC cell_v2 map_cell0 --database_connection "$(dburl nova_cell0)"
  nova-manage $NC cell_v2 list_cells 2>/dev/null | grep -q ' cell1 ' || nova-manage $NC cell_v2 create_cell --name cell1 --verbose
  nova-manage $NC db sync
  touch "$DATA/nova/.dbsynced"
fi
gunicorn_svc nova-api "$NOVA_PORT" nova_wsgi 1
wait_http nova-api "http://$H:$NOVA_PORT/"
start_bg nova-conductor nova-conductor $NC
start_bg nova-scheduler nova-scheduler $NC
start_bg nova-compute nova-compute --config-file "$ETC/nova/nova-cpu.conf"

# ---------------------------------------------------------------- 9. Neutron
NEC="--config-file $ETC/neutron/neutron.conf --config-file $ETC/neutron/ml2_conf.ini"
once neutron-dbsync "$DATA/neutron/.dbsynced" neutron-db-manage $NEC upgrade heads
gunicorn_svc neutron-api "$NEUTRON_PORT" neutron_wsgi 1
wait_http neutron-api "http://$H:$NEUTRON_PORT/"
start_bg neutron-rpc-server neutron-rpc-server $NEC
start_bg neutron-fake-agent "$VENV/bin/python" "$HERE/fake_agent.py" $NEC --host "$COMPUTE_HOST"

# ---------------------------------------------------------------- 10. Cinder
CC="--config-file $ETC/cinder/cinder.conf"
once cinder-dbsync "$DATA/cinder/.dbsynced" cinder-manage $CC db sync
gunicorn_svc cinder-api "$CINDER_PORT" cinder_wsgi 1
wait_http cinder-api "http://$H:$CINDER_PORT/"
start_bg cinder-scheduler cinder-scheduler $CC
start_bg cinder-volume cinder-volume $CC

# ---------------------------------------------------------------- 11. wait for the RPC services
export OS_CLIENT_CONFIG_FILE=$OS/clouds.yaml OS_CLOUD=os-admin
wait_up() { # DESC CMD WANT PIDNAME...   (CMD prints "binary state" lines)
  local desc=$1 cmd=$2 want=$3 i n p; shift 3
  for ((i=0; i<90; i++)); do
    n=$(eval "$cmd" 2>/dev/null | grep -c ' up ' || true)
    [ "$n" -ge "$want" ] && { log "$desc: $n up"; return 0; }
    for p in "$@"; do alive "$p" || { tail -20 "$LOGS/$p.log"; die "$p died (see $LOGS/$p.log)"; }; done
    sleep 2
  done
  eval "$cmd" || true; die "$desc not up"
}
wait_up "nova services" "openstack compute service list -f value -c Binary -c State | sed 's/\$/ /;s/^/ /'" 3 nova-conductor nova-scheduler nova-compute
nova-manage $NC cell_v2 discover_hosts --verbose > "$LOGS/nova-discover.log" 2>&1
wait_up "cinder services" "openstack volume service list -f value -c Binary -c State | sed 's/\$/ /;s/^/ /'" 2 cinder-scheduler cinder-volume
for ((i=0; i<60; i++)); do
  openstack network agent list -f value -c Alive 2>/dev/null | grep -q True && break; sleep 2
done
openstack network agent list -f value -c Host -c Alive | grep -q True && alive neutron-fake-agent || die "fake neutron agent not alive (see $LOGS/neutron-fake-agent.log)"
log "neutron fake agent alive"
# the scheduler needs the compute node's resource provider (with inventory) in placement.
# (Not `openstack hypervisor list`: at microversion >= 2.88 it RPC-calls get_host_uptime on the
# compute, which FakeDriver does not implement, and blocks 60 s while the compute restarts.)
"$VENV/bin/python" - "$COMPUTE_HOST" <<'PYEOF' || die "no placement resource provider for $COMPUTE_HOST"
import sys, time, openstack
c = openstack.connect(cloud='os-admin')
for i in range(90):
    rps = list(c.placement.resource_providers(name=sys.argv[1]))
    if rps and c.placement.get('/resource_providers/%s/inventories' % rps[0].id).json().get('inventories'):
        print('placement: resource provider %s has inventory' % sys.argv[1]); sys.exit(0)
    time.sleep(2)
sys.exit(1)
PYEOF
sleep 2
for f in "$RUN"/*.pid; do n=$(basename "$f" .pid); case $n in rabbit|mariadbd) continue;; esac
  alive "$n" || { tail -20 "$LOGS/$n.log"; die "$n died (see $LOGS/$n.log)"; }; done
log "ALL UP in $(($(date +%s)-T0))s.  export OS_CLIENT_CONFIG_FILE=$OS/clouds.yaml OS_CLOUD=os-admin   (or: . $OS/openrc)"
