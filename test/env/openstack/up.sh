#!/usr/bin/env bash
# Brings up a real, small OpenStack on 127.0.0.1 for the project's tests: Keystone, Neutron (ML2,
# no agents) and Manila (API + scheduler + share with the DummyDriver), all from Debian 12's own
# packages, on SQLite, with no message broker. Then seeds it with the networks, security groups,
# share types and share the tests expect, and writes clouds.yaml, env and seed.json.
#
# Idempotent: when the services recorded in the state dir are alive and answer, it says so and
# exits. Otherwise it starts from a clean state dir, so a run never depends on leftovers.
# Needs no standard input. Stop everything with down.sh (--purge also deletes the state dir).
#
# Environment: KEYSTONE_PORT (15000), NEUTRON_PORT (19696), MANILA_PORT (18786),
# MANILA_SETUP_RUN (state root, see ../lib.sh).
set -euo pipefail
# Errors inside $(...) must stop the script too (bash leaves errexit off there by default).
shopt -s inherit_errexit
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

KEYSTONE_PORT=${KEYSTONE_PORT:-15000}
NEUTRON_PORT=${NEUTRON_PORT:-19696}
MANILA_PORT=${MANILA_PORT:-18786}

state="$MANILA_SETUP_RUN/openstack"
logs="$state/logs"
# pyenv shims may shadow python3 on PATH; OpenStack code lives in Debian's interpreter.
PY=/usr/bin/python3
export PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
unset PYTHONPATH PYTHONHOME

keystone_url="http://127.0.0.1:$KEYSTONE_PORT/v3"
neutron_url="http://127.0.0.1:$NEUTRON_PORT"
manila_url="http://127.0.0.1:$MANILA_PORT"
# Fixed credentials: this cloud listens on loopback only and lives for one test session.
ADMIN_PASSWORD=manila-setup-admin
DEMO_PASSWORD=manila-setup-demo
SERVICE_PASSWORD=manila-setup-service
MANILA_API_VERSION=2.65

# python3-openstackclient costs nothing extra: neutron-common already pulls it in.
packages=(python3-keystone neutron-common manila-common uwsgi-core uwsgi-plugin-python3
  curl jq sqlite3 python3-openstackclient)

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
  [[ $(<"$state/ports") == "$KEYSTONE_PORT $NEUTRON_PORT $MANILA_PORT" ]] || return 1
  for name in keystone neutron manila; do
    [[ -f $state/$name.pgid ]] || return 1
    pgid=$(<"$state/$name.pgid")
    [[ $pgid =~ ^[0-9]+$ ]] && kill -0 -- "-$pgid" 2>/dev/null || return 1
  done
  curl -fs -m 10 -o /dev/null "$keystone_url" &&
    curl -fs -m 10 -o /dev/null "$neutron_url/" &&
    curl -fs -m 10 -o /dev/null "$manila_url/"
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
  mkdir -p "$state"/{keystone/fernet-keys,keystone/credential-keys,neutron/lock,manila/lock} "$logs"
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
service_plugins =
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
# No agents or SDN controller: ports are created but stay DOWN, which is all the tests need.
mechanism_drivers =
extension_drivers = port_security

[ml2_type_flat]
# The shared provider network "storage" sits on this physical network.
flat_networks = physnet-storage

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
enabled_share_backends = dummy
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

[dummy]
share_driver = manila.tests.share.drivers.dummy.DummyDriver
driver_handles_share_servers = False
share_backend_name = dummy
# The driver sleeps in every method to look like real storage (create_share: 4 s by default).
# Keep a little of it so a share is briefly seen "creating", as on a real cloud.
dummy_driver_default_driver_method_delay = 0.1
dummy_driver_driver_methods_delays = create_share:1.0
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
  start_service manila "$PY" "$here/manila-all.py" --config-file "$state/manila/manila.conf"
}

# ---------------------------------------------------------------------------------------------
# Seeding

