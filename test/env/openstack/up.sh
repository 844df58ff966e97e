#!/usr/bin/env bash
# Brings up a real, small OpenStack on 127.0.0.1 for the project's tests: Keystone, Neutron (ML2,
# no agents; ports bound by a mechanism driver of ours, trunks), Manila (API + scheduler + share
# with the DummyDriver), Nova (API, conductor, scheduler and compute with the fake virt driver, in
# one process), Placement and Glance, all from Debian 12's own packages, on SQLite, with no message
# broker. Then seeds it with the networks, security groups, share types, share and flavors the
# tests expect, and writes clouds.yaml, env and seed.json.
#
# Idempotent: when the services recorded in the state dir are alive and answer, it says so and
# exits. Otherwise it starts from a clean state dir, so a run never depends on leftovers.
# Needs no standard input. Stop everything with down.sh (--purge also deletes the state dir).
#
# Environment: KEYSTONE_PORT (15000), NEUTRON_PORT (19696), MANILA_PORT (18786), NOVA_PORT
# (18774), PLACEMENT_PORT (18778), GLANCE_PORT (19292), MANILA_SETUP_RUN (state root, see ../lib.sh),
# MANILA_SETUP_CLOUD_SHAPE (default; or director: see shape.sh).
set -euo pipefail
# Errors inside $(...) must stop the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/shape.sh"

KEYSTONE_PORT=${KEYSTONE_PORT:-15000}
NEUTRON_PORT=${NEUTRON_PORT:-19696}
MANILA_PORT=${MANILA_PORT:-18786}
NOVA_PORT=${NOVA_PORT:-18774}
PLACEMENT_PORT=${PLACEMENT_PORT:-18778}
GLANCE_PORT=${GLANCE_PORT:-19292}

state="$MANILA_SETUP_RUN/openstack"
logs="$state/logs"
# pyenv shims may shadow python3 on PATH; OpenStack code lives in Debian's interpreter.
PY=/usr/bin/python3
export PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
unset PYTHONPATH PYTHONHOME

keystone_url="http://127.0.0.1:$KEYSTONE_PORT/v3"
neutron_url="http://127.0.0.1:$NEUTRON_PORT"
manila_url="http://127.0.0.1:$MANILA_PORT"
nova_url="http://127.0.0.1:$NOVA_PORT"
placement_url="http://127.0.0.1:$PLACEMENT_PORT"
glance_url="http://127.0.0.1:$GLANCE_PORT"
# The compute service's host (and the fake driver's one node): what Nova maps to cell1.
NOVA_HOST=manila-setup
# Every service's process group (state/NAME.pgid) and the ports, in one order.
services=(keystone neutron manila placement glance nova)
ports=("$KEYSTONE_PORT" "$NEUTRON_PORT" "$MANILA_PORT" "$NOVA_PORT" "$PLACEMENT_PORT" "$GLANCE_PORT")
# Fixed credentials: this cloud listens on loopback only and lives for one test session.
ADMIN_PASSWORD=manila-setup-admin
DEMO_PASSWORD=manila-setup-demo
SERVICE_PASSWORD=manila-setup-service
MANILA_API_VERSION=2.65

# python3-openstackclient costs nothing extra: neutron-common already pulls it in.
# python3-nova, python3-placement, python3-glance: the code only; the services' commands, config
# files and paste files (nova-common, glance-common, ...) are not needed (see write_configs).
packages=(python3-keystone neutron-common manila-common python3-nova python3-placement
  python3-glance uwsgi-core uwsgi-plugin-python3 curl jq sqlite3 python3-openstackclient)
# Manila's back end (nfs-backend.sh): nfs-ganesha with its VFS back end on a private D-Bus bus.
# As root only: without root there are no network namespaces, and Manila runs the DummyDriver.
nfs_wanted=${MANILA_SETUP_NFS:-real}
[[ $nfs_wanted == real || $nfs_wanted == dummy ]] || die "MANILA_SETUP_NFS=$nfs_wanted: want real or dummy"
((EUID == 0)) || nfs_wanted=dummy
[[ $nfs_wanted == real ]] && packages+=(nfs-ganesha nfs-ganesha-vfs dbus-daemon dbus-bin)
shape=${MANILA_SETUP_CLOUD_SHAPE:-default}
cloud_shape "$shape" || exit 2
# Nova's compute hosts: its own, then one per further zone of the shape (nova-all.py starts
# them in its process).
nova_hosts=("$NOVA_HOST")
for zone in "${nova_zones[@]:1}"; do nova_hosts+=("$NOVA_HOST-$zone"); done

# ---------------------------------------------------------------------------------------------
# Packages

install_packages() {
  # Fast path: dpkg -s fails if any one of them is not installed.
  if dpkg -s "${packages[@]}" >/dev/null 2>&1; then
    step "Debian packages already installed"
    return
  fi
  [[ $(id -u) == 0 ]] || die "packages missing and not root: apt-get install ${packages[*]}"
  step "installing Debian packages (cold: a few minutes)"
  # In a subshell so its EXIT trap restores policy-rc.d however apt ends.
  (
    prc=/usr/sbin/policy-rc.d saved=
    if [[ -e $prc ]]; then saved=$(mktemp) && cp -p "$prc" "$saved"; fi
    restore() {
      if [[ -n $saved ]]; then mv -f "$saved" "$prc"; else rm -f "$prc"; fi
    }
    trap restore EXIT
    # Exit code 101 tells invoke-rc.d "not allowed": postinst scripts start no daemons.
    printf '#!/bin/sh\nexit 101\n' >"$prc"
    chmod 0755 "$prc"
    export DEBIAN_FRONTEND=noninteractive
    apt_opts=(-o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef
      -o Dpkg::Options::=--force-confold)
    # DPkg::Lock::Timeout does not cover the lists lock of "apt-get update": when another apt
    # holds it (a second make test on the machine installing too), wait for it here.
    for ((try = 1; ; try++)); do
      apt-get "${apt_opts[@]}" update -qq && break
      ((try < 60)) || exit 1
      sleep 10
    done
    apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${packages[@]}" \
      >"${TMPDIR:-/tmp}/manila-setup-apt.log" 2>&1 ||
      { tail -n 30 "${TMPDIR:-/tmp}/manila-setup-apt.log" >&2; exit 1; }
  )
  step "Debian packages installed"
}

# ---------------------------------------------------------------------------------------------
# Is it already running?

# healthy succeeds when every recorded process group is alive, the ports are the ones asked for,
# the endpoints answer and a previous run finished seeding.
healthy() {
  local name pgid
  [[ -s $state/seed.json && -s $state/clouds.yaml && -f $state/ports ]] || return 1
  [[ $(<"$state/ports") == "${ports[*]}" ]] || return 1
  [[ -f $state/nfs-backend && $(<"$state/nfs-backend") == "$nfs_wanted" ]] || return 1
  [[ -f $state/shape && $(<"$state/shape") == "$shape" ]] || return 1
  local all=("${services[@]}")
  [[ $nfs_wanted == real ]] && all+=(nfs-dbus ganesha)
  for name in "${all[@]}"; do
    [[ -f $state/$name.pgid ]] || return 1
    pgid=$(<"$state/$name.pgid")
    [[ $pgid =~ ^[0-9]+$ ]] && kill -0 -- "-$pgid" 2>/dev/null || return 1
  done
  curl -fs -m 10 -o /dev/null "$keystone_url" &&
    curl -fs -m 10 -o /dev/null "$neutron_url/" &&
    curl -fs -m 10 -o /dev/null "$manila_url/" &&
    curl -fs -m 10 -o /dev/null "$nova_url/" &&
    curl -fs -m 10 -o /dev/null "$placement_url/" &&
    curl -fs -m 10 -o /dev/null "$glance_url/versions"
}

# ---------------------------------------------------------------------------------------------
# Process handling

