#!/usr/bin/env bash
# Prints what `make demo` brought up and how to use it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
os="$MANILA_SETUP_RUN/openstack"
sb="$MANILA_SETUP_SANDBOX"

if [[ ! -f $sb/ready ]]; then
  echo "No sandbox is running: make demo starts one."
  exit 0
fi
if [[ -f $sb/real-node ]]; then
  { read -r real; read -r pod_logs; } <"$sb/real-node"
  nodes="3 master and 3 worker nodes from kwok
    (fake nodes: their pods run nothing), and $real, a real kubelet (containerd, runc, a pod
    network) as one more control-plane node"
  driver="  - the real Manila CSI driver, in the pods the operator rendered, running on $real from images
    built here: a controller replica (manila-csi-plugin, csi-provisioner and its sidecars), the
    node plugin and the NFS node plugin. A claim on a csi-manila-* StorageClass becomes a real
    share in the loopback Manila, provisioned by that pod; a pod mounting it stops at the kernel's
    NFS client, which this machine lacks
      their logs: $pod_logs"
else
  nodes="3 master and 3 worker nodes from kwok
    (fake nodes: their pods run nothing)"
  driver="  - the real Manila CSI driver's controller (manila-csi-plugin, csi-provisioner) as local
    processes (no real node: not root): a claim on a csi-manila-* StorageClass becomes a real
    share in the loopback Manila
      logs: $sb/csi/"
fi
if [[ -f $sb/guest-workers ]]; then
  nodes="$nodes; up to $(cat "$sb/guest-workers") workers attached to the storage
    network boot as guest nodes instead: QEMU guests with their servers' ports, a real kernel,
    containerd and a kubelet, whose pods mount the Manila shares through that kernel"
fi
if [[ $(cat "$os/nfs-backend" 2>/dev/null) == real ]]; then
  backend="its shares real NFS exports: nfs-ganesha in a network
    namespace of the cloud's own serves them on the storage network's export addresses, and
    enforces the access rules Manila grants"
else
  backend="its back end the DummyDriver, which exports nothing (the real
    NFS back end needs root)"
fi
cat <<TXT

What runs (sandbox pid $(cat "$sb/sandbox.pid" 2>/dev/null || echo '?')):
  - OpenStack on 127.0.0.1: real Keystone, Neutron, Manila, Nova (fake virt driver), Placement
    and Glance, seeded with networks, security groups, share types, a share and flavors; Manila
    with $backend
      state and logs: $os
      what was seeded: $os/seed.json
  - a cluster shaped like a fresh OpenShift-on-OpenStack install: real kube-apiserver, etcd,
    kube-controller-manager and kube-scheduler; $nodes; the masters under the installer's
    ControlPlaneMachineSet and a worker MachineSet as openshift-install writes them, without the
    storage network; the real Machine API controllers (MachineSet, machine, nodelink, and the
    control-plane-machine-set and etcd rules) with an OpenStack actuator that makes each Machine
    a Nova server with its Neutron ports, and a node registered for each server (kwok: no kubelet
    boots in a fake server)
  - the manila-setup operator, as a local process: it deployed the driver's workloads, Secret
    csi-manila-secrets and one StorageClass per Manila share type
      log: $sb/operator.log
$driver
  - everything else (the sandbox's own progress): $sb/sandbox.log

Use it:
  export KUBECONFIG=$sb/kubeconfig
  export OS_CLIENT_CONFIG_FILE=$os/clouds.yaml OS_CLOUD=manila-setup
  bin/manila-setup networks discover     # the network Manila exports on
  bin/manila-setup machinesets list      # the workers' MachineSet, not attached yet
  bin/manila-setup controlplane list     # the masters' ControlPlaneMachineSet, not attached either
  openstack server list                  # the workers' Nova servers (kubectl get machines -A)
  bin/manila-setup networks attach       # the wizard: attach, roll the machines, verify
  bin/manila-setup operator status       # the driver, its conditions, the StorageClasses
  bin/manila-setup diagnose pod/NAME -n NS  # why a pod's volume does not mount
  kubectl get pvc,pv -A                  # any kubectl works with this KUBECONFIG
  kubectl get volumesnapshotclass -o yaml  # snapshots: which StorageClasses can (docs/snapshots.md)

$(if [[ -f $sb/rwx-demo ]]; then echo; cat "$sb/rwx-demo"; elif [[ -f $sb/guest-workers ]]; then
  echo; echo "Once the workers are attached (the wizard), two writer pods share one Manila share in"
  echo "namespace rwx-demo, on two guest workers (test/env/sandbox/rwx-demo.yaml)."; fi)

Stop it:  make demo-down   (the cluster; the cloud too if make demo started it)
TXT
