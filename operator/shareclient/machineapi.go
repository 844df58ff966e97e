package shareclient

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/machinesets/attachment"
)

// MachineAPI is what the rule reads of openshift-machine-api, as the operator's caches or a
// client list it.
type MachineAPI struct {
	MachineSets, Machines []*unstructured.Unstructured
	// ControlPlane is the ControlPlaneMachineSet (cluster), nil when the cluster has none.
	ControlPlane *unstructured.Unstructured
	// RunsWorkloads tells by its name whether a Node runs workload pods (RunsWorkloads); nil
	// when the Nodes are not known, and then no master counts.
	RunsWorkloads func(node string) bool
}

// The paths of a providerSpec: a Machine's, a MachineSet's template and the
// ControlPlaneMachineSet's template (machine.openshift.io/v1, the OpenShift machine template).
var (
	machineSpecPath      = []string{"spec", "providerSpec", "value"}
	machineSetSpecPath   = []string{"spec", "template", "spec", "providerSpec", "value"}
	controlPlaneSpecPath = []string{"spec", "template", "machines_v1beta1_machine_openshift_io", "spec", "providerSpec", "value"}
)

// roleLabel is the Machine API's role of a Machine; masterRole that of the control plane.
const (
	roleLabel  = "machine.openshift.io/cluster-api-machine-role"
	masterRole = "master"
)

// FromMachineAPI reads the rule's Sets and Machines off the Machine API. A set is attached when
// its providerSpec gives new machines a port on the storage network (networks[] or ports[], the
// rule every command uses) of one of storageNetworkIDs (several on a cloud whose availability
// zones Manila serves on storage networks of their own: each set attaches its zone's); none (or
// "") means the storage network is not known, and no set counts as attached. A Machine's addresses are its status.addresses, where the Machine
// API's OpenStack provider puts every fixed IP of the server, one per port, once the server
// exists; its Node is status.nodeRef, set when the Node joins; whether it is attached is read off
// its own spec.providerSpec (a copy of its set's template when it was made), by the same rule as
// the sets'.
//
// The Machines a MachineSet made are workers. The masters (role master, or owned by the
// ControlPlaneMachineSet) count only where workloads run on them: a master whose Node runs
// workload pods mounts like a worker, and then the Active ControlPlaneMachineSet, which makes
// the masters to come, counts as a set. Any other master runs no workload and mounts nothing.
func FromMachineAPI(in MachineAPI, storageNetworkIDs ...string) ([]Set, []Machine) {
	attached := func(obj map[string]any, path []string) bool {
		value, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
		spec, _ := value.(map[string]any)
		for _, id := range storageNetworkIDs {
			if id != "" && attachment.SpecOf(spec).HasNetwork(id) {
				return true
			}
		}
		return false
	}
	var sets []Set
	for _, u := range in.MachineSets {
		sets = append(sets, Set{Name: u.GetName(), Attached: attached(u.Object, machineSetSpecPath)})
	}
	var out []Machine
	mastersRunWorkloads := false
	for _, u := range in.Machines {
		fromSet, fromControlPlane := false, u.GetLabels()[roleLabel] == masterRole
		for _, ref := range u.GetOwnerReferences() {
			fromSet = fromSet || ref.Kind == "MachineSet"
			fromControlPlane = fromControlPlane || ref.Kind == "ControlPlaneMachineSet"
		}
		node, _, _ := unstructured.NestedString(u.Object, "status", "nodeRef", "name")
		switch {
		case fromSet:
		case fromControlPlane && node != "" && in.RunsWorkloads != nil && in.RunsWorkloads(node):
			mastersRunWorkloads = true
		default:
			continue
		}
		m := Machine{Name: u.GetName(), NoNode: node == "", Attached: attached(u.Object, machineSpecPath)}
		addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
		for _, a := range addrs {
			am, _ := a.(map[string]any)
			s, _ := am["address"].(string)
			if ip, err := netip.ParseAddr(s); err == nil {
				m.Addresses = append(m.Addresses, ip)
			}
		}
		out = append(out, m)
	}
	if cp := in.ControlPlane; cp != nil && mastersRunWorkloads {
		if state, _, _ := unstructured.NestedString(cp.Object, "spec", "state"); state == "Active" {
			sets = append(sets, Set{Name: "controlplanemachineset/" + cp.GetName(), Attached: attached(cp.Object, controlPlaneSpecPath)})
		}
	}
	return sets, out
}

// The role labels and taints of a control-plane Node (OpenShift's and Kubernetes' names).
const (
	masterNodeRole       = "node-role.kubernetes.io/master"
	controlPlaneNodeRole = "node-role.kubernetes.io/control-plane"
)

// ControlPlaneNode tells a control-plane Node (by either role label) from a worker.
func ControlPlaneNode(n *corev1.Node) bool {
	_, master := n.Labels[masterNodeRole]
	_, cp := n.Labels[controlPlaneNodeRole]
	return master || cp
}

// RunsWorkloads tells a Node where workload pods run, and so mount shares: a worker, or a
// control-plane Node without its role's NoSchedule or NoExecute taint. A compact cluster's masters
// have none (the installer sets mastersSchedulable), nor have masters whose taint an
// administrator removed; the masters of any other cluster keep it.
func RunsWorkloads(n *corev1.Node) bool {
	if !ControlPlaneNode(n) {
		return true
	}
	for _, t := range n.Spec.Taints {
		if (t.Key == masterNodeRole || t.Key == controlPlaneNodeRole) && (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) {
			return false
		}
	}
	return true
}
