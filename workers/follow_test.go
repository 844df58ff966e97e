package workers

import (
	"slices"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
)

// TestFollows: what is read again after the patch: a NodePool whenever chosen, a
// MachineDeployment once patched, never what manila-setup rolls.
func TestFollows(t *testing.T) {
	rows := testInventory().Offer(Kinds{MachineSets: true, ClusterAPI: true, NodePools: true}).Rows()
	md, pool, set := rowOf(t, rows, "machinedeployment/md"), rowOf(t, rows, "clusters/hc1-workers"), rowOf(t, rows, "machineset/gpu")
	patched := func(r Row, action string) attach.Result {
		return attach.Result{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Action: action}
	}
	for _, c := range []struct {
		name    string
		row     Row
		results []attach.Result
		want    bool
	}{
		{"NodePool, not patched yet", pool, nil, true},
		{"NodePool unchanged", pool, []attach.Result{patched(pool, attach.ActionUnchanged)}, true},
		{"MachineDeployment not patched", md, nil, false},
		{"MachineDeployment unchanged", md, []attach.Result{patched(md, attach.ActionUnchanged)}, false},
		{"MachineDeployment patched", md, []attach.Result{patched(md, attach.ActionPatched)}, true},
		{"another object patched", md, []attach.Result{patched(set, attach.ActionPatched)}, false},
		{"a Cluster API MachineSet is rolled by manila-setup", set, []attach.Result{patched(set, attach.ActionPatched)}, false},
	} {
		if got := Follows(c.row, c.results); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := Sections([]Row{pool, md, set, pool}); !slices.Equal(got, []string{SectionNodePools, SectionClusterAPI}) {
		t.Errorf("Sections %v", got)
	}
	if Reads(SectionNodePools) != (Kinds{NodePools: true}) || Reads(SectionClusterAPI) != (Kinds{ClusterAPI: true}) || Reads(SectionMachineSets) != (Kinds{MachineSets: true}) {
		t.Error("Reads: each section reads its own kind")
	}
}

// TestUnderBars: only the Machine API MachineSets' results are told under the bars.
func TestUnderBars(t *testing.T) {
	for _, c := range []struct {
		res  attach.Result
		want bool
	}{
		{ms("w-0", attach.ActionPatched), true},
		{attach.Result{Kind: clusterapi.KindMachineSet, Namespace: clusterapi.OpenShiftNamespace, Name: "gpu"}, false},
		{attach.Result{Kind: "NodePool", Namespace: "clusters", Name: "p"}, false},
	} {
		res, want := c.res, c.want
		if got := UnderBars(res); got != want {
			t.Errorf("%s %s: %v, want %v", res.Kind, res.Name, got, want)
		}
	}
}
