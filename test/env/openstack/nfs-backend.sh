#!/usr/bin/env bash
# The loopback cloud's NFS back end: an nfs-ganesha server (userspace, VFS) that serves the
# shares of Manila's back end (manila_setup_nfs.py) on the export addresses Manila reports, inside
# network namespaces of this cloud's own. Guests (test/testenv/guest.go) plug their NICs into
# the namespaces' bridges as a server's ports plug into Neutron's networks:
#
#   namespace NS ("storage")  bridge br-storage: the export addresses of the cloud's shape
#                             (shape.sh; by default 10.0.0.10/24 preferred, 10.0.0.20/24 and
#                             11.0.0.11/24, the admin-only export); ganesha listens here only
#                             (NFSv4.x, port 2049)
#                             a further storage network of the shape (more_backends: the zones
#                             shape) has a bridge of its own here, br-s2, br-s3, ..., with its
#                             back end's export address: a guest plugged into one reaches no
#                             other's exports
#   namespace NS-r ("router") bridge br-machine: 10.196.0.1/16, the machine network's router. It
#                             routes nothing: its default route is a blackhole, as a cloud's
#                             router whose upstream drops private addresses, so a node with no
#                             storage port that sends its NFS traffic there times out
#
# Nothing is added to the host's own namespace: no interface, route or firewall rule, and no
# socket but the private D-Bus bus's, a file under the state folder. ganesha's live export
# changes go over that bus (Manila's ganesha library calls dbus-send; DBUS_SYSTEM_BUS_ADDRESS
# points it there). Needs root (namespaces, the bridges, the guests' taps).
#
# Usage: nfs-backend.sh up | down | restart-server | env
#   up              (re)creates the namespaces, starts the bus and ganesha; idempotent only in
#                   the sense that it starts from nothing each time
#   down            stops ganesha and the bus, deletes the namespaces
#   restart-server  stops ganesha and starts it again (the exports come back from their files)
#   env             prints the variables guests and tests need (NFS_NAMESPACE, ...)
# Exit 3 from up: not root, or a package it needs cannot be had: the caller falls back to the
# DummyDriver.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"
. "$here/shape.sh"

state="$MANILA_SETUP_RUN/openstack"
nfs="$state/nfs"
logs="$state/logs"
# Namespace names from the state folder, so that two clouds (make demo and make test) never share one.
ns="ms-$(printf '%s' "$state" | sha256sum | cut -c1-10)"
router="$ns-r"
# The shape up.sh recorded (a cloud made before shapes existed is the default one).
shape=default
[[ ! -s $state/shape ]] || shape=$(<"$state/shape")
cloud_shape "$shape"
router_ip=10.196.0.1/16
dbus_socket="$nfs/dbus.sock"

print_env() {
  cat <<EOF
NFS_NAMESPACE=$ns
NFS_STORAGE_BRIDGE=br-storage
NFS_ROUTER_NAMESPACE=$router
NFS_MACHINE_BRIDGE=br-machine
NFS_EXPORT_IPS=$(bare "${export_addrs[@]}" | tr , ' ')
NFS_ROOT=$nfs/data
NFS_DBUS=unix:path=$dbus_socket
NFS_GANESHA_LOG=$logs/ganesha.log
NFS_MORE_BRIDGES=$(more_bridges)
EOF
}

# more_bridges prints "NETWORK=BRIDGE" for each further back end's storage network, space-separated.
more_bridges() {
  local line backend zone bname net out=() i=1
  for line in "${more_backends[@]}"; do
    read -r backend zone bname net _ <<<"$line"
    out+=("$net=br-s$((++i))")
  done
  printf '%s' "${out[*]}"
}

# backend_dirs BACKEND prints the export folder and the export database of a back end: the
# first one's are the folder's own (exports/, exports.sqlite); a further one's have its name.
# Each back end of Manila's ganesha library keeps its own index of exports and counts its own
# export IDs, so every further one starts its count 100000 higher (ganesha wants them unique).
backend_dirs() {
  if [[ $1 == nfs ]]; then
    printf '%s %s' "$nfs/exports" "$nfs/exports.sqlite"
  else
    printf '%s %s' "$nfs/exports-$1" "$nfs/exports-$1.sqlite"
  fi
}

# start NAME CMD...: a process group of its own, recorded in $state/NAME.pgid (down.sh stops
# every such group whose command line names $state).
start() {
  local name=$1; shift
  rm -f "$state/$name.pgid"
  setsid /bin/bash -c 'echo $$ >"$0"; exec "$@"' "$state/$name.pgid" "$@" </dev/null >>"$logs/$name.log" 2>&1 &
  local i
  for ((i = 0; i < 50; i++)); do [[ -s $state/$name.pgid ]] && return; sleep 0.1; done
  die "$name did not start"
}

stop() {
  local f="$state/$1.pgid" pgid i
  [[ -s $f ]] || return 0
  pgid=$(<"$f")
  kill -TERM -- "-$pgid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL -- "-$pgid" 2>/dev/null || true
  rm -f "$f"
}

start_ganesha() {
  # A private /run (its own mount namespace) keeps ganesha away from the host's rpcbind socket.
  start ganesha env DBUS_SYSTEM_BUS_ADDRESS="unix:path=$dbus_socket" \
    ip netns exec "$ns" unshare -m sh -c 'mount -t tmpfs tmpfs /run && exec "$@"' ganesha \
    ganesha.nfsd -F -f "$nfs/ganesha.conf" -L "$logs/ganesha.log" -p "$nfs/ganesha.pid"
  local i
  for ((i = 0; i < 100; i++)); do
    ip netns exec "$ns" ss -Hltn 'sport = :2049' 2>/dev/null | grep -q . && return 0
    kill -0 -- "-$(<"$state/ganesha.pgid")" 2>/dev/null || break
    sleep 0.1
  done
  tail -n 20 "$logs/ganesha.log" >&2 || true
  die "ganesha did not listen on 2049 in namespace $ns"
}

