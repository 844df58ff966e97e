#!/usr/bin/env bash
# `make test`: everything, on a fresh machine or a warm one. Builds (or reuses) the kube binaries,
# brings up a loopback OpenStack of its own (its own state folder and free ports: never the one of
# make demo or make env-up, nor that of another make test running at the same time), runs lint and
# every test with the integration tag, then stops exactly what it started, also when a test fails
# or is interrupted.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/lib.sh"
cd "$top"

export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
test_pgid=

# The tests assert on the cloud's state, so they get a cloud nobody else touches: a running demo
# cloud (make demo, make env-up) may hold anything a user did in it, and another make test on
# the same machine creates and deletes its own things. own_cloud (lib.sh) exports a new
# MANILA_SETUP_RUN and free KEYSTONE_PORT, NEUTRON_PORT, MANILA_PORT, NOVA_PORT, PLACEMENT_PORT,
# GLANCE_PORT for everything below.
# A second cloud, of the director's shape (openstack/shape.sh: StorageNFS 172.17.5.0/24 and an
# IPv6 subnet, a dual-stack machine network), for the journey on that layout
# (test/e2e TestJourneyOnTheDirectorLayout): a folder and ports of its own, reserved here like
# the first cloud's. The tests find it through MANILA_SETUP_RUN_DIRECTOR.
own_cloud director
director_env=(MANILA_SETUP_CLOUD_SHAPE=director MANILA_SETUP_RUN="$MANILA_SETUP_RUN" KEYSTONE_PORT="$KEYSTONE_PORT"
  NEUTRON_PORT="$NEUTRON_PORT" MANILA_PORT="$MANILA_PORT" NOVA_PORT="$NOVA_PORT" PLACEMENT_PORT="$PLACEMENT_PORT" GLANCE_PORT="$GLANCE_PORT")
export MANILA_SETUP_RUN_DIRECTOR=$MANILA_SETUP_RUN
# A third, of the zones shape (shape.sh: Manila back ends in az1 and az2, each exporting on a
# storage network of its own, and a second one in az1), for discovery per zone
# (internal/openstack TestDiscoverPerZone): MANILA_SETUP_RUN_ZONES.
own_cloud zones
zones_env=(MANILA_SETUP_CLOUD_SHAPE=zones MANILA_SETUP_RUN="$MANILA_SETUP_RUN" KEYSTONE_PORT="$KEYSTONE_PORT"
  NEUTRON_PORT="$NEUTRON_PORT" MANILA_PORT="$MANILA_PORT" NOVA_PORT="$NOVA_PORT" PLACEMENT_PORT="$PLACEMENT_PORT" GLANCE_PORT="$GLANCE_PORT")
