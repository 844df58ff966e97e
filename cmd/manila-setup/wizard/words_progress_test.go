package wizard

import (
	"slices"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/workers"
)

// rowsByKey are rows by their Key, for picking the rows a test speaks of.
type rowsByKey map[string]workers.Row

func keyedRows(rows []workers.Row) rowsByKey {
	m := rowsByKey{}
	for _, r := range rows {
		m[r.Key] = r
	}
	return m
}

// pick are the rows of keys, in that order.
func (m rowsByKey) pick(t *testing.T, keys ...string) []workers.Row {
	t.Helper()
	rows := make([]workers.Row, len(keys))
	for i, k := range keys {
		r, ok := m[k]
		if !ok {
			t.Fatalf("no row %s", k)
		}
		rows[i] = r
	}
	return rows
}

// TestProgressLines: what the apply screen says of the rows that roll by themselves, kind by kind.
func TestProgressLines(t *testing.T) {
	inv := &workers.Inventory{
		ClusterAPI: []clusterapi.Status{{Kind: clusterapi.KindMachineDeployment, Name: "md", Replicas: 2, OnTemplate: 1, Template: "md-tmpl-2", StorageNetwork: attach.StateAttached}},
		NodePools: []nodepools.Status{
			{Namespace: "clusters", Name: "a", Replicas: 3, CurrentNodes: 2, UpgradeType: "Replace", StorageNetwork: attach.StateMissing,
				Conditions: []nodepools.Condition{{Type: "UpdatingPlatformMachineTemplate", Status: "True", Message: "in progress"}, {Type: "Ready", Status: "False", Reason: "Waiting"}}},
			{Namespace: "clusters", Name: "b", Replicas: 1, CurrentNodes: 1, StorageNetwork: attach.StateAttached, Conditions: []nodepools.Condition{{Type: "Ready", Status: "True"}}},
		},
		// As read again since its patch: the template has the network, one master made from it.
		ControlPlane: &machinesets.ControlPlaneStatus{Name: "cluster", Strategy: "RollingUpdate", Replicas: 3, StorageNetwork: attach.StateAttached, Masters: 3, OnNetworks: 1},
	}
	picked := keyedRows(inv.Rows()).pick(t, "machinedeployment/md", "clusters/a", "clusters/b", "controlplanemachineset/cluster")
	md, a, b, cp := picked[0], picked[1], picked[2], picked[3]
	// As listed before the patch: nothing to count yet.
	cpBefore := cp
	cpBefore.Status = &machinesets.ControlPlaneStatus{Name: "cluster", Strategy: "RollingUpdate", Replicas: 3, StorageNetwork: attach.StateMissing, Masters: 3, OnNetworks: 3}
	cpPatched := attach.Result{Kind: machinesets.ControlPlaneKind, Namespace: machinesets.Namespace, Name: "cluster", Action: attach.ActionPatched,
		AddedNetworks: []string{"net-1"}, AddedSecurityGroups: []string{"sg-1"}}
	follow := "  the control-plane-machine-set operator replaces the masters one at a time (RollingUpdate); watch: manila-setup controlplane list (or oc get controlplanemachineset -n openshift-machine-api cluster)"
	mdPatched := attach.Result{Kind: md.Kind, Namespace: md.Namespace, Name: "md", Action: attach.ActionPatched, Template: "md-tmpl-2", OldTemplate: "md-tmpl"}
	aPatched := attach.Result{Kind: "NodePool", Namespace: "clusters", Name: "a", Action: attach.ActionPatched, AddedNetworks: []string{"net-1"}}
	bUnchanged := attach.Result{Kind: "NodePool", Namespace: "clusters", Name: "b", Action: attach.ActionUnchanged, Reason: "already attached"}
	pools := []workers.Row{a, b}
	for _, c := range []struct {
		name string
		f    followedSection
		want []screenLine
	}{
		{"MachineDeployment patched, read since", followedSection{Section: workers.SectionClusterAPI, Rows: []workers.Row{md}, Results: []attach.Result{mdPatched}}, []screenLine{
			{Text: "MachineDeployment md: patched, makes its Machines from OpenStackMachineTemplate md-tmpl-2 (was md-tmpl)"},
			{Text: "  Cluster API replaces its Machines itself (its rolling update); watch: oc get machinedeployment -n openshift-cluster-api md", Tone: toneDim},
			{Text: "  now: 1 of 2 Machines made from md-tmpl-2"},
		}},
		{"MachineDeployment waiting, its read failed", followedSection{Section: workers.SectionClusterAPI, Rows: []workers.Row{md}, Err: "forbidden"}, []screenLine{
			{Text: "the MachineDeployments' progress could not be read: forbidden", Tone: toneWarn},
			{Text: "MachineDeployment md: waiting for the patch", Cut: true},
		}},
		{"MachineDeployment, dry run", followedSection{Section: workers.SectionClusterAPI, Rows: []workers.Row{md}, Dry: true}, []screenLine{
			{Text: "MachineDeployment md: dry run, would get a new template with the port (if it lacks one)"},
		}},
		{"NodePools", followedSection{Section: workers.SectionNodePools, Rows: pools, Results: []attach.Result{aPatched, bUnchanged}}, []screenLine{
			{Text: "NodePool clusters/a: patched, adds a port on network net-1"},
			{Text: "  HyperShift replaces its machines (upgradeType Replace)", Tone: toneDim},
			{Text: "  now: 2 of 3 nodes · UpdatingPlatformMachineTemplate: in progress", Tone: toneDim},
			{Text: "  watch: oc get nodepool -n clusters a", Tone: toneDim, Cut: true},
			{Text: "NodePool clusters/b: unchanged, already attached"},
			{Text: "  now: 1 of 1 nodes · Ready", Tone: toneDim},
			{Text: "  watch: oc get nodepool -n clusters b", Tone: toneDim, Cut: true},
		}},
		{"NodePools, compact, a read failed", followedSection{Section: workers.SectionNodePools, Rows: pools, Results: []attach.Result{aPatched, bUnchanged}, Compact: true, Err: "timeout"}, []screenLine{
			{Text: "NodePool clusters/a: patched · 2 of 3 nodes · UpdatingPlatformMachineTemplate: in progress", Cut: true},
			{Text: "NodePool clusters/b: unchanged · 1 of 1 nodes · Ready", Cut: true},
			{Text: "  HyperShift rolls them out itself; watch: oc get nodepools -n clusters", Tone: toneDim, Cut: true},
			{Text: "  reading the NodePools' progress failed: timeout", Tone: toneWarn},
		}},
		{"NodePools, compact, before the patch", followedSection{Section: workers.SectionNodePools, Rows: pools, Compact: true}, []screenLine{
			{Text: "NodePool clusters/a: waiting for the patch", Cut: true},
			{Text: "NodePool clusters/b: waiting for the patch", Cut: true},
		}},
		{"the control plane patched, read since", followedSection{Section: workers.SectionControlPlane, Rows: []workers.Row{cp}, Results: []attach.Result{cpPatched}}, []screenLine{
			{Text: "ControlPlaneMachineSet cluster: patched, adds network net-1, security group sg-1"},
			{Text: follow, Tone: toneDim},
			{Text: "  now: 1 of 3 masters on the template"},
		}},
		{"the control plane patched, not read since", followedSection{Section: workers.SectionControlPlane, Rows: []workers.Row{cpBefore}, Results: []attach.Result{cpPatched}, Err: "forbidden"}, []screenLine{
			{Text: "the control plane's progress could not be read: forbidden", Tone: toneWarn},
			{Text: "ControlPlaneMachineSet cluster: patched, adds network net-1, security group sg-1"},
			{Text: follow, Tone: toneDim},
		}},
		{"the control plane, compact", followedSection{Section: workers.SectionControlPlane, Rows: []workers.Row{cp}, Results: []attach.Result{cpPatched}, Compact: true}, []screenLine{
			{Text: "ControlPlaneMachineSet cluster: patched · now: 1 of 3 masters on the template", Cut: true},
		}},
		{"the control plane, waiting", followedSection{Section: workers.SectionControlPlane, Rows: []workers.Row{cpBefore}}, []screenLine{
			{Text: "ControlPlaneMachineSet cluster: waiting for the patch", Cut: true},
		}},
		{"the control plane, dry run", followedSection{Section: workers.SectionControlPlane, Rows: []workers.Row{cpBefore}, Dry: true}, []screenLine{
			{Text: "ControlPlaneMachineSet cluster: dry run, its template would get the network (if it lacks it), and its operator would replace the masters one at a time"},
		}},
		{"a kind that rolls through manila-setup says nothing here", followedSection{Section: workers.SectionMachineSets}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := progressLines(c.f); !slices.Equal(got, c.want) {
				t.Errorf("got\n%v\nwant\n%v", got, c.want)
			}
		})
	}
}
