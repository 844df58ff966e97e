#!/usr/bin/env bash
# Stops exactly what up.sh started: the process groups recorded in $state/*.pgid, and only those
# whose processes name this state dir on their command line (every service up.sh starts does), so
# a stale file never makes us signal a stranger that got the same id. TERM first, KILL after about 10 s. Never kills by process name. Safe to run when
# nothing runs; exits 0.
#
# Usage: down.sh [--purge]   --purge also deletes the state dir (configs, databases, logs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

state="$MANILA_SETUP_RUN/openstack"
purge=false
case ${1:-} in
  --purge) purge=true ;;
  '') ;;
  *) die "usage: $0 [--purge]" ;;
esac

# members PGID prints the live (non-zombie) pids in process group PGID.
members() { ps -eo pid=,pgid=,stat= | awk -v g="$1" '$2 == g && $3 !~ /^Z/ { print $1 }'; }

# ours PGID succeeds if a process of the group was started by up.sh for this state dir.
# (The command line, not an environment marker: setproctitle, which Neutron uses to name its
# workers, overwrites /proc/PID/environ; the titles it sets still carry the original arguments.)
ours() {
  local pid
  for pid in $(members "$1"); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$state/" && return 0
  done
  return 1
}

shopt -s nullglob
groups=()
for f in "$state"/*.pgid; do
  name=$(basename "$f" .pgid)
  pgid=$(<"$f")
  if [[ $pgid =~ ^[0-9]+$ ]] && ((pgid > 1)) && ours "$pgid"; then
    step "stopping $name (process group $pgid)"
    kill -TERM -- "-$pgid" 2>/dev/null || true
    groups+=("$pgid")
  fi
done

# Wait up to 10 s (wall clock: ps is slow on a busy machine) for the groups to go, then KILL
# what is left.
deadline=$((SECONDS + 10))
while :; do
  left=()
  for pgid in "${groups[@]}"; do [[ -n $(members "$pgid") ]] && left+=("$pgid"); done
  ((${#left[@]} == 0 || SECONDS >= deadline)) && break
  sleep 0.2
done
for pgid in "${left[@]}"; do
  if ours "$pgid"; then
    step "process group $pgid ignored TERM; sending KILL"
    kill -KILL -- "-$pgid" 2>/dev/null || true
  fi
done
deadline=$((SECONDS + 5))
while ((${#left[@]} > 0 && SECONDS < deadline)); do
  alive=false
  for pgid in "${left[@]}"; do [[ -n $(members "$pgid") ]] && alive=true; done
  $alive || break
  sleep 0.1
done

rm -f "$state"/*.pgid
# The NFS back end's network namespaces (its processes were among the groups above).
if ((EUID == 0)) && [[ -f $state/nfs-backend ]]; then
  bash "$here/nfs-backend.sh" down
fi
if $purge; then
  rm -rf "${state:?}"
  step "removed $state"
fi
exit 0