# start_service NAME CMD... runs CMD in a new session (so its own process group), records the
# group id in $state/NAME.pgid and sends all output to $logs/NAME.log. CMD must name a file under
# $state: down.sh checks the command line for it before it signals a recorded group.
start_service() {
  local name=$1; shift
  [[ "$*" == *"$state/"* ]] || die "start_service $name: command line does not mention $state"
  setsid /bin/bash -c 'echo $$ >"$0"; exec "$@"' "$state/$name.pgid" "$@" \
    </dev/null >>"$logs/$name.log" 2>&1 &
  # setsid may fork; wait for the child to record itself.
  local i
  for ((i = 0; i < 50; i++)); do [[ -s $state/$name.pgid ]] && return; sleep 0.1; done
  die "$name did not start"
}

# fail_with_log NAME MESSAGE prints the tail of the service's log and exits non-zero.
fail_with_log() {
  printf -- '--- last 30 lines of %s ---\n' "$logs/$1.log" >&2
  tail -n 30 "$logs/$1.log" >&2 || true
  die "$2"
}

# wait_for NAME SECONDS CMD... retries CMD until it succeeds, the service dies or time runs out.
wait_for() {
  local name=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout)) pgid
  pgid=$(<"$state/$name.pgid")
  until "$@" >/dev/null 2>&1; do
    kill -0 -- "-$pgid" 2>/dev/null || fail_with_log "$name" "$name exited"
    ((SECONDS < deadline)) || fail_with_log "$name" "$name not ready after ${timeout}s"
    sleep 0.5
  done
}

# ---------------------------------------------------------------------------------------------
# REST helpers (curl + jq: far cheaper than one openstack CLI process per call)

# api TOKEN METHOD URL [JSON] prints the response body; dies on an HTTP error.
api() {
  local token=$1 method=$2 url=$3 data=${4:-} out
  local args=(-sS -m 120 --fail-with-body -X "$method" -H "X-Auth-Token: $token"
    -H "X-OpenStack-Manila-API-Version: $MANILA_API_VERSION" -H 'Accept: application/json')
  [[ -n $data ]] && args+=(-H 'Content-Type: application/json' --data-binary "$data")
  out=$(curl "${args[@]}" "$url") || die "$method $url failed: $out"
  printf '%s' "$out"
}

# token USER PASSWORD PROJECT prints a project-scoped Keystone token.
token() {
  local body hdrs
  body=$(jq -cn --arg u "$1" --arg p "$2" --arg pr "$3" '{auth: {
    identity: {methods: ["password"], password: {user: {name: $u, password: $p, domain: {id: "default"}}}},
    scope: {project: {name: $pr, domain: {id: "default"}}}}}')
  hdrs=$(curl -sS -m 120 --fail-with-body -D - -o /dev/null -H 'Content-Type: application/json' \
    --data-binary "$body" "$keystone_url/auth/tokens") || die "cannot get a token for $1: $hdrs"
  awk 'tolower($1) == "x-subject-token:" { sub(/\r$/, "", $2); print $2 }' <<<"$hdrs"
}

# ksfind KIND NAME [QUERY] prints the id of the named Keystone object, or nothing.
ksfind() {
  api "$ADMIN_TOKEN" GET "$keystone_url/$1?name=$2${3:+&$3}" | jq -r --arg k "$1" '.[$k][0].id // empty'
}

# ksensure KIND NAME JSON prints the id of the named Keystone object, creating it from JSON.
ksensure() {
  local kind=$1 name=$2 json=$3 id
  id=$(ksfind "$kind" "$name")
  if [[ -z $id ]]; then
    id=$(api "$ADMIN_TOKEN" POST "$keystone_url/$kind" "$json" | jq -r '.[keys[0]].id')
  fi
  printf '%s' "$id"
}

# ensure_endpoints TYPE NAME URL registers a service with public, internal and admin endpoints.
ensure_endpoints() {
  local type=$1 name=$2 url=$3 sid iface
  sid=$(api "$ADMIN_TOKEN" GET "$keystone_url/services?type=$type" | jq -r '.services[0].id // empty')
  [[ -n $sid ]] || sid=$(api "$ADMIN_TOKEN" POST "$keystone_url/services" \
    "$(jq -cn --arg t "$type" --arg n "$name" '{service: {type: $t, name: $n, enabled: true}}')" |
    jq -r .service.id)
  for iface in public internal admin; do
    if [[ -z $(api "$ADMIN_TOKEN" GET "$keystone_url/endpoints?service_id=$sid&interface=$iface" |
      jq -r '.endpoints[0].id // empty') ]]; then
      api "$ADMIN_TOKEN" POST "$keystone_url/endpoints" "$(jq -cn --arg s "$sid" --arg i "$iface" \
        --arg u "$url" '{endpoint: {service_id: $s, interface: $i, url: $u, region_id: "RegionOne"}}')" >/dev/null
    fi
  done
}

# nfind TOKEN KIND NAME prints the id of the named Neutron object visible to TOKEN, or nothing.
nfind() {
  api "$1" GET "$neutron_url/v2.0/$2?name=$3" | jq -r --arg k "$2" '.[$k][0].id // empty'
}

# nensure TOKEN KIND NAME JSON prints the id of the named Neutron object, creating it from JSON.
nensure() {
  local id
  id=$(nfind "$1" "$2" "$3")
  [[ -n $id ]] || id=$(api "$1" POST "$neutron_url/v2.0/$2" "$4" | jq -r '.[keys[0]].id')
  printf '%s' "$id"
}

# ---------------------------------------------------------------------------------------------
# Configuration files

