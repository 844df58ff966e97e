#!/usr/bin/env bash
# `make test`: everything, on a fresh machine or a warm one. Builds (or reuses) the kube binaries,
# brings up the loopback OpenStack if it is not already running, runs lint and every test with the
# integration tag, then stops exactly what it started, also when a test fails or is interrupted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
cd "$top"

export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
started_openstack=
test_pgid=

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  # Everything the tests started (apiservers, etcd, kwok, ...) is in the test run's process group.
  if [[ -n $test_pgid ]] && kill -0 -- "-$test_pgid" 2>/dev/null; then
    step "stopping what the tests left running (process group $test_pgid)"
    kill -TERM -- "-$test_pgid" 2>/dev/null || true
    sleep 2
    kill -KILL -- "-$test_pgid" 2>/dev/null || true
  fi
  if [[ -n $started_openstack ]]; then
    step "stopping the loopback OpenStack this run started"
    bash "$here/openstack/down.sh" || true
  fi
  step "make test finished with exit code $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "kube binaries (cold: 15-25 min, cached afterwards)"
KUBEBUILDER_ASSETS=$(bash "$here/kube/build.sh")
export KUBEBUILDER_ASSETS

# Leave a cloud that was already running (make env-up, make demo) running afterwards.
openstack_running() {
  local f
  for f in "$MANILA_SETUP_RUN"/openstack/*.pgid; do
    [[ -f $f ]] && kill -0 -- "-$(cat "$f")" 2>/dev/null && return 0
  done
  return 1
}
openstack_running || started_openstack=1
step "loopback OpenStack"
bash "$here/openstack/up.sh"

step "lint (gofmt, go vet)"
make --no-print-directory lint

step "go test -tags integration ./... (all unit and integration tests)"
# setsid puts the test binaries and every server they start in one new process group, so the
# cleanup above can stop all of them, and nothing else, whatever happens to the tests.
setsid go test -tags integration -count=1 -timeout 40m ./... &
test_pid=$!
test_pgid=$test_pid
wait "$test_pid"
