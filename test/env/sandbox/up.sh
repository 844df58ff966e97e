#!/usr/bin/env bash
# `make demo`: brings up (or reuses) the loopback OpenStack and the sandbox cluster, then opens
# the attach wizard against them (or prints its command when there is no terminal).
#
#   - the loopback OpenStack (test/env/openstack/up.sh), unless it is already running;
#   - meanwhile the kube binaries and the real CSI driver's binaries (cached after the first run);
#   - as root, the real node's kubelet and operand binaries (cached after the first run too;
#     DEMO_REAL_NODE=off skips them), and the guest workers' kernel: up to DEMO_GUEST_WORKERS
#     (default 2) workers attached to the storage network boot as QEMU guests, real kernels
#     whose pods mount the Manila shares, and the demo's two writers (rwx-demo) run there;
#   - the sandbox (test/env/sandbox/main.go) in its own process group: a sim cluster shaped like
#     a fresh OpenShift-on-OpenStack install, the Machine API stand-in, the operator and the real
#     driver (its pods on the real node as root, else its controller as local processes), until
#     `make demo-down`.
#   - DEMO_INFRA_ID (default ostest-demo1) names the cluster: its servers, ports and security
#     groups in the cloud are named after it, and its teardown deletes what bears that name, so
#     two sandboxes on one cloud at once (the tests' make demo runs) each need their own.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
. "$here/../lib.sh"
cd "$top"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

sandbox="$MANILA_SETUP_SANDBOX"
os_dir="$MANILA_SETUP_RUN/openstack"
cli="$top/bin/manila-setup"
cloud=${DEMO_CLOUD:-manila-setup}
mkdir -p "$sandbox"

sandbox_running() {
  [[ -f $sandbox/sandbox.pid ]] && kill -0 "$(cat "$sandbox/sandbox.pid")" 2>/dev/null
}

