#!/usr/bin/env bash
# `make demo-down`: stops the sandbox cluster (its whole process group), and the loopback
# OpenStack only if `make demo` started it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

sandbox="$MANILA_SETUP_SANDBOX"
openstack_running() {
  local f
  for f in "$MANILA_SETUP_RUN"/openstack/*.pgid; do
    [[ -f $f ]] && kill -0 -- "-$(cat "$f")" 2>/dev/null && return 0
  done
  return 1
}

if [[ -f $sandbox/sandbox.pid ]]; then
  pid=$(cat "$sandbox/sandbox.pid")
  if kill -0 "$pid" 2>/dev/null; then
    step "stopping the sandbox (pid $pid): driver, operator, Machine API, cluster"
    kill -TERM "$pid" 2>/dev/null || true
    # Up to 2 minutes: a real node stops its pods and removes its network rules and mounts.
    for _ in $(seq 240); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
  fi
  # Whatever is left of its process group (the sandbox ran as its leader, under setsid).
  if kill -0 -- "-$pid" 2>/dev/null; then
    step "stopping what is left of process group $pid"
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$sandbox/sandbox.pid" "$sandbox/ready"
  step "sandbox stopped (logs kept in $sandbox)"
else
  step "no sandbox running"
fi

if [[ -f $sandbox/started-openstack ]]; then
  step "stopping the loopback OpenStack that make demo started"
  bash "$here/../openstack/down.sh"
  rm -f "$sandbox/started-openstack"
elif openstack_running; then
  step "the loopback OpenStack was not started by make demo: left as it is (make env-down stops it)"
else
  step "no loopback OpenStack running"
fi