write_configs() {
  mkdir -p "$state"/{keystone/fernet-keys,keystone/credential-keys,neutron/lock,manila/lock} \
    "$state"/{nova/lock,nova/instances,placement,glance/lock,glance/images,glance/staging,glance/tasks} "$logs"
  # clouds.yaml and the key repositories hold secrets; keystone warns about readable key dirs.
  chmod 0700 "$state" "$state/keystone/fernet-keys" "$state/keystone/credential-keys"

  cat >"$state/keystone/keystone.conf" <<EOF
[DEFAULT]
debug = false

[database]
# uwsgi threads share pooled connections: let pysqlite allow that (otherwise "SQLite objects
# created in a thread can only be used in that same thread" when one is reset). Transactions and
# lock waits: sqlite_serial.py (keystone-wsgi.py installs it).
connection = sqlite:///$state/keystone/keystone.sqlite?check_same_thread=false&timeout=30

[token]
provider = fernet

[fernet_tokens]
key_repository = $state/keystone/fernet-keys

[fernet_receipts]
key_repository = $state/keystone/fernet-keys

[credential]
key_repository = $state/keystone/credential-keys

# Without a cache every authenticated request costs about half a CPU-second.
[cache]
enabled = true
backend = dogpile.cache.memory
EOF

  # Shared by Neutron and Manila: how their API validates tokens and which user it does so as.
  local authtoken
  authtoken="[keystone_authtoken]
www_authenticate_uri = $keystone_url
auth_url = $keystone_url
auth_type = password
user_domain_name = Default
project_domain_name = Default
project_name = service
password = $SERVICE_PASSWORD
region_name = RegionOne
interface = public"

  cat >"$state/neutron/neutron.conf" <<EOF
[DEFAULT]
bind_host = 127.0.0.1
bind_port = $NEUTRON_PORT
core_plugin = ml2
# Trunks: the OpenShift installer sets trunk: true in its MachineSets when the cloud offers the
# extension, and the Machine API provider then puts the primary port in a trunk. The trunk driver
# it needs comes with the mechanism driver below.
service_plugins = trunk
auth_strategy = keystone
# In-process RPC: there are no agents to talk to, so no broker is needed.
transport_url = fake://
api_workers = 0
rpc_workers = 0
rpc_state_report_workers = 0
state_path = $state/neutron
api_paste_config = /etc/neutron/api-paste.ini
allow_overlapping_ips = true
dhcp_agent_notification = false
# SQLite and eventlet: the API runs as green threads in one OS thread. When one request waits
# for the database lock another one holds, it blocks that thread, so the holder never finishes
# and the waiter fails with "database is locked" (seen with 6 parallel rule creations). Serve one
# request at a time; without keep-alive (and with a socket timeout) no idle client can hold the
# single slot. That alone is not enough: the rpc and periodic workers are processes of their own
# that write too, hence sqlite_serial.py (neutron-server.py installs it).
wsgi_default_pool_size = 1
wsgi_keep_alive = false
client_socket_timeout = 60
notify_nova_on_port_status_changes = false
notify_nova_on_port_data_changes = false

[database]
# Transactions and lock waits: sqlite_serial.py.
connection = sqlite:///$state/neutron/neutron.sqlite

[oslo_concurrency]
lock_path = $state/neutron/lock

$authtoken
username = neutron

[ml2]
type_drivers = flat,vlan,vxlan
tenant_network_types = vxlan
# No agents or SDN controller. A port nobody binds stays DOWN; a port Nova binds to its compute
# host is bound by manila_setup_loopback (neutron-plugins/, on the path by neutron-server.py) as
# ovs and ACTIVE. Without a mechanism driver the binding fails and so does the server.
mechanism_drivers = manila_setup_loopback
extension_drivers = port_security

[ml2_type_flat]
# The shared provider network "storage" sits on the first physical network; a further storage
# network of the shape (the zones shape's) on one of its own.
flat_networks = physnet-storage,physnet-storage2,physnet-storage3,physnet-storage4

[ml2_type_vxlan]
vni_ranges = 1:1000
EOF

  cat >"$state/manila/manila.conf" <<EOF
[DEFAULT]
debug = false
host = manila-setup
state_path = $state/manila
# In-process RPC between API, scheduler and share service (all in manila-all.py's process).
transport_url = fake://
auth_strategy = keystone
osapi_share_listen = 127.0.0.1
osapi_share_listen_port = $MANILA_PORT
osapi_share_workers = 1
# One API request at a time, as for Neutron (SQLite + eventlet: see neutron.conf).
wsgi_default_pool_size = 1
wsgi_keep_alive = false
client_socket_timeout = 60
api_paste_config = /etc/manila/api-paste.ini
enabled_share_backends = $(manila_backend_names)
# CEPHFS is accepted by the API but no backend offers it: such shares end in NoValidHost.
enabled_share_protocols = NFS,CIFS,CEPHFS
default_share_type = default

[database]
# All of Manila runs in one OS thread (eventlet): a wait in SQLite's busy handler would freeze the
# green thread that holds the lock too. sqlite_serial.py (manila-all.py installs it) makes the
# green threads queue in Python instead and sets SQLite's own busy timeout.
connection = sqlite:///$state/manila/manila.sqlite

[oslo_concurrency]
lock_path = $state/manila/lock

[coordination]
backend_url = file://$state/manila/coordination

$authtoken
username = manila

$(manila_backend)
EOF

  write_nova_configs "$authtoken"
  write_placement_configs "$authtoken"
  write_glance_configs "$authtoken"
}

# manila_backend prints the back end's section of manila.conf. "nfs" (as root): real NFS exports
# by nfs-ganesha in the cloud's namespace (manila_setup_nfs.py, nfs-backend.sh), on the export
# addresses the DummyDriver reports, so that every test reading them sees the same layout.
# "dummy": the DummyDriver, which exports nothing (without root, or MANILA_SETUP_NFS=dummy).
manila_backend() {
  if [[ $nfs_backend == nfs ]]; then
    nfs_backend_section nfs "$backend_zone" "$backend_name" "$state/nfs/data" "$(bare "${export_addrs[@]}")" \
      "$(bare "${admin_export_addrs[@]}")"
    local line backend zone bname eaddr
    for line in "${more_backends[@]}"; do
      read -r backend zone bname _ _ _ _ _ eaddr <<<"$line"
      echo
      nfs_backend_section "$backend" "$zone" "$bname" "$state/nfs/data-$backend" "${eaddr%/*}" ""
    done
  else
    cat <<EOF
[dummy]
share_driver = manila.tests.share.drivers.dummy.DummyDriver
driver_handles_share_servers = False
share_backend_name = dummy
# The driver sleeps in every method to look like real storage (create_share: 4 s by default).
# Keep a little of it so a share is briefly seen "creating", as on a real cloud.
dummy_driver_default_driver_method_delay = 0.1
dummy_driver_driver_methods_delays = create_share:1.0
EOF
  fi
}

# manila_backend_names prints enabled_share_backends: the back end of the shape's first storage
# network, and one for each further one (more_backends).
manila_backend_names() {
  local names=("$nfs_backend") line
  if [[ $nfs_backend == nfs ]]; then
    for line in "${more_backends[@]}"; do names+=("${line%% *}"); done
  fi
  local IFS=,
  printf '%s' "${names[*]}"
}

# nfs_backend_section BACKEND ZONE BACKEND_NAME ROOT EXPORT_IPS ADMIN_EXPORT_IPS prints the section of
# one back end of manila_setup_nfs.py. Its exports are in a folder and counted in a database of
# its own (nfs-backend.sh's backend_dirs), served by the one ganesha.
nfs_backend_section() {
  local dir=$state/nfs/exports db=$state/nfs/exports.sqlite
  if [[ $1 != nfs ]]; then dir=$state/nfs/exports-$1 db=$state/nfs/exports-$1.sqlite; fi
  cat <<EOF
[$1]
share_driver = manila_setup_nfs.NFSDriver
driver_handles_share_servers = False
share_backend_name = $3
$([[ -z $2 ]] || echo "backend_availability_zone = $2")
manila_setup_nfs_root = $4
manila_setup_nfs_export_ips = $5
manila_setup_nfs_admin_export_ips = $6
ganesha_config_path = $state/nfs/ganesha.conf
ganesha_export_dir = $dir
ganesha_db_path = $db
ganesha_export_template_dir = $state/nfs/export-templates
EOF
}

# write_nova_configs AUTHTOKEN: nova.conf and the API's paste pipeline.
write_nova_configs() {
  local service_auth
  # How Nova talks to Placement and Neutron: as its service user, admin in project service.
  service_auth="auth_type = password
auth_url = $keystone_url
username = nova
password = $SERVICE_PASSWORD
user_domain_name = Default
project_domain_name = Default
project_name = service
region_name = RegionOne
valid_interfaces = public"

  cat >"$state/nova/nova.conf" <<EOF
[DEFAULT]
debug = false
host = $NOVA_HOST
my_ip = 127.0.0.1
state_path = $state/nova
instances_path = $state/nova/instances
# In-process RPC between API, conductor, scheduler and compute (all in nova-all.py's process).
transport_url = fake://
compute_driver = fake.FakeDriver
enabled_apis = osapi_compute
osapi_compute_listen = 127.0.0.1
osapi_compute_listen_port = $NOVA_PORT
osapi_compute_workers = 1
# Nothing plugs VIFs (no agents) and Neutron sends no events: do not wait for them.
vif_plugging_is_fatal = false
vif_plugging_timeout = 0
# Periodic tasks (among them host discovery, below) start at once instead of up to 60 s late.
periodic_fuzzy_delay = 0

[wsgi]
api_paste_config = $state/nova/api-paste.ini
keep_alive = false
client_socket_timeout = 60

[api_database]
connection = sqlite:///$state/nova/nova_api.sqlite

[database]
# cell1's database (cell0's is only named in the cell mapping).
connection = sqlite:///$state/nova/nova_cell1.sqlite

[scheduler]
# Maps a new compute host to cell1 within seconds (the default never does it).
discover_hosts_in_cells_interval = 2

[quota]
# Quotas are counted and enforced as in a real cloud (the CLI's check of room for one more
# master reads them), with defaults no test's clusters reach: the stock ones (10 instances,
# 20 cores, 50 GiB of RAM) would stop a cluster's worth of 16 GiB servers.
driver = nova.quota.DbQuotaDriver
instances = 1000
cores = 100000
ram = 102400000

[glance]
endpoint_override = $glance_url

[vnc]
enabled = false

[oslo_concurrency]
lock_path = $state/nova/lock

$1
username = nova

[placement]
$service_auth

[neutron]
$service_auth
EOF

  # Our own paste pipeline for the compute API (the one nova-common ships has more filters:
  # cors, http_proxy_to_wsgi, osprofiler, the legacy /v2 and /v1.1 paths, none of them used).
  cat >"$state/nova/api-paste.ini" <<EOF
[composite:osapi_compute]
use = call:nova.api.openstack.urlmap:urlmap_factory
/: oscomputeversions
/v2.1: openstack_compute_api_v21

[composite:openstack_compute_api_v21]
use = call:nova.api.auth:pipeline_factory_v21
keystone = compute_req_id faultwrap request_log sizelimit authtoken keystonecontext osapi_compute_app_v21

[filter:compute_req_id]
paste.filter_factory = nova.api.compute_req_id:ComputeReqIdMiddleware.factory

[filter:faultwrap]
paste.filter_factory = nova.api.openstack:FaultWrapper.factory

[filter:request_log]
paste.filter_factory = nova.api.openstack.requestlog:RequestLog.factory

[filter:sizelimit]
paste.filter_factory = oslo_middleware:RequestBodySizeLimiter.factory

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory

[filter:keystonecontext]
paste.filter_factory = nova.api.auth:NovaKeystoneContext.factory

[app:osapi_compute_app_v21]
paste.app_factory = nova.api.openstack.compute:APIRouterV21.factory

[pipeline:oscomputeversions]
pipeline = faultwrap request_log oscomputeversionapp

[app:oscomputeversionapp]
paste.app_factory = nova.api.openstack.compute.versions:Versions.factory
EOF
}