seed_keystone() {
  ADMIN_TOKEN=$(token admin "$ADMIN_PASSWORD" admin)
  local admin_role member_role service_project uid
  admin_role=$(ksfind roles admin)
  member_role=$(ksfind roles member)
  [[ -n $admin_role && -n $member_role ]] || die "keystone bootstrap made no admin/member roles"

  # Service users: Neutron's and Manila's API validate tokens as these.
  service_project=$(ksensure projects service \
    '{"project": {"name": "service", "domain_id": "default", "description": "OpenStack services"}}')
  for uid in neutron manila; do
    uid=$(ksensure users "$uid" "$(jq -cn --arg n "$uid" --arg p "$SERVICE_PASSWORD" \
      --arg pr "$service_project" '{user: {name: $n, password: $p, domain_id: "default", default_project_id: $pr}}')")
    api "$ADMIN_TOKEN" PUT "$keystone_url/projects/$service_project/users/$uid/roles/$admin_role" >/dev/null
  done

  ensure_endpoints network neutron "$neutron_url"
  ensure_endpoints share manila "$manila_url/v1/%(project_id)s"
  ensure_endpoints sharev2 manilav2 "$manila_url/v2"

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

# ensure_subnet TOKEN NETWORK_ID NAME CIDR [EXTRA_JSON] prints the subnet id.
ensure_subnet() {
  local extra=${5:-'{}'}
  nensure "$1" subnets "$3" "$(jq -cn --arg n "$3" --arg net "$2" --arg c "$4" --argjson x "$extra" \
    '{subnet: ({name: $n, network_id: $net, cidr: $c, ip_version: 4} + $x)}')"
}

seed_neutron() {
  local net
  # The cluster's machine network.
  NET_TENANT=$(nensure "$DEMO_TOKEN" networks tenant '{"network": {"name": "tenant"}}')
  SUB_TENANT=$(ensure_subnet "$DEMO_TOKEN" "$NET_TENANT" tenant-subnet 10.196.0.0/16)

  # The network the Manila export locations live on: a shared provider network owned by the
  # admin, as real clouds do it. The DummyDriver (DHSS=false) exports at 10.0.0.10 and
  # 10.0.0.20 (and 11.0.0.11, admin-only), so the subnet is 10.0.0.0/24 with Neutron's
  # allocation pool kept clear of those two addresses.
  NET_STORAGE=$(nensure "$ADMIN_TOKEN" networks storage '{"network": {"name": "storage",
    "shared": true, "provider:network_type": "flat", "provider:physical_network": "physnet-storage"}}')
  SUB_STORAGE=$(ensure_subnet "$ADMIN_TOKEN" "$NET_STORAGE" storage-subnet "$STORAGE_CIDR" \
    '{"allocation_pools": [{"start": "10.0.0.100", "end": "10.0.0.250"}]}')

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

# ensure_share_type NAME EXTRA_SPECS_JSON prints the share type id (admin, public).
ensure_share_type() {
  local id
  id=$(api "$ADMIN_TOKEN" GET "$manila_url/v2/types" | jq -r --arg n "$1" '.share_types[] | select(.name == $n) | .id')
  [[ -n $id ]] || id=$(api "$ADMIN_TOKEN" POST "$manila_url/v2/types" "$(jq -cn --arg n "$1" --argjson x "$2" \
    '{share_type: {name: $n, "share_type_access:is_public": true, extra_specs: $x}}')" | jq -r .share_type.id)
  printf '%s' "$id"
}

seed_manila() {
  ST_DEFAULT=$(ensure_share_type default '{"driver_handles_share_servers": "False", "snapshot_support": "True"}')
  ST_CEPHFS=$(ensure_share_type cephfs-fast '{"driver_handles_share_servers": "False"}')

  SHARE_ID=$(api "$DEMO_TOKEN" GET "$manila_url/v2/shares?name=nfs-share" | jq -r '.shares[0].id // empty')
  [[ -n $SHARE_ID ]] || SHARE_ID=$(api "$DEMO_TOKEN" POST "$manila_url/v2/shares" \
    '{"share": {"name": "nfs-share", "share_proto": "NFS", "size": 1, "share_type": "default"}}' |
    jq -r .share.id)
  local status deadline=$((SECONDS + 300))
  while :; do
    status=$(api "$DEMO_TOKEN" GET "$manila_url/v2/shares/$SHARE_ID" | jq -r .share.status)
    [[ $status == available ]] && break
    [[ $status == error ]] && fail_with_log manila "share nfs-share went to status error"
    ((SECONDS < deadline)) || fail_with_log manila "share nfs-share still $status after 300s"
    sleep 1
  done
  # What the demo user sees: the admin-only export (11.0.0.11) is hidden from it.
  SHARE_EXPORTS=$(api "$DEMO_TOKEN" GET "$manila_url/v2/shares/$SHARE_ID/export_locations" |
    jq -c '[.export_locations | sort_by(.preferred | not) | .[].path]')
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
    --arg sub_tenant "$SUB_TENANT" --arg sub_storage "$SUB_STORAGE" --arg sub_decoy "$SUB_DECOY" \
    --arg storage_cidr "$STORAGE_CIDR" \
    --arg sg_nfs "$SG_NFS" --arg sg_block "$SG_BLOCK" --arg sg_default "$SG_DEFAULT" \
    --arg st_default "$ST_DEFAULT" --arg st_cephfs "$ST_CEPHFS" \
    --arg share_id "$SHARE_ID" --argjson share_exports "$SHARE_EXPORTS" \
    --arg ac_id "$APPCRED_ID" \
    '{
      keystone_url: $keystone_url, neutron_url: $neutron_url, manila_url: $manila_url,
      region: "RegionOne", project_id: $project_id, user_id: $user_id,
      admin_project_id: $admin_project_id,
      application_credential: {id: $ac_id, name: "manila-setup-test"},
      networks: {tenant: $net_tenant, storage: $net_storage, decoy: $net_decoy},
      subnets: {
        "tenant-subnet": {id: $sub_tenant, network_id: $net_tenant, cidr: "10.196.0.0/16"},
        "storage-subnet": {id: $sub_storage, network_id: $net_storage, cidr: $storage_cidr},
        "decoy-subnet": {id: $sub_decoy, network_id: $net_decoy, cidr: "192.168.50.0/24"}
      },
      security_groups: {nfs: $sg_nfs, "block-egress": $sg_block, default: $sg_default},
      share_types: {default: $st_default, "cephfs-fast": $st_cephfs},
      shares: {"nfs-share": {id: $share_id, export_locations: $share_exports}}
    }' >"$state/seed.json.tmp"
  mv -f "$state/seed.json.tmp" "$state/seed.json"
  umask "$old_umask"
}

