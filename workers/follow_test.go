package workers

import (
	"slices"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/nodepools"
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

// TestProgress: what the apply screen says of the rows that roll by themselves, kind by kind.
func TestProgress(t *testing.T) {
	inv := &Inventory{
		ClusterAPI: []clusterapi.Status{{Kind: clusterapi.KindMachineDeployment, Name: "md", Replicas: 2, OnTemplate: 1, Template: "md-tmpl-2", StorageNetwork: attach.StateAttached}},
		NodePools: []nodepools.Status{
			{Namespace: "clusters", Name: "a", Replicas: 3, CurrentNodes: 2, UpgradeType: "Replace", StorageNetwork: attach.StateMissing,
				Conditions: []nodepools.Condition{{Type: "UpdatingPlatformMachineTemplate", Status: "True", Message: "in progress"}, {Type: "Ready", Status: "False", Reason: "Waiting"}}},
			{Namespace: "clusters", Name: "b", Replicas: 1, CurrentNodes: 1, StorageNetwork: attach.StateAttached, Conditions: []nodepools.Condition{{Type: "Ready", Status: "True"}}},
		},
	}
	rows := inv.Rows()
	md := rowOf(t, rows, "machinedeployment/md")
	a, b := rowOf(t, rows, "clusters/a"), rowOf(t, rows, "clusters/b")
	mdPatched := attach.Result{Kind: md.Kind, Namespace: md.Namespace, Name: "md", Action: attach.ActionPatched, Template: "md-tmpl-2", OldTemplate: "md-tmpl"}
	aPatched := attach.Result{Kind: "NodePool", Namespace: "clusters", Name: "a", Action: attach.ActionPatched, AddedNetworks: []string{"net-1"}}
	bUnchanged := attach.Result{Kind: "NodePool", Namespace: "clusters", Name: "b", Action: attach.ActionUnchanged, Reason: "already attached"}
	pools := []Row{a, b}
	for _, c := range []struct {
		name string
		f    Follow
		want []Line
	}{
		{"MachineDeployment patched, read since", Follow{Section: SectionClusterAPI, Rows: []Row{md}, Results: []attach.Result{mdPatched}}, []Line{
			{Text: "MachineDeployment md: patched, makes its Machines from OpenStackMachineTemplate md-tmpl-2 (was md-tmpl)"},
			{Text: "  Cluster API replaces its Machines itself (its rolling update); watch: oc get machinedeployment -n openshift-cluster-api md", Tone: Dim},
			{Text: "  now: 1 of 2 Machines made from md-tmpl-2"},
		}},
		{"MachineDeployment waiting, its read failed", Follow{Section: SectionClusterAPI, Rows: []Row{md}, Err: "forbidden"}, []Line{
			{Text: "the MachineDeployments' progress could not be read: forbidden", Tone: Warn},
			{Text: "MachineDeployment md: waiting for the patch", Cut: true},
		}},
		{"MachineDeployment, dry run", Follow{Section: SectionClusterAPI, Rows: []Row{md}, Dry: true}, []Line{
			{Text: "MachineDeployment md: dry run, would get a new template with the port (if it lacks one)"},
		}},
		{"NodePools", Follow{Section: SectionNodePools, Rows: pools, Results: []attach.Result{aPatched, bUnchanged}}, []Line{
			{Text: "NodePool clusters/a: patched, adds a port on network net-1"},
			{Text: "  HyperShift replaces its machines (upgradeType Replace)", Tone: Dim},
			{Text: "  now: 2 of 3 nodes · UpdatingPlatformMachineTemplate: in progress", Tone: Dim},
			{Text: "  watch: oc get nodepool -n clusters a", Tone: Dim, Cut: true},
			{Text: "NodePool clusters/b: unchanged, already attached"},
			{Text: "  now: 1 of 1 nodes · Ready", Tone: Dim},
			{Text: "  watch: oc get nodepool -n clusters b", Tone: Dim, Cut: true},
		}},
		{"NodePools, compact, a read failed", Follow{Section: SectionNodePools, Rows: pools, Results: []attach.Result{aPatched, bUnchanged}, Compact: true, Err: "timeout"}, []Line{
			{Text: "NodePool clusters/a: patched · 2 of 3 nodes · UpdatingPlatformMachineTemplate: in progress", Cut: true},
			{Text: "NodePool clusters/b: unchanged · 1 of 1 nodes · Ready", Cut: true},
			{Text: "  HyperShift rolls them out itself; watch: oc get nodepools -n clusters", Tone: Dim, Cut: true},
			{Text: "  reading the NodePools' progress failed: timeout", Tone: Warn},
		}},
		{"NodePools, compact, before the patch", Follow{Section: SectionNodePools, Rows: pools, Compact: true}, []Line{
			{Text: "NodePool clusters/a: waiting for the patch", Cut: true},
			{Text: "NodePool clusters/b: waiting for the patch", Cut: true},
		}},
		{"a kind that rolls through manila-setup says nothing here", Follow{Section: SectionMachineSets}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Progress(c.f); !slices.Equal(got, c.want) {
				t.Errorf("got\n%v\nwant\n%v", got, c.want)
			}
		})
	}
}