# write_placement_configs AUTHTOKEN: placement.conf (found through OS_PLACEMENT_CONFIG_DIR).
write_placement_configs() {
  cat >"$state/placement/placement.conf" <<EOF
[DEFAULT]
debug = false

[placement_database]
# uwsgi threads, as for Keystone (see keystone.conf).
connection = sqlite:///$state/placement/placement.sqlite?check_same_thread=false&timeout=30

[api]
auth_strategy = keystone

$1
username = placement
EOF
}

# write_glance_configs AUTHTOKEN: glance-api.conf and, beside it (where Glance looks for it),
# glance-api-paste.ini.
write_glance_configs() {
  cat >"$state/glance/glance-api.conf" <<EOF
[DEFAULT]
debug = false
bind_host = 127.0.0.1
bind_port = $GLANCE_PORT
# The API in this one process (eventlet), as Neutron's; one request at a time, no keep-alive.
workers = 0
http_keepalive = false
client_socket_timeout = 60
enabled_backends = file:file

[database]
connection = sqlite:///$state/glance/glance.sqlite

[glance_store]
default_backend = file

[file]
filesystem_store_datadir = $state/glance/images

[os_glance_staging_store]
filesystem_store_datadir = $state/glance/staging

[os_glance_tasks_store]
filesystem_store_datadir = $state/glance/tasks

[oslo_concurrency]
lock_path = $state/glance/lock

[paste_deploy]
flavor = keystone

$1
username = glance
EOF

  # Our own paste pipeline: versions at /, the v2 API behind Keystone tokens.
  cat >"$state/glance/glance-api-paste.ini" <<EOF
[pipeline:glance-api-keystone]
pipeline = versionnegotiation authtoken context rootapp

[composite:rootapp]
paste.composite_factory = glance.api:root_app_factory
/: apiversions
/v2: apiv2app

[app:apiversions]
paste.app_factory = glance.api.versions:create_resource

[app:apiv2app]
paste.app_factory = glance.api.v2.router:API.factory

[filter:versionnegotiation]
paste.filter_factory = glance.api.middleware.version_negotiation:VersionNegotiationFilter.factory

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory
delay_auth_decision = true

[filter:context]
paste.filter_factory = glance.api.middleware.context:ContextMiddleware.factory
EOF
}

# enable_wal DB puts an SQLite file in write-ahead-log mode (persistent): readers no longer block
# the writer, which avoids "database is locked" between threads and Neutron's workers.
enable_wal() { sqlite3 "$1" 'PRAGMA journal_mode=WAL;' >/dev/null; }

# ---------------------------------------------------------------------------------------------
# Per-service preparation; each runs in the background, in parallel, and starts its service.

prepare_keystone() {
  local conf=(--config-file "$state/keystone/keystone.conf") repo key
  # keystone-manage prints a harmless eventlet error on exit; output goes to the setup log.
  keystone-manage "${conf[@]}" db_sync
  enable_wal "$state/keystone/keystone.sqlite"
  # What "keystone-manage fernet_setup" and "credential_setup" write, without two more Python
  # start-ups (each 3-12 s here): a repository holds Fernet keys (32 random bytes, URL-safe
  # base64), file 0 the staged key and the highest number the primary one.
  for repo in "$state/keystone/fernet-keys" "$state/keystone/credential-keys"; do
    for key in 0 1; do
      head -c 32 /dev/urandom | base64 | tr '+/' '-_' >"$repo/$key"
      chmod 0600 "$repo/$key"
    done
  done
  keystone-manage "${conf[@]}" bootstrap --bootstrap-password "$ADMIN_PASSWORD" \
    --bootstrap-username admin --bootstrap-project-name admin --bootstrap-role-name admin \
    --bootstrap-service-name keystone --bootstrap-region-id RegionOne \
    --bootstrap-admin-url "$keystone_url" --bootstrap-public-url "$keystone_url" \
    --bootstrap-internal-url "$keystone_url"
  # One process with threads: a second process on SQLite gives "database is locked".
  # keystone-wsgi.py is /usr/bin/keystone-wsgi-public with sqlite_serial.py installed first.
  # "Connection: close": clients reusing keep-alive connections otherwise see resets.
  # --die-on-term: uwsgi's master would treat SIGTERM as "reload" without it. --lazy-apps loads
  # Keystone in the worker, not the master: a master busy loading it loses a SIGTERM and then
  # ignores it for good. The mercy options cut the wait for a dying worker from 60 s to 3.
  start_service keystone uwsgi-core --plugins python3 --master --die-on-term --lazy-apps \
    --need-app --reload-mercy 3 --worker-reload-mercy 3 \
    --processes 1 --threads 4 --buffer-size 65535 \
    --http-socket "127.0.0.1:$KEYSTONE_PORT" --add-header 'Connection: close' \
    --pythonpath "$here" --wsgi-file "$here/keystone-wsgi.py" \
    --env "OS_KEYSTONE_CONFIG_DIR=$state/keystone"
}

prepare_neutron() {
  local db="$state/neutron/neutron.sqlite"
  # "neutron-db-manage upgrade heads" cannot ALTER constraints on SQLite: create the tables from
  # the models, then tell alembic they are at the newest revision.
  "$PY" -c 'import sys, sqlalchemy
from neutron.db.migration.models import head
head.get_metadata().create_all(sqlalchemy.create_engine(sys.argv[1]))' "sqlite:///$db"
  neutron-db-manage --config-file "$state/neutron/neutron.conf" stamp heads
  enable_wal "$db"
  # neutron-server.py: /usr/bin/neutron-server with sqlite_serial.py installed first.
  start_service neutron "$PY" "$here/neutron-server.py" --config-file "$state/neutron/neutron.conf"
}

prepare_manila() {
  local db="$state/manila/manila.sqlite"
  # "manila-manage db sync" fails on SQLite ALTERs too: same approach as Neutron.
  "$PY" -c 'import sys, sqlalchemy
from manila.db.sqlalchemy import models
models.BASE.metadata.create_all(sqlalchemy.create_engine(sys.argv[1]))' "sqlite:///$db"
  manila-manage --config-file "$state/manila/manila.conf" db stamp head
  enable_wal "$db"
  # Manila makes a zone by inserting it and, when the insert fails on the unique name that its
  # migrations give the table, reads the one there. create_all above does not make that
  # constraint, so every share service made a zone of its own: two back ends of one zone (the
  # zones shape's az1) held two zones of one name, and the scheduler placed a share asked for
  # in az1 on one of them only (the other's share type ended in error, AvailabilityZoneFilter).
  sqlite3 "$db" "CREATE UNIQUE INDEX az_name_uc ON availability_zones (name, deleted)"
  start_service manila "$PY" "$here/manila-all.py" --config-file "$state/manila/manila.conf"
}