# ---------------------------------------------------------------------------------------------
# Main

STORAGE_CIDR=10.0.0.0/24

install_packages

if healthy; then
  step "OpenStack already running (state in $state); nothing to do"
  exit 0
fi

step "not running (or not healthy): starting from a clean state in $state"
"$here/down.sh" >/dev/null
rm -rf "${state:?}"
# A port another program holds would only show up a minute later as a service that died.
for port in "$KEYSTONE_PORT" "$NEUTRON_PORT" "$MANILA_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port on 127.0.0.1 is taken by another program (set KEYSTONE_PORT/NEUTRON_PORT/MANILA_PORT)"
  fi
done
write_configs
echo "$KEYSTONE_PORT $NEUTRON_PORT $MANILA_PORT" >"$state/ports"

# From here on, a failure stops what this run started (the logs stay for inspection). It first
# waits for the preparation jobs, so none starts a service after down.sh has run.
on_exit() {
  local rc=$?
  if ((rc != 0)); then
    step "failed; stopping what was started"
    wait || true
    "$here/down.sh" >&2 || true
  fi
}
trap on_exit EXIT

step "preparing databases and starting keystone, neutron, manila (in parallel)"
declare -A prep_pid
for name in keystone neutron manila; do
  "prepare_$name" >"$logs/$name-setup.log" 2>&1 &
  prep_pid[$name]=$!
done
for name in keystone neutron manila; do
  if ! wait "${prep_pid[$name]}"; then
    printf -- '--- last 30 lines of %s ---\n' "$logs/$name-setup.log" >&2
    tail -n 30 "$logs/$name-setup.log" >&2
    die "preparing $name failed"
  fi
done

# Timeouts are generous: on this 2-core machine under a Kubernetes build a start took 114 s.
wait_for keystone 300 curl -fsS -m 10 "$keystone_url"
step "keystone ready on $keystone_url"
seed_keystone
step "keystone seeded: service users, catalog, user demo, application credential"

wait_for neutron 300 curl -fsS -m 10 "$neutron_url/"
step "neutron ready on $neutron_url"
seed_neutron
step "neutron seeded: networks tenant, storage, decoy; security groups nfs, block-egress"

wait_for manila 300 curl -fsS -m 10 "$manila_url/"
# Shares can only be scheduled once the share service has reported its pool to the scheduler.
# (Plain curl, not api(): api dies on an HTTP error, and here an error only means "not yet".)
manila_has_pool() {
  curl -fsS -m 30 -H "X-Auth-Token: $ADMIN_TOKEN" -H "X-OpenStack-Manila-API-Version: $MANILA_API_VERSION" \
    "$manila_url/v2/scheduler-stats/pools" | jq -e '.pools | length > 0'
}
wait_for manila 300 manila_has_pool
step "manila ready on $manila_url"
seed_manila
step "manila seeded: share types default, cephfs-fast; share nfs-share ($(jq -r 'join(" ")' <<<"$SHARE_EXPORTS"))"

write_outputs
step "OpenStack up. Use: . $state/env   (seed: $state/seed.json)"
