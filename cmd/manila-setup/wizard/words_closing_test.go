package wizard

import (
	"testing"

	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/workers"
)

// The closing words of words_progress.go: the done line and the summary.

// TestDoneLineAndSummary: the closing words for each mix of kinds.
func TestDoneLineAndSummary(t *testing.T) {
	inv := &workers.Inventory{
		MachineSets:  []machinesets.SetStatus{{Name: "w-0", Role: "worker"}, {Name: "infra-0", Role: "infra"}},
		ClusterAPI:   []clusterapi.Status{{Kind: clusterapi.KindMachineSet, Name: "gpu"}, {Kind: clusterapi.KindMachineDeployment, Name: "md"}},
		NodePools:    []nodepools.Status{{Namespace: "clusters", Name: "hc1-workers"}, {Namespace: "clusters", Name: "kv"}, {Namespace: "other", Name: "c"}},
		ControlPlane: &machinesets.ControlPlaneStatus{Name: "cluster", State: "Active", Strategy: "RollingUpdate", Replicas: 3},
	}
	rows := keyedRows(inv.Rows())
	pick := func(keys ...string) []workers.Row { return rows.pick(t, keys...) }
	nets := []string{"net-1"}
	for _, c := range []struct {
		name    string
		rows    []workers.Row
		done    screenLine
		summary string
	}{
		{"MachineSets", pick("w-0", "infra-0"), screenLine{Text: "✓ every chosen MachineSet was patched and its machines replaced", Tone: toneGood, Cut: true},
			"Attached network net-1 to MachineSets w-0, infra-0; their machines were replaced."},
		{"one NodePool", pick("clusters/hc1-workers"), screenLine{Text: "✓ every chosen NodePool has its port on the storage network; HyperShift rolls the change out itself (below)", Tone: toneGood},
			"Attached network net-1 to NodePools clusters/hc1-workers; HyperShift rolls the change out itself: watch `oc get nodepool -n clusters hc1-workers`."},
		{"MachineSets and NodePools of two namespaces", pick("w-0", "clusters/hc1-workers", "other/c"),
			screenLine{Text: "✓ every chosen MachineSet was patched and its machines replaced; every chosen NodePool has its port, HyperShift rolls it out itself (below)", Tone: toneGood},
			"Attached network net-1 to MachineSets w-0 (their machines were replaced) and to NodePools clusters/hc1-workers, other/c; HyperShift rolls the NodePools out itself: watch `oc get nodepools -A`."},
		{"every kind", pick("w-0", "machineset/gpu", "machinedeployment/md", "clusters/hc1-workers", "clusters/kv"),
			screenLine{Text: "✓ every chosen set was patched and the MachineSets' machines replaced; a MachineDeployment's are replaced by Cluster API itself (below)", Tone: toneGood},
			"Attached network net-1 to MachineSets w-0 (their machines were replaced); Cluster API MachineSets gpu (their Machines were replaced); MachineDeployments md (Cluster API replaces their Machines itself: watch `oc get machinedeployments -n openshift-cluster-api`); NodePools clusters/hc1-workers, clusters/kv (HyperShift rolls them out itself: watch `oc get nodepools -n clusters`)."},
		{"a Cluster API MachineSet alone", pick("machineset/gpu"),
			screenLine{Text: "✓ every chosen set was patched and the MachineSets' machines replaced; a MachineDeployment's are replaced by Cluster API itself (below)", Tone: toneGood},
			"Attached network net-1 to Cluster API MachineSets gpu (their Machines were replaced)."},
		{"the control plane alone", pick("controlplanemachineset/cluster"),
			screenLine{Text: "✓ the ControlPlaneMachineSet was patched; the ControlPlaneMachineSet's masters are replaced by its operator, one at a time (below)", Tone: toneGood},
			"Attached network net-1 to ControlPlaneMachineSet cluster; the ControlPlaneMachineSet's masters are replaced by its operator, one at a time: watch `manila-setup controlplane list`."},
		{"the control plane beside a MachineSet", pick("w-0", "controlplanemachineset/cluster"),
			screenLine{Text: "✓ every chosen MachineSet was patched and its machines replaced; the ControlPlaneMachineSet's masters are replaced by its operator, one at a time (below)", Tone: toneGood},
			"Attached network net-1 to MachineSets w-0; their machines were replaced. The network was also attached to ControlPlaneMachineSet cluster: the ControlPlaneMachineSet's masters are replaced by its operator, one at a time (watch `manila-setup controlplane list`)."},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := doneLine(c.rows); got != c.done {
				t.Errorf("doneLine %+v, want %+v", got, c.done)
			}
			if got := summaryOf(nets, c.rows); got != c.summary {
				t.Errorf("summaryOf\n%s\nwant\n%s", got, c.summary)
			}
		})
	}
}