# Placement's, Glance's and Nova's database preparations run at a lower priority (nice): they
# are not needed before Keystone is up and seeded, and at full priority the six Python start-ups
# at once delayed Keystone, the start of everything else.
prepare_placement() {
  nice -n 10 placement-manage --config-file "$state/placement/placement.conf" db sync
  enable_wal "$state/placement/placement.sqlite"
  # Under uwsgi like Keystone (same options and reasons).
  start_service placement uwsgi-core --plugins python3 --master --die-on-term --lazy-apps \
    --need-app --reload-mercy 3 --worker-reload-mercy 3 \
    --processes 1 --threads 4 --buffer-size 65535 \
    --http-socket "127.0.0.1:$PLACEMENT_PORT" --add-header 'Connection: close' \
    --pythonpath "$here" --wsgi-file "$here/placement-wsgi.py" \
    --env "OS_PLACEMENT_CONFIG_DIR=$state/placement"
}

prepare_glance() {
  local conf="$state/glance/glance-api.conf"
  # glance-manage without glance-common (which ships only the command and config files).
  nice -n 10 "$PY" -c 'import sys; from glance.cmd.manage import main; sys.exit(main())' \
    --config-file "$conf" db_sync
  enable_wal "$state/glance/glance.sqlite"
  start_service glance "$PY" "$here/glance-api.py" --config-file "$conf"
}

# prepare_nova creates Nova's databases and cells, then starts nova once Keystone knows its
# service user (the main script touches $state/keystone.seeded) and Placement answers: the
# compute service reports its node to Placement as it starts, and a failed first report is only
# retried a minute later.
prepare_nova() {
  local db
  # What nova-manage api_db sync, cell_v2 map_cell0, cell_v2 create_cell and db sync do (also
  # cell0's), in one Python start-up instead of four (nova-common, which ships nova-manage, is
  # not installed). cell1's transport URL must not be fake://: nova makes a new transport from a
  # cell's URL when it targets the cell, and a second fake:// is a bus of its own, on which the
  # casts to compute are lost. A URL of the "none" driver keeps the process-wide transport; plain
  # none:/// is refused because cell0 has it.
  nice -n 10 "$PY" - "$state/nova/nova.conf" "sqlite:///$state/nova/nova_cell0.sqlite" \
    "sqlite:///$state/nova/nova_cell1.sqlite" <<'EOF'
import sys
from nova.cmd import manage
from nova import config, objects

conf, cell0, cell1 = sys.argv[1:]
config.parse_args(['nova-manage', '--config-file', conf])
objects.register_all()
steps = [
    ('api_db sync', lambda: manage.ApiDbCommands().sync()),
    ('cell_v2 map_cell0', lambda: manage.CellV2Commands().map_cell0(database_connection=cell0)),
    ('cell_v2 create_cell', lambda: manage.CellV2Commands().create_cell(
        name='cell1', transport_url='none:///cell1', database_connection=cell1)),
    ('db sync', lambda: manage.DbCommands().sync()),
]
for name, step in steps:
    rc = step()
    if rc:
        sys.exit('nova-manage %s failed: %s' % (name, rc))
    print('nova-manage %s: done' % name)
EOF
  for db in api cell0 cell1; do enable_wal "$state/nova/nova_$db.sqlite"; done
  local deadline=$((SECONDS + 600))
  until [[ -e $state/keystone.seeded ]] && curl -fs -m 10 -o /dev/null "$placement_url/"; do
    [[ ! -e $state/aborted ]] || die "up.sh failed elsewhere; not starting nova"
    ((SECONDS < deadline)) || die "keystone not seeded or placement not answering after 600 s"
    sleep 0.5
  done
  start_service nova env NOVA_MORE_COMPUTE_HOSTS="${nova_hosts[*]:1}" "$PY" "$here/nova-all.py" --config-file "$state/nova/nova.conf"
}

# ---------------------------------------------------------------------------------------------
# Seeding

seed_keystone() {
  ADMIN_TOKEN=$(token admin "$ADMIN_PASSWORD" admin)
  local admin_role member_role service_project uid
  admin_role=$(ksfind roles admin)
  member_role=$(ksfind roles member)
  [[ -n $admin_role && -n $member_role ]] || die "keystone bootstrap made no admin/member roles"

  # Service users: the APIs validate tokens as these; Nova also calls Placement and Neutron as
  # its own.
  service_project=$(ksensure projects service \
    '{"project": {"name": "service", "domain_id": "default", "description": "OpenStack services"}}')
  for uid in neutron manila nova placement glance; do
    uid=$(ksensure users "$uid" "$(jq -cn --arg n "$uid" --arg p "$SERVICE_PASSWORD" \
      --arg pr "$service_project" '{user: {name: $n, password: $p, domain_id: "default", default_project_id: $pr}}')")
    api "$ADMIN_TOKEN" PUT "$keystone_url/projects/$service_project/users/$uid/roles/$admin_role" >/dev/null
  done

  ensure_endpoints network neutron "$neutron_url"
  ensure_endpoints share manila "$manila_url/v1/%(project_id)s"
  ensure_endpoints sharev2 manilav2 "$manila_url/v2"
  ensure_endpoints compute nova "$nova_url/v2.1"
  ensure_endpoints placement placement "$placement_url"
  ensure_endpoints image glance "$glance_url"

  # The user the tests act as: a plain member of project demo.
  DEMO_PROJECT=$(ksensure projects demo '{"project": {"name": "demo", "domain_id": "default"}}')
  DEMO_USER=$(ksensure users demo "$(jq -cn --arg p "$DEMO_PASSWORD" --arg pr "$DEMO_PROJECT" \
    '{user: {name: "demo", password: $p, domain_id: "default", default_project_id: $pr}}')")
  api "$ADMIN_TOKEN" PUT "$keystone_url/projects/$DEMO_PROJECT/users/$DEMO_USER/roles/$member_role" >/dev/null
  ADMIN_PROJECT=$(ksfind projects admin)

  DEMO_TOKEN=$(token demo "$DEMO_PASSWORD" demo)
  # An application credential's secret is shown only when it is created: recreate it if a
  # previous run left one behind (its secret is lost with the old clouds.yaml).
  local acs ac
  acs="$keystone_url/users/$DEMO_USER/application_credentials"
  ac=$(api "$DEMO_TOKEN" GET "$acs?name=manila-setup-test" | jq -r '.application_credentials[0].id // empty')
  [[ -z $ac ]] || api "$DEMO_TOKEN" DELETE "$acs/$ac" >/dev/null
  ac=$(api "$DEMO_TOKEN" POST "$acs" \
    '{"application_credential": {"name": "manila-setup-test", "description": "manila-setup tests"}}')
  APPCRED_ID=$(jq -r .application_credential.id <<<"$ac")
  APPCRED_SECRET=$(jq -r .application_credential.secret <<<"$ac")
}

# ensure_subnet TOKEN NETWORK_ID NAME CIDR [EXTRA_JSON] prints the subnet id (IPv6 for a CIDR
# with a colon).
ensure_subnet() {
  local extra=${5:-'{}'} version=4
  [[ $4 == *:* ]] && version=6
  nensure "$1" subnets "$3" "$(jq -cn --arg n "$3" --arg net "$2" --arg c "$4" --argjson v "$version" --argjson x "$extra" \
    '{subnet: ({name: $n, network_id: $net, cidr: $c, ip_version: $v} + $x)}')"
}