// TestDoneAndSummary: the closing words for each mix of kinds.
func TestDoneAndSummary(t *testing.T) {
	inv := testInventory()
	inv.NodePools = append(inv.NodePools, nodepools.Status{Namespace: "other", Name: "c", StorageNetwork: attach.StateMissing})
	rows := inv.Offer(Kinds{MachineSets: true, ClusterAPI: true, NodePools: true}).Rows()
	pick := func(keys ...string) []Row {
		var out []Row
		for _, k := range keys {
			out = append(out, rowOf(t, rows, k))
		}
		return out
	}
	nets := []string{"net-1"}
	for _, c := range []struct {
		name    string
		rows    []Row
		done    Line
		summary string
	}{
		{"MachineSets", pick("w-0", "infra-0"), Line{Text: "✓ every chosen MachineSet was patched and its machines replaced", Tone: Good, Cut: true},
			"Attached network net-1 to MachineSets w-0, infra-0; their machines were replaced."},
		{"one NodePool", pick("clusters/hc1-workers"), Line{Text: "✓ every chosen NodePool has its port on the storage network; HyperShift rolls the change out itself (below)", Tone: Good},
			"Attached network net-1 to NodePools clusters/hc1-workers; HyperShift rolls the change out itself: watch `oc get nodepool -n clusters hc1-workers`."},
		{"MachineSets and NodePools of two namespaces", pick("w-0", "clusters/hc1-workers", "other/c"),
			Line{Text: "✓ every chosen MachineSet was patched and its machines replaced; every chosen NodePool has its port, HyperShift rolls it out itself (below)", Tone: Good},
			"Attached network net-1 to MachineSets w-0 (their machines were replaced) and to NodePools clusters/hc1-workers, other/c; HyperShift rolls the NodePools out itself: watch `oc get nodepools -A`."},
		{"every kind", pick("w-0", "machineset/gpu", "machinedeployment/md", "clusters/hc1-workers", "clusters/kv"),
			Line{Text: "✓ every chosen set was patched and the MachineSets' machines replaced; a MachineDeployment's are replaced by Cluster API itself (below)", Tone: Good},
			"Attached network net-1 to MachineSets w-0 (their machines were replaced); Cluster API MachineSets gpu (their Machines were replaced); MachineDeployments md (Cluster API replaces their Machines itself: watch `oc get machinedeployments -n openshift-cluster-api`); NodePools clusters/hc1-workers, clusters/kv (HyperShift rolls them out itself: watch `oc get nodepools -n clusters`)."},
		{"a Cluster API MachineSet alone", pick("machineset/gpu"),
			Line{Text: "✓ every chosen set was patched and the MachineSets' machines replaced; a MachineDeployment's are replaced by Cluster API itself (below)", Tone: Good},
			"Attached network net-1 to Cluster API MachineSets gpu (their Machines were replaced)."},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Done(c.rows); got != c.done {
				t.Errorf("Done %+v, want %+v", got, c.done)
			}
			if got := Summary(nets, c.rows); got != c.summary {
				t.Errorf("Summary\n%s\nwant\n%s", got, c.summary)
			}
		})
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