export MANILA_SETUP_RUN_ZONES=$MANILA_SETUP_RUN
own_cloud test

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
  if [[ -n ${side_pgid:-} ]] && kill -0 -- "-$side_pgid" 2>/dev/null; then
    step "stopping what ran beside the tests (process group $side_pgid)"
    kill -TERM -- "-$side_pgid" 2>/dev/null || true
  fi
  # A cloud still starting is let finish, so that down.sh finds every process group it recorded.
  [[ -n ${openstack_pid:-} ]] && wait "$openstack_pid" 2>/dev/null
  step "stopping this run's loopback OpenStack clouds"
  bash "$here/openstack/down.sh" || true
  env "${director_env[@]}" bash "$here/openstack/down.sh" || true
  env "${zones_env[@]}" bash "$here/openstack/down.sh" || true
  if ((rc == 0)); then
    rm -rf "${MANILA_SETUP_RUN:?}" "${MANILA_SETUP_RUN_DIRECTOR:?}" "${MANILA_SETUP_RUN_ZONES:?}"
  else
    step "this run's cloud state and logs are kept in $MANILA_SETUP_RUN, $MANILA_SETUP_RUN_DIRECTOR and $MANILA_SETUP_RUN_ZONES"
  fi
  step "make test finished with exit code $rc"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The cloud installs and starts (network and disk bound) while the kube binaries compile (CPU
# bound): on a fresh machine that saves the 3-5 minutes the cloud takes.
# The shaped clouds come up after the first one, which installs the packages they use.
openstack_log="$MANILA_SETUP_RUN/openstack-up.log"
director_log="$MANILA_SETUP_RUN_DIRECTOR/openstack-up.log"
zones_log="$MANILA_SETUP_RUN_ZONES/openstack-up.log"
step "loopback OpenStack of this run: starting in the background on ports $KEYSTONE_PORT, $NEUTRON_PORT, $MANILA_PORT, $NOVA_PORT, $PLACEMENT_PORT, $GLANCE_PORT (state and log: $MANILA_SETUP_RUN), then the director-shaped one (state and log: $MANILA_SETUP_RUN_DIRECTOR) and the zones-shaped one (state and log: $MANILA_SETUP_RUN_ZONES)"
(
  bash "$here/openstack/up.sh" >"$openstack_log" 2>&1
  env "${director_env[@]}" bash "$here/openstack/up.sh" >"$director_log" 2>&1
  env "${zones_env[@]}" bash "$here/openstack/up.sh" >"$zones_log" 2>&1
) &
openstack_pid=$!

# The binaries the tests run, one build after the other: they come from one Go module
# (test/env/binaries), and a build running beside another would compile the same shared packages
# a second time. The cloud above comes up beside them.
step "kube binaries (cold: about 15 minutes for all of the binaries below; cached afterwards)"
KUBEBUILDER_ASSETS=$(bash "$here/kube/build.sh")
export KUBEBUILDER_ASSETS

# The real node's kubelet (most of it is in the build cache after the control plane);
# containerd, runc and busybox-static from the distribution.
step "real node: kubelet, containerd (cached afterwards)"
MANILA_SETUP_NODE_ASSETS=$(bash "$here/node/build.sh")
export MANILA_SETUP_NODE_ASSETS

# The real Manila CSI driver's controller side (test/e2e runs it as processes; the real node
# runs it from images).
step "CSI driver binaries (cached afterwards)"
MANILA_SETUP_CSI_BIN=$(bash "$here/csi/build.sh")
export MANILA_SETUP_CSI_BIN

# The real Cluster API and CAPO controllers, one program from a module of its own
# (test/testenv/capireal runs it against Nova).
step "Cluster API controllers (cold: about 10 minutes; cached afterwards)"
MANILA_SETUP_CLUSTERAPI=$(bash "$here/clusterapi/build.sh")
export MANILA_SETUP_CLUSTERAPI

# The real Machine API controllers with the OpenStack actuator (test/machineapi, a module of its
# own): the tests run them as a process against their clusters and the cloud's Nova.
step "Machine API controllers (cached afterwards)"
MANILA_SETUP_MACHINEAPI_BIN=$(bash "$here/machineapi/build.sh")
export MANILA_SETUP_MACHINEAPI_BIN

# What OpenShift's csi-snapshot-controller-operator gives a cluster: the snapshot-controller and
# the snapshot CRDs (the tests of snapshots and restores; seconds cold).
step "snapshot-controller and snapshot CRDs (cached afterwards)"
MANILA_SETUP_SNAPSHOTS=$(bash "$here/snapshots/build.sh")
export MANILA_SETUP_SNAPSHOTS

# promtool, for the checks and unit tests of the operator's alert rules (test/alerts).
step "promtool (cold: about 3 minutes; cached afterwards)"
MANILA_SETUP_PROMTOOL=$(bash "$here/promtool/build.sh")
export MANILA_SETUP_PROMTOOL

# The real node's other operand images and its CNI plugins.
step "real node: operand binaries and CNI plugins (cached afterwards)"
MANILA_SETUP_OPERAND_BIN=$(bash "$here/node/operands.sh")
export MANILA_SETUP_OPERAND_BIN

if ! wait "$openstack_pid"; then
  cat "$openstack_log" "$director_log" "$zones_log" >&2 2>/dev/null || true
  die "the loopback OpenStack clouds did not come up (logs above)"
fi
tail -n 3 "$openstack_log" "$director_log" "$zones_log" >&2
step "loopback OpenStack ready"

# The data-path tests' NFS clients: Debian's kernel and a busybox initramfs for QEMU guests
# (after the cloud: apt is free again; seconds cold, cached by the kernel package's version).
if ((EUID == 0)); then
  step "NFS client guests: kernel and initramfs (cached afterwards)"
  MANILA_SETUP_GUEST=$(bash "$here/guest/build.sh")
  export MANILA_SETUP_GUEST
fi

# tmux drives the real binary in the wizard's smoke test, podman builds and runs the operator
# image in test/e2e (after the cloud: apt is free again).
bash "$here/tmux.sh"
. "$top/build/podman.sh"
podman_install


# Beside the tests: lint (gofmt, go vet, goimports, staticcheck: about 3 CPU-minutes cold), the fuzz runs of installconfig (load + validate + patch, and the diff it
# prints), the installer oracle and the OLM bundle check, the last two modules of their own so
# that the main module depends on neither openshift/installer nor the operator framework. None
# starts a server or needs the cloud; cold, they are about 12 CPU-minutes, mostly compiling.
# The integration tests leave about a third of the two cores idle while they wait on their
# servers, so these fill it instead of adding 6-8 minutes after them. Each has its log.
side_log="$MANILA_SETUP_RUN/beside-tests"
step "beside the tests: lint, fuzz installconfig (30 s + 10 s), the installer oracle, the OLM bundle check, the Machine API actuator's unit tests (logs: $side_log.*.log)"
setsid bash -c '
  set -e
  log=$1
  make --no-print-directory lint >"$log.lint.log" 2>&1
  go test -run "^\$" -fuzz "^FuzzValidatePatch\$" -fuzztime 30s -fuzzminimizetime 5s ./installconfig >"$log.fuzz.log" 2>&1
  go test -run "^\$" -fuzz "^FuzzUnified\$" -fuzztime 10s ./internal/textdiff >>"$log.fuzz.log" 2>&1
  # -mod=mod: the oracle requires the main module through a replace, so a dependency bump
  # there may need go.mod/go.sum updates here; let go make them rather than fail.
  (cd test/installer-oracle && go test -mod=mod -count=1 ./...) >"$log.oracle.log" 2>&1
  (cd test/olm-bundle && go test -mod=mod -count=1 ./...) >"$log.olm.log" 2>&1
  (cd test/machineapi && go test -count=1 ./...) >"$log.machineapi.log" 2>&1
' beside-tests "$side_log" &
side_pid=$!
side_pgid=$side_pid

step "go test -tags integration ./... (all unit and integration tests)"
# The packages that take longest (measured: 2-9 minutes each) are named first so that they start
# first: in path order test/e2e and test/userguide started last and ran alone at the end (and
# test/datapath, 9 minutes, did so until it was named here). Three
# test binaries at a time: with two, a third of the two cores stayed idle while tests waited on
# their servers.
longest=(./test/e2e ./test/realmachines ./cmd/manila-setup ./test/datapath ./operator/controllers ./test/userguide
  ./machinesets ./cmd/manila-setup/wizard ./operator/probe/probepod ./clusterapi)
# -parallel 3: the e2e journeys on real servers (t.Parallel; each has its project, cluster and
# controllers) mostly wait on Nova and their controllers, so they share the two cores. The CLI's
# tests on real servers (test/realmachines) run one after the other, beside the CLI's other
# tests: with them side by side too, eight clusters at once kept the loopback cloud's one Nova
# API process so busy that clusters took 16 minutes to come up and tests timed out.
# setsid puts the test binaries and every server they start in one new process group, so the
# cleanup above can stop all of them, and nothing else, whatever happens to the tests.
setsid go test -tags integration -count=1 -timeout 60m -p 3 -parallel 3 "${longest[@]}" ./... &
test_pid=$!
test_pgid=$test_pid
wait "$test_pid"

step "waiting for what ran beside the tests (lint, fuzz, installer oracle, OLM bundle check)"
if ! wait "$side_pid"; then
  for f in "$side_log".*.log; do echo "== $f"; cat "$f"; done >&2
  die "lint, the fuzz runs, the installer oracle, the OLM bundle check or the actuator's unit tests failed (logs above)"
fi
for f in lint fuzz oracle olm machineapi; do echo "== $f"; tail -n 4 "$side_log.$f.log"; done >&2
step "lint, fuzz, installer oracle (openshift-install's own checks over the installconfig corpus), OLM bundle validation, Machine API actuator unit tests: passed"