seed_neutron() {
  local net
  # The cluster's machine network (dual-stack in the director shape).
  NET_TENANT=$(nensure "$DEMO_TOKEN" networks tenant '{"network": {"name": "tenant"}}')
  SUB_TENANT=$(ensure_subnet "$DEMO_TOKEN" "$NET_TENANT" tenant-subnet 10.196.0.0/16)
  SUB_TENANT_V6=
  [[ -z $tenant_v6 ]] || SUB_TENANT_V6=$(ensure_subnet "$DEMO_TOKEN" "$NET_TENANT" tenant-subnet-v6 "$tenant_v6" \
    '{"ipv6_address_mode": "dhcpv6-stateful", "ipv6_ra_mode": "dhcpv6-stateful"}')

  # The network the Manila export locations live on: a shared provider network owned by the
  # admin, as real clouds do it, with the export addresses (shape.sh) kept out of Neutron's
  # allocation pools. STORAGE_SUBNETS is the seed's view of its subnets.
  NET_STORAGE=$(nensure "$ADMIN_TOKEN" networks "$storage_network" "$(jq -cn --arg n "$storage_network" '{network: {name: $n,
    shared: true, "provider:network_type": "flat", "provider:physical_network": "physnet-storage"}}')")
  STORAGE_SUBNETS='{}'
  # Seed keys: storage-subnet for the first, storage-subnet-2, -3, ... for the others.
  local line name cidr start end mode extra id key i=0
  for line in "${storage_subnets[@]}"; do
    ((++i == 1)) && key=storage-subnet || key=storage-subnet-$i
    read -r name cidr start end mode <<<"$line"
    extra=$(jq -cn --arg s "$start" --arg e "$end" --arg m "${mode:-}" \
      '{allocation_pools: [{start: $s, end: $e}]} + (if $m == "" then {} else {ipv6_address_mode: $m, ipv6_ra_mode: $m} end)')
    id=$(ensure_subnet "$ADMIN_TOKEN" "$NET_STORAGE" "$name" "$cidr" "$extra")
    STORAGE_SUBNETS=$(jq -c --arg k "$key" --arg n "$name" --arg id "$id" --arg net "$NET_STORAGE" --arg c "$cidr" \
      '. + {($k): {id: $id, name: $n, network_id: $net, cidr: $c}}' <<<"$STORAGE_SUBNETS")
  done

  # The further storage networks of the shape (more_backends), each a shared provider network on
  # a physical network of its own, with its back end's export address kept out of the pool.
  MORE_NETWORKS='{}'
  local backend zone bname net subnet pstart pend eaddr net_id phys=1
  for line in "${more_backends[@]}"; do
    read -r backend zone bname net subnet cidr pstart pend eaddr <<<"$line"
    ((++phys))
    net_id=$(nensure "$ADMIN_TOKEN" networks "$net" "$(jq -cn --arg n "$net" --arg p "physnet-storage$phys" '{network: {name: $n,
      shared: true, "provider:network_type": "flat", "provider:physical_network": $p}}')")
    id=$(ensure_subnet "$ADMIN_TOKEN" "$net_id" "$subnet" "$cidr" \
      "$(jq -cn --arg s "$pstart" --arg e "$pend" '{allocation_pools: [{start: $s, end: $e}]}')")
    MORE_NETWORKS=$(jq -c --arg net "$net" --arg net_id "$net_id" --arg sub "$subnet" --arg id "$id" --arg c "$cidr" \
      --arg z "$zone" --arg b "$backend" --arg e "${eaddr%/*}" \
      '. + {($net): {id: $net_id, zone: $z, backend: $b, export_address: $e, subnet: {id: $id, name: $sub, network_id: $net_id, cidr: $c}}}' <<<"$MORE_NETWORKS")
  done

  # A network the code must not pick.
  NET_DECOY=$(nensure "$DEMO_TOKEN" networks decoy '{"network": {"name": "decoy"}}')
  SUB_DECOY=$(ensure_subnet "$DEMO_TOKEN" "$NET_DECOY" decoy-subnet 192.168.50.0/24)

  SG_NFS=$(nfind "$DEMO_TOKEN" security-groups nfs)
  if [[ -z $SG_NFS ]]; then
    SG_NFS=$(api "$DEMO_TOKEN" POST "$neutron_url/v2.0/security-groups" \
      '{"security_group": {"name": "nfs", "description": "NFS clients to Manila"}}' | jq -r .security_group.id)
    local rule
    for rule in tcp:2049 tcp:111 udp:111; do
      api "$DEMO_TOKEN" POST "$neutron_url/v2.0/security-group-rules" "$(jq -cn --arg sg "$SG_NFS" \
        --arg p "${rule%%:*}" --argjson port "${rule##*:}" '{security_group_rule: {security_group_id: $sg,
        direction: "ingress", ethertype: "IPv4", protocol: $p, port_range_min: $port, port_range_max: $port}}')" >/dev/null
    done
  fi

  SG_BLOCK=$(nensure "$DEMO_TOKEN" security-groups block-egress \
    '{"security_group": {"name": "block-egress", "description": "no egress at all"}}')
  # A new group allows all egress (one rule per ethertype); without rules it blocks egress.
  local r
  for r in $(api "$DEMO_TOKEN" GET "$neutron_url/v2.0/security-group-rules?security_group_id=$SG_BLOCK&direction=egress" |
    jq -r '.security_group_rules[].id'); do
    api "$DEMO_TOKEN" DELETE "$neutron_url/v2.0/security-group-rules/$r" >/dev/null
  done

  # Neutron creates the project's default group on first use; listing it is first use enough.
  SG_DEFAULT=$(api "$DEMO_TOKEN" GET "$neutron_url/v2.0/security-groups?name=default&project_id=$DEMO_PROJECT" |
    jq -r '.security_groups[0].id // empty')
  [[ -n $SG_DEFAULT ]] || die "project demo has no default security group"
}

# ensure_share_type NAME EXTRA_SPECS_JSON prints the share type id (admin, public). A type kept
# from an earlier run gets the extra specs set again (the required one excepted, which is fixed):
# a spec added here reaches the state folders that already have the type.
ensure_share_type() {
  local id
  id=$(api "$ADMIN_TOKEN" GET "$manila_url/v2/types" | jq -r --arg n "$1" '.share_types[] | select(.name == $n) | .id')
  if [[ -n $id ]]; then
    api "$ADMIN_TOKEN" POST "$manila_url/v2/types/$id/extra_specs" \
      "$(jq -cn --argjson x "$2" '{extra_specs: ($x | del(.driver_handles_share_servers))}')" >/dev/null
  else
    id=$(api "$ADMIN_TOKEN" POST "$manila_url/v2/types" "$(jq -cn --arg n "$1" --argjson x "$2" \
      '{share_type: {name: $n, "share_type_access:is_public": true, extra_specs: $x}}')" | jq -r .share_type.id)
  fi
  printf '%s' "$id"
}

