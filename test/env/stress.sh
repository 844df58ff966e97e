#!/usr/bin/env bash
# `make test-stress`: do the tests that use the loopback OpenStack pass under load, again and
# again? Starts a cloud of its own (like make test: own folder, own free ports), then runs RUNS
# rounds; in each round, at the same time:
#   - two `go test -tags integration -count=1` processes over the OpenStack-heavy packages
#     (STRESS_PKGS), as make test runs test packages in parallel;
#   - test/env/openstack/hammer.sh, a write load from several projects at once (HAMMER_WORKERS
#     workers, HAMMER_ROUNDS rounds each).
# Prints one line per round and a summary (runs, failures, "database is locked" events in the
# services' logs), stops its cloud, and exits 1 if anything failed. The logs of every run stay in
# the folder it names.
#
# Environment: RUNS (5), STRESS_PKGS ("./internal/openstack ./cmd/manila-setup"),
# HAMMER_WORKERS (4), HAMMER_ROUNDS (3). cmd/manila-setup starts apiservers: the kube binaries
# are built or found by test/env/kube/build.sh unless KUBEBUILDER_ASSETS names them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
cd "$top"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

runs=${RUNS:-5}
pkgs=${STRESS_PKGS:-./internal/openstack ./cmd/manila-setup}
hammer_workers=${HAMMER_WORKERS:-4}
hammer_rounds=${HAMMER_ROUNDS:-3}
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive number"

own_cloud stress
out="$MANILA_SETUP_RUN/stress"
mkdir -p "$out"
pgids=()

cleanup() {
  local rc=$? g
  trap - EXIT INT TERM
  for g in "${pgids[@]}"; do kill -TERM -- "-$g" 2>/dev/null || true; done
  step "stopping the stress run's loopback OpenStack"
  bash "$here/openstack/down.sh" >/dev/null || true
  step "logs of every run: $out"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "loopback OpenStack of this run on ports $KEYSTONE_PORT, $NEUTRON_PORT, $MANILA_PORT, $NOVA_PORT, $PLACEMENT_PORT, $GLANCE_PORT (state: $MANILA_SETUP_RUN)"
if ! bash "$here/openstack/up.sh" >"$out/openstack-up.log" 2>&1; then
  tail -n 30 "$out/openstack-up.log" >&2
  die "the loopback OpenStack did not come up"
fi
if [[ -z ${KUBEBUILDER_ASSETS:-} ]]; then
  step "kube binaries (cold: about 15 min, cached afterwards)"
  KUBEBUILDER_ASSETS=$(bash "$here/kube/build.sh")
  export KUBEBUILDER_ASSETS
fi
step "compiling the test binaries once (not part of any round's time)"
# shellcheck disable=SC2086
go test -tags integration -count=1 -run '^$' $pkgs >/dev/null

# locked_events prints how many "database is locked" errors the services have logged so far (one
# error spans several lines with the same time stamp and process id).
locked_events() {
  cat "$MANILA_SETUP_RUN"/openstack/logs/{keystone,neutron,manila}.log 2>/dev/null |
    { grep 'database is locked' || true; } | awk '{ print $1, $2, $3 }' | sort -u | wc -l
}

# in_group LOG CMD... starts CMD in the background in a process group of its own (setsid, so
# that cleanup can stop it and every server it started) with its output in LOG; its pid, which is
# also the group's id, is in $!.
in_group() {
  local log=$1; shift
  setsid "$@" >"$log" 2>&1 </dev/null &
}

go_runs=0 go_failed=0 hammer_runs=0 hammer_failed=0
locked_before=$(locked_events)
t0=$SECONDS
for ((i = 1; i <= runs; i++)); do
  start=$SECONDS
  # shellcheck disable=SC2086
  in_group "$out/round$i-go-a.log" go test -tags integration -count=1 -timeout 20m $pkgs
  a=$!
  # shellcheck disable=SC2086
  in_group "$out/round$i-go-b.log" go test -tags integration -count=1 -timeout 20m $pkgs
  b=$!
  in_group "$out/round$i-hammer.log" bash "$here/openstack/hammer.sh" "$hammer_workers" "$hammer_rounds"
  h=$!
  pgids=("$a" "$b" "$h")
  results=()
  for p in "$a" "$b"; do
    go_runs=$((go_runs + 1))
    if wait "$p"; then results+=(ok); else results+=(FAIL); go_failed=$((go_failed + 1)); fi
  done
  hammer_runs=$((hammer_runs + 1))
  if wait "$h"; then results+=(ok); else results+=(FAIL); hammer_failed=$((hammer_failed + 1)); fi
  pgids=()
  step "round $i/$runs in $((SECONDS - start))s: go test ${results[0]} ${results[1]}, hammer ${results[2]} ($(sed -n 's/^hammer: //p' "$out/round$i-hammer.log"))"
  for f in "$out/round$i-go-a.log" "$out/round$i-go-b.log"; do
    grep -E '^(--- FAIL|FAIL|panic:)' "$f" | sed "s|^|    $(basename "$f"): |" >&2 || true
  done
done
locked=$(($(locked_events) - locked_before))
step "test-stress: $runs rounds in $((SECONDS - t0))s: go test runs $go_runs, failed $go_failed; hammer runs $hammer_runs, failed $hammer_failed; \"database is locked\" in the services' logs: $locked"
((go_failed == 0 && hammer_failed == 0))