openstack_running() {
  local f
  for f in "$os_dir"/*.pgid; do
    [[ -f $f ]] && kill -0 -- "-$(cat "$f")" 2>/dev/null && return 0
  done
  return 1
}

open_wizard() {
  local cmd=("$cli" networks attach --kubeconfig "$sandbox/kubeconfig" --os-cloud "$cloud"
    --os-client-config-file "$os_dir/clouds.yaml")
  if [[ -t 0 && -t 1 ]]; then
    step "opening the wizard: ${cmd[*]#"$top/"}"
    "${cmd[@]}" || return
    show_rwx_demo
    return
  fi
  echo
  echo "No terminal here, so the wizard is not opened. Run it in a terminal:"
  echo "  ${cmd[*]}"
  if [[ -f $sandbox/guest-workers ]]; then
    echo "Once the workers are attached, two writer pods share a Manila share in namespace rwx-demo;"
    echo "make demo again (or bash test/env/demo-info.sh) says how to watch them."
  fi
}

# show_rwx_demo waits, after the wizard, for the demo's writers on the attached guest workers,
# and prints how to watch them read each other's lines. Ctrl-C ends the wait, not the sandbox.
show_rwx_demo() {
  [[ -f $sandbox/guest-workers ]] || return 0
  trap 'echo; echo "(not waiting any longer: the sandbox goes on; make demo again says where the writers are)"; exit 0' INT
  local deadline=$((SECONDS + 600)) last=
  while [[ ! -f $sandbox/rwx-demo ]]; do
    if ((SECONDS > deadline)); then
      echo "The writers of rwx-demo are not reading each other's lines after 10 minutes: see $sandbox/sandbox.log"
      echo "and manila-setup diagnose pod/writer-one -n rwx-demo."
      return 0
    fi
    if ! grep -aq 'booting it as a guest node' "$sandbox/sandbox.log" && ((SECONDS > deadline - 540)); then
      echo "No worker was attached to the storage network, so no writer runs: the wizard, or"
      echo "  bin/manila-setup machinesets patch --discover --rollout"
      echo "attaches them; make demo again then shows the writers."
      return 0
    fi
    line=$(grep -aE 'guest node|rwx-demo' "$sandbox/sandbox.log" | tail -n 1 || true)
    if [[ -n $line && $line != "$last" ]]; then
      echo "$line"
      last=$line
    fi
    sleep 1
  done
  echo
  cat "$sandbox/rwx-demo"
}

if sandbox_running && [[ -f $sandbox/ready ]]; then
  step "the sandbox is already running (pid $(cat "$sandbox/sandbox.pid")): reusing it"
  bash "$here/../demo-info.sh"
  open_wizard
  exit 0
fi
if sandbox_running; then
  die "a sandbox is starting or stuck (pid $(cat "$sandbox/sandbox.pid"), log $sandbox/sandbox.log): make demo-down first"
fi

# The cloud installs and starts (network and disk bound) while the binaries compile (CPU bound).
openstack_pid=
if openstack_running; then
  step "loopback OpenStack already running: reusing it (make demo-down leaves it running)"
else
  step "loopback OpenStack: starting in the background (first time 3-5 min; log $sandbox/openstack-up.log)"
  touch "$sandbox/started-openstack"
  bash "$here/../openstack/up.sh" >"$sandbox/openstack-up.log" 2>&1 &
  openstack_pid=$!
fi

# As root, one control-plane node is a real kubelet running the driver's pods. Every binary
# comes from one Go module (test/env/binaries), so they build one after the other: side by side,
# two builds would compile the same shared packages twice.
real_node=${DEMO_REAL_NODE:-auto}
if [[ $real_node != off && $(id -u) != 0 ]]; then
  step "no real node: a kubelet needs root (every node is a kwok node; the driver's controller runs as local processes)"
  real_node=off
fi

step "kube binaries (first time about 15 min, then cached)"
KUBEBUILDER_ASSETS=$(bash "$here/../kube/build.sh")
export KUBEBUILDER_ASSETS
step "CSI driver binaries (first time about a minute after the kube binaries, then cached)"
MANILA_SETUP_CSI_BIN=$(bash "$here/../csi/build.sh")
export MANILA_SETUP_CSI_BIN
if [[ $real_node != off ]]; then
  step "real node: kubelet, containerd, operand binaries and CNI plugins (first time a few minutes, then cached)"
  MANILA_SETUP_NODE_ASSETS=$(bash "$here/../node/build.sh")
  export MANILA_SETUP_NODE_ASSETS
  if ! MANILA_SETUP_OPERAND_BIN=$(bash "$here/../node/operands.sh"); then
    die "the real node's operand binaries did not build (log above); DEMO_REAL_NODE=off runs the demo without it"
  fi
  export MANILA_SETUP_OPERAND_BIN
fi
step "snapshot-controller and snapshot CRDs (first time seconds, then cached)"
MANILA_SETUP_SNAPSHOTS=$(bash "$here/../snapshots/build.sh")
export MANILA_SETUP_SNAPSHOTS
step "building the sandbox program (first time a few minutes, then cached)"
go build -o "$top/bin/manila-setup-sandbox" ./test/env/sandbox

if [[ -n $openstack_pid ]]; then
  # Say what the cloud is doing while it is waited for, rather than stay silent.
  last=
  while kill -0 "$openstack_pid" 2>/dev/null; do
    line=$(grep -a '^\[' "$sandbox/openstack-up.log" 2>/dev/null | tail -n 1 || true)
    if [[ -n $line && $line != "$last" ]]; then
      step "waiting for the loopback OpenStack: ${line#*] }"
      last=$line
    fi
    sleep 2
  done
  if ! wait "$openstack_pid"; then
    cat "$sandbox/openstack-up.log" >&2
    die "the loopback OpenStack did not come up (log above)"
  fi
  step "loopback OpenStack ready"
fi

step "starting the sandbox (log $sandbox/sandbox.log)"
rm -f "$sandbox/ready"
# setsid: the sandbox and every server it starts share one new process group, which
# demo-down stops as a whole.
# The log exists before the sandbox starts, so that tail below always finds it.
: >"$sandbox/sandbox.log"
MANILA_SETUP_T0=$_env_t0 setsid "$top/bin/manila-setup-sandbox" --dir "$sandbox" --cli "$cli" --cloud "$cloud" --real-node "$real_node" \
  --infra-id "${DEMO_INFRA_ID:-ostest-demo1}" \
  --guest-workers "${DEMO_GUEST_WORKERS:-2}" --pod-loopback-ports "${DEMO_POD_LOOPBACK_PORTS:-}" \
  >>"$sandbox/sandbox.log" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$sandbox/sandbox.pid"
tail -n +1 -f "$sandbox/sandbox.log" &
tail_pid=$!
while [[ ! -f $sandbox/ready ]]; do
  if ! kill -0 "$pid" 2>/dev/null; then
    sleep 0.5
    kill "$tail_pid" 2>/dev/null || true
    echo "== the end of $sandbox/sandbox.log:" >&2
    tail -n 40 "$sandbox/sandbox.log" >&2
    die "the sandbox stopped before it was ready (log $sandbox/sandbox.log); make demo-down cleans up"
  fi
  sleep 0.5
done
sleep 0.3
kill "$tail_pid" 2>/dev/null || true
wait "$tail_pid" 2>/dev/null || true

bash "$here/../demo-info.sh"
open_wizard