seed_manila() {
  # default can take snapshots that the Manila CSI driver restores (it needs both specs);
  # cephfs-fast cannot: the two cases a user meets.
  # With more than one back end (the zones shape) default asks for the share back end name
  # "general" (a back end in each zone), and fast for the other back end of az1.
  local pin='{}'
  ((${#more_backends[@]} == 0)) || pin=$(jq -cn --arg b "$backend_name" '{share_backend_name: $b}')
  ST_DEFAULT=$(ensure_share_type default "$(jq -cn --argjson p "$pin" '{"driver_handles_share_servers": "False", "snapshot_support": "True", "create_share_from_snapshot_support": "True"} + $p')")
  ST_CEPHFS=$(ensure_share_type cephfs-fast '{"driver_handles_share_servers": "False"}')
  MORE_TYPES='{}'
  local line backend zone bname net id
  for line in "${more_backends[@]}"; do
    read -r backend zone bname _ <<<"$line"
    [[ $bname != "$backend_name" ]] || continue
    id=$(ensure_share_type "$bname" "$(jq -cn --arg b "$bname" --arg z "$zone" '{"driver_handles_share_servers": "False",
      "snapshot_support": "True", "create_share_from_snapshot_support": "True", share_backend_name: $b, availability_zones: $z}')")
    MORE_TYPES=$(jq -c --arg n "$bname" --arg id "$id" '. + {($n): $id}' <<<"$MORE_TYPES")
  done

  SHARE_ID=$(ensure_share nfs-share default "$backend_zone")
  # What the demo user sees: the admin-only export (11.0.0.11) is hidden from it.
  SHARE_EXPORTS=$(share_exports "$SHARE_ID")
  # A share on each further back end, in its zone, of the type that reaches it.
  MORE_SHARES='{}'
  for line in "${more_backends[@]}"; do
    read -r backend zone bname net _ <<<"$line"
    id=$(ensure_share "share-$backend" "$([[ $bname == "$backend_name" ]] && echo default || echo "$bname")" "$zone")
    MORE_SHARES=$(jq -c --arg n "share-$backend" --arg id "$id" --arg z "$zone" --arg net "$net" \
      --argjson e "$(share_exports "$id")" '. + {($n): {id: $id, zone: $z, network: $net, export_locations: $e}}' <<<"$MORE_SHARES")
  done
}

# ensure_share NAME TYPE [ZONE] prints the ID of the demo project's share NAME (1 GiB, NFS), made
# of TYPE in ZONE ("": Manila's choice) if it is not there, once it is available.
ensure_share() {
  local id body
  id=$(api "$DEMO_TOKEN" GET "$manila_url/v2/shares?name=$1" | jq -r '.shares[0].id // empty')
  if [[ -z $id ]]; then
    body=$(jq -cn --arg n "$1" --arg t "$2" --arg z "${3:-}" '{share: ({name: $n, share_proto: "NFS", size: 1, share_type: $t}
      + (if $z == "" then {} else {availability_zone: $z} end))}')
    id=$(api "$DEMO_TOKEN" POST "$manila_url/v2/shares" "$body" | jq -r .share.id)
  fi
  local status deadline=$((SECONDS + 300))
  while :; do
    status=$(api "$DEMO_TOKEN" GET "$manila_url/v2/shares/$id" | jq -r .share.status)
    [[ $status == available ]] && break
    [[ $status == error ]] && fail_with_log manila "share $1 went to status error"
    ((SECONDS < deadline)) || fail_with_log manila "share $1 still $status after 300s"
    sleep 1
  done
  printf '%s' "$id"
}

# share_exports ID prints the export paths the demo user sees of share ID, the preferred first.
share_exports() {
  api "$DEMO_TOKEN" GET "$manila_url/v2/shares/$1/export_locations" |
    jq -c '[.export_locations | sort_by(.preferred | not) | .[].path]'
}

# nova_ready succeeds when every compute service is up, its host is mapped to cell1 (else the
# first server fails "Host ... is not mapped to any cell": discovery runs every 2 s, but only
# once the scheduler's periodic tasks have started) and Placement has its node with capacity.
nova_ready() {
  local n=${#nova_hosts[@]}
  [[ $(sqlite3 "file:$state/nova/nova_api.sqlite?mode=ro" \
    "SELECT count(*) FROM host_mappings WHERE host IN ($(printf "'%s'," "${nova_hosts[@]}" | sed 's/,$//'))") == "$n" ]] &&
    curl -fsS -m 30 -H "X-Auth-Token: $ADMIN_TOKEN" "$nova_url/v2.1/os-services?binary=nova-compute" |
    jq -e --argjson n "$n" '[.services[] | select(.state == "up" and .status == "enabled")] | length == $n' &&
    curl -fsS -m 30 -H "X-Auth-Token: $ADMIN_TOKEN" -H 'OpenStack-API-Version: placement 1.4' \
      "$placement_url/resource_providers?resources=VCPU:1,MEMORY_MB:1024" |
    jq -e --argjson n "$n" '.resource_providers | length == $n'
}

# The flavors of an OpenShift install on OpenStack: m1.xlarge for the control plane (the
# installer wants at least 16 GiB, 4 vCPUs, 100 GB disk there), m1.large for workers (8 GiB, 2
# vCPUs, 100 GB disk), and a small one below both minimums. Sizes as OpenStack's classic m1.*
# flavors, but m1.large's disk raised from 80 to the installer's 100 GB. The fake driver
# offers far more than a cluster of these needs.
FLAVORS=(m1.small:1:2048:20 m1.large:4:8192:100 m1.xlarge:8:16384:160)

seed_nova() {
  local f name vcpus ram disk id
  FLAVOR_IDS='{}'
  for f in "${FLAVORS[@]}"; do
    IFS=: read -r name vcpus ram disk <<<"$f"
    id=$(api "$ADMIN_TOKEN" GET "$nova_url/v2.1/flavors?is_public=None" |
      jq -r --arg n "$name" '.flavors[] | select(.name == $n) | .id')
    [[ -n $id ]] || id=$(api "$ADMIN_TOKEN" POST "$nova_url/v2.1/flavors" "$(jq -cn --arg n "$name" \
      --argjson v "$vcpus" --argjson r "$ram" --argjson d "$disk" \
      '{flavor: {name: $n, vcpus: $v, ram: $r, disk: $d}}')" | jq -r .flavor.id)
    FLAVOR_IDS=$(jq -c --arg n "$name" --arg id "$id" '. + {($n): $id}' <<<"$FLAVOR_IDS")
  done
  # A zone of Nova is a host aggregate with an availability zone: one per zone of the shape,
  # holding that zone's compute host (nova-api mirrors it into Placement, whose aggregates the
  # scheduler asks for a server of a zone).
  local i zone agg
  COMPUTE_ZONES='{}'
  for i in "${!nova_zones[@]}"; do
    zone=${nova_zones[$i]}
    agg=$(api "$ADMIN_TOKEN" GET "$nova_url/v2.1/os-aggregates" | jq -r --arg z "$zone" '.aggregates[] | select(.name == $z) | .id')
    [[ -n $agg ]] || agg=$(api "$ADMIN_TOKEN" POST "$nova_url/v2.1/os-aggregates" \
      "$(jq -cn --arg z "$zone" '{aggregate: {name: $z, availability_zone: $z}}')" | jq -r .aggregate.id)
    api "$ADMIN_TOKEN" GET "$nova_url/v2.1/os-aggregates/$agg" | jq -e --arg h "${nova_hosts[$i]}" '.aggregate.hosts | index($h)' >/dev/null ||
      api "$ADMIN_TOKEN" POST "$nova_url/v2.1/os-aggregates/$agg/action" \
        "$(jq -cn --arg h "${nova_hosts[$i]}" '{add_host: {host: $h}}')" >/dev/null
    COMPUTE_ZONES=$(jq -c --arg z "$zone" --arg h "${nova_hosts[$i]}" '. + {($z): $h}' <<<"$COMPUTE_ZONES")
  done
}

# ---------------------------------------------------------------------------------------------
# Outputs

write_outputs() {
  local old_umask
  old_umask=$(umask)
  umask 077
  # Values are JSON strings, which YAML accepts as double-quoted scalars.
  cat >"$state/clouds.yaml.tmp" <<EOF
# Written by test/env/openstack/up.sh; loopback test cloud, regenerated on every start.
clouds:
  manila-setup:
    auth_type: password
    auth:
      auth_url: "$keystone_url"
      username: "demo"
      password: "$DEMO_PASSWORD"
      project_name: "demo"
      user_domain_name: "Default"
      project_domain_name: "Default"
    region_name: "RegionOne"
    interface: "public"
    identity_api_version: 3
  manila-setup-admin:
    auth_type: password
    auth:
      auth_url: "$keystone_url"
      username: "admin"
      password: "$ADMIN_PASSWORD"
      project_name: "admin"
      user_domain_name: "Default"
      project_domain_name: "Default"
    region_name: "RegionOne"
    interface: "public"
    identity_api_version: 3
  manila-setup-appcred:
    auth_type: v3applicationcredential
    auth:
      auth_url: "$keystone_url"
      application_credential_id: "$APPCRED_ID"
      application_credential_secret: "$APPCRED_SECRET"
    region_name: "RegionOne"
    interface: "public"
    identity_api_version: 3
EOF
  chmod 0600 "$state/clouds.yaml.tmp"
  mv -f "$state/clouds.yaml.tmp" "$state/clouds.yaml"

  cat >"$state/env" <<EOF
# Source this to point OpenStack clients (gophercloud, openstack CLI) at the test cloud.
export OS_CLIENT_CONFIG_FILE='$state/clouds.yaml'
export OS_CLOUD=manila-setup
EOF

  jq -n \
    --arg keystone_url "$keystone_url" --arg neutron_url "$neutron_url" --arg manila_url "$manila_url" \
    --arg project_id "$DEMO_PROJECT" --arg user_id "$DEMO_USER" --arg admin_project_id "$ADMIN_PROJECT" \
    --arg net_tenant "$NET_TENANT" --arg net_storage "$NET_STORAGE" --arg net_decoy "$NET_DECOY" \
    --arg sub_tenant "$SUB_TENANT" --arg sub_tenant_v6 "$SUB_TENANT_V6" --arg tenant_v6 "$tenant_v6" \
    --argjson storage_subnets "$STORAGE_SUBNETS" --arg sub_decoy "$SUB_DECOY" --arg shape "$shape" \
    --arg sg_nfs "$SG_NFS" --arg sg_block "$SG_BLOCK" --arg sg_default "$SG_DEFAULT" \
    --arg st_default "$ST_DEFAULT" --arg st_cephfs "$ST_CEPHFS" \
    --arg share_id "$SHARE_ID" --argjson share_exports "$SHARE_EXPORTS" \
    --arg ac_id "$APPCRED_ID" \
    --arg nova_url "$nova_url/v2.1" --arg placement_url "$placement_url" --arg glance_url "$glance_url" \
    --argjson flavors "$FLAVOR_IDS" \
    --argjson more_networks "$MORE_NETWORKS" --argjson more_types "$MORE_TYPES" --argjson more_shares "$MORE_SHARES" \
    --arg backend_zone "$backend_zone" --argjson compute_zones "$COMPUTE_ZONES" \
    '{
      keystone_url: $keystone_url, neutron_url: $neutron_url, manila_url: $manila_url,
      compute_url: $nova_url, placement_url: $placement_url, image_url: $glance_url,
      region: "RegionOne", project_id: $project_id, user_id: $user_id,
      admin_project_id: $admin_project_id,
      application_credential: {id: $ac_id, name: "manila-setup-test"},
      networks: {tenant: $net_tenant, storage: $net_storage, decoy: $net_decoy},
      shape: $shape,
      storage_zone: $backend_zone,
      more_storage_networks: $more_networks,
      compute_zones: $compute_zones,
      subnets: ({
        "tenant-subnet": {id: $sub_tenant, network_id: $net_tenant, cidr: "10.196.0.0/16"},
        "decoy-subnet": {id: $sub_decoy, network_id: $net_decoy, cidr: "192.168.50.0/24"}
      } + $storage_subnets + (if $tenant_v6 == "" then {} else
        {"tenant-subnet-v6": {id: $sub_tenant_v6, network_id: $net_tenant, cidr: $tenant_v6}} end)),
      security_groups: {nfs: $sg_nfs, "block-egress": $sg_block, default: $sg_default},
      share_types: ({default: $st_default, "cephfs-fast": $st_cephfs} + $more_types),
      shares: ({"nfs-share": {id: $share_id, zone: $backend_zone, export_locations: $share_exports}} + $more_shares),
      flavors: $flavors
    }' >"$state/seed.json.tmp"
  mv -f "$state/seed.json.tmp" "$state/seed.json"
  umask "$old_umask"
}

# ---------------------------------------------------------------------------------------------
# Main

install_packages

if healthy; then
  step "OpenStack already running (state in $state); nothing to do"
  exit 0
fi

step "not running (or not healthy): starting from a clean state in $state"
"$here/down.sh" >/dev/null
rm -rf "${state:?}"
# A port another program holds would only show up a minute later as a service that died.
for port in "${ports[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port on 127.0.0.1 is taken by another program (set KEYSTONE_PORT/NEUTRON_PORT/MANILA_PORT/NOVA_PORT/PLACEMENT_PORT/GLANCE_PORT)"
  fi
done
# Manila's back end first: the share service reaches ganesha over its D-Bus bus from its start.
# The shape first of all: nfs-backend.sh reads it back.
mkdir -p "$logs"
echo "$shape" >"$state/shape"
nfs_backend=dummy
if [[ $nfs_wanted == real ]]; then
  bash "$here/nfs-backend.sh" up || die "the NFS back end did not start (MANILA_SETUP_NFS=dummy runs Manila's DummyDriver instead)"
  nfs_backend=nfs
  export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$state/nfs/dbus.sock"
else
  # The DummyDriver's export addresses are its own: the default shape's.
  [[ $shape == default ]] || die "the $shape shape needs the real NFS back end (root, MANILA_SETUP_NFS unset or real)"
  step "Manila's back end: the DummyDriver (exports nothing; the real NFS back end needs root)"
fi
write_configs
echo "${ports[*]}" >"$state/ports"
echo "$nfs_wanted" >"$state/nfs-backend"

# From here on, a failure stops what this run started (the logs stay for inspection). It first
# waits for the preparation jobs, so none starts a service after down.sh has run.
on_exit() {
  local rc=$?
  if ((rc != 0)); then
    step "failed; stopping what was started"
    touch "$state/aborted"
    wait || true
    "$here/down.sh" >&2 || true
  fi
}
trap on_exit EXIT

step "preparing databases and starting ${services[*]} (in parallel; nova after keystone's seed)"
declare -A prep_pid
for name in "${services[@]}"; do
  "prepare_$name" >"$logs/$name-setup.log" 2>&1 &
  prep_pid[$name]=$!
done
# wait_prepared NAME waits for prepare_NAME to end and dies with its log if it failed.
wait_prepared() {
  if ! wait "${prep_pid[$1]}"; then
    printf -- '--- last 30 lines of %s ---\n' "$logs/$1-setup.log" >&2
    tail -n 30 "$logs/$1-setup.log" >&2
    die "preparing $1 failed"
  fi
}
for name in keystone neutron manila placement glance; do wait_prepared "$name"; done

# Timeouts are generous: on this 2-core machine under a Kubernetes build a start took 114 s.
wait_for keystone 300 curl -fsS -m 10 "$keystone_url"
step "keystone ready on $keystone_url"
seed_keystone
touch "$state/keystone.seeded"
step "keystone seeded: service users, catalog, user demo, application credential"

wait_for neutron 300 curl -fsS -m 10 "$neutron_url/"
step "neutron ready on $neutron_url"
seed_neutron
step "neutron seeded ($shape shape): networks tenant, $storage_network, decoy; security groups nfs, block-egress"

wait_for manila 300 curl -fsS -m 10 "$manila_url/"
# Shares can only be scheduled once the share service has reported its pool to the scheduler.
# (Plain curl, not api(): api dies on an HTTP error, and here an error only means "not yet".)
manila_has_pool() {
  curl -fsS -m 30 -H "X-Auth-Token: $ADMIN_TOKEN" -H "X-OpenStack-Manila-API-Version: $MANILA_API_VERSION" \
    "$manila_url/v2/scheduler-stats/pools" | jq -e --argjson n $((1 + ${#more_backends[@]})) '.pools | length >= $n'
}
wait_for manila 300 manila_has_pool
step "manila ready on $manila_url"
seed_manila
step "manila seeded: share types default, cephfs-fast; share nfs-share ($(jq -r 'join(" ")' <<<"$SHARE_EXPORTS"))"

wait_for placement 300 curl -fsS -m 10 "$placement_url/"
step "placement ready on $placement_url"
wait_for glance 300 curl -fsS -m 10 "$glance_url/versions"
step "glance ready on $glance_url"
wait_prepared nova
wait_for nova 300 curl -fsS -m 10 "$nova_url/"
wait_for nova 300 nova_ready
step "nova ready on $nova_url (compute hosts ${nova_hosts[*]} up and mapped to cell1)"
seed_nova
step "nova seeded: flavors $(jq -r 'keys | join(" ")' <<<"$FLAVOR_IDS")$( ((${#nova_zones[@]} == 0)) || echo "; availability zones $(jq -r 'to_entries | map("\(.key) (host \(.value))") | join(", ")' <<<"$COMPUTE_ZONES")")"

write_outputs
step "OpenStack up. Use: . $state/env   (seed: $state/seed.json)"