# more_exports prints ", ADDR (BACKEND, ZONE)" for each further back end.
more_exports() {
  local line backend zone eaddr
  for line in "${more_backends[@]}"; do
    read -r backend zone _ _ _ _ _ _ eaddr <<<"$line"
    printf ', %s (%s, %s)' "${eaddr%/*}" "$backend" "$zone"
  done
}

down() {
  stop ganesha
  stop nfs-dbus
  ip netns del "$ns" 2>/dev/null || true
  ip netns del "$router" 2>/dev/null || true
}

up() {
  ((EUID == 0)) || { echo "the real NFS back end needs root (network namespaces)" >&2; exit 3; }
  local need=()
  command -v ganesha.nfsd >/dev/null || need+=(nfs-ganesha)
  [[ -e /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so ]] || need+=(nfs-ganesha-vfs)
  command -v dbus-daemon >/dev/null || need+=(dbus-daemon)
  command -v dbus-send >/dev/null || need+=(dbus-bin)
  if ((${#need[@]})); then
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" \
      >>"$logs/nfs-apt.log" 2>&1 || { echo "apt-get install ${need[*]} failed ($logs/nfs-apt.log)" >&2; exit 3; }
  fi
  down
  mkdir -p "$nfs"/{data,exports,recovery} "$logs"
  ip netns add "$ns"
  ip netns add "$router"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add br-storage type bridge
  local addr
  # nodad: an IPv6 export address is usable at once, not after duplicate address detection.
  for addr in "${export_addrs[@]}" "${admin_export_addrs[@]}"; do
    if [[ $addr == *:* ]]; then
      ip -n "$ns" addr add "$addr" dev br-storage nodad
    else
      ip -n "$ns" addr add "$addr" dev br-storage
    fi
  done
  ip -n "$ns" link set br-storage up
  local line backend zone bname net subnet cidr pstart pend eaddr i=1 dir db
  for line in "${more_backends[@]}"; do
    read -r backend zone bname net subnet cidr pstart pend eaddr <<<"$line"
    ((++i))
    ip -n "$ns" link add "br-s$i" type bridge
    ip -n "$ns" addr add "$eaddr" dev "br-s$i"
    ip -n "$ns" link set "br-s$i" up
  done
  ip -n "$router" link set lo up
  ip -n "$router" link add br-machine type bridge
  ip -n "$router" addr add "$router_ip" dev br-machine
  ip -n "$router" link set br-machine up
  ip netns exec "$router" sysctl -qw net.ipv4.ip_forward=1
  ip -n "$router" route add blackhole default

  cat >"$nfs/dbus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<!-- A private system bus for ganesha's export manager: only root on this host reaches its socket. -->
<busconfig>
  <type>system</type>
  <listen>unix:path=$dbus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="root"/>
    <allow own="org.ganesha.nfsd"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF
  rm -f "$dbus_socket"
  start nfs-dbus dbus-daemon --nofork --nopidfile --config-file="$nfs/dbus.conf"
  local i
  for ((i = 0; i < 50; i++)); do [[ -S $dbus_socket ]] && break; sleep 0.1; done
  [[ -S $dbus_socket ]] || die "the private D-Bus bus did not start ($logs/nfs-dbus.log)"

  # The index of exports that Manila's ganesha library keeps (one %include per export file),
  # one per back end, and a further back end's export ID count (see backend_dirs).
  touch "$nfs/exports/INDEX.conf"
  local includes="%include $nfs/exports/INDEX.conf"
  i=1
  for line in "${more_backends[@]}"; do
    read -r backend _ <<<"$line"
    read -r dir db <<<"$(backend_dirs "$backend")"
    mkdir -p "$dir"
    touch "$dir/INDEX.conf"
    includes+=$'\n'"%include $dir/INDEX.conf"
    sqlite3 "$db" "create table ganesha(key varchar(20) primary key, value int); insert into ganesha values(\"exportid\", $((100000 * ++i)));"
  done
  cat >"$nfs/ganesha.conf" <<EOF
# nfs-ganesha of the loopback cloud (test/env/openstack/nfs-backend.sh). NFSv4 only: no rpcbind.
NFS_CORE_PARAM {
  Protocols = 4;
  Enable_NLM = false;
  Enable_RQUOTA = false;
  Enable_UDP = false;
  mount_path_pseudo = true;
}
NFSV4 {
  # Clients reclaim their state after a restart within the grace period (a short one: the
  # tests restart the server while clients write).
  Graceless = false;
  Lease_Lifetime = 10;
  Grace_Period = 12;
  RecoveryRoot = $nfs/recovery;
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT_DEFAULTS {
  Protocols = 4;
  Transports = TCP;
  Access_Type = None;
  Squash = No_Root_Squash;
  SecType = sys;
}
LOG { Default_Log_Level = EVENT; Components { EXPORT = INFO; } }
$includes
EOF
  start_ganesha
  step "NFS back end: ganesha on $(bare "${export_addrs[@]}")$(more_exports) (namespace $ns), machine router $router_ip (namespace $router)"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  restart-server) stop ganesha; start_ganesha ;;
  env) print_env ;;
  *) die "usage: $0 up | down | restart-server | env" ;;
esac
