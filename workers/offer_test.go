package workers

import (
	"slices"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
)

// testInventory has one object of each sort the screens tell apart.
func testInventory() *Inventory {
	return &Inventory{
		MachineSets: []machinesets.SetStatus{
			{Name: "w-0", Role: "worker", StorageNetwork: attach.StateMissing, UpToDate: 1, Wanted: 2},
			{Name: "infra-0", Role: "infra", StorageNetwork: attach.StateAttached},
			{Name: "master", Role: "master", StorageNetwork: attach.StateMissing},
			{Name: "bm-0", Role: "worker", StorageNetwork: attach.StateNA},
			{Name: "w-1", Role: "worker", StorageNetwork: attach.StateNA, ClusterAPI: true, Note: "its Cluster API copy: paused"},
		},
		ClusterAPI: []clusterapi.Status{
			{Kind: clusterapi.KindMachineSet, Name: "gpu", Replicas: 1, Template: "gpu-tmpl", StorageNetwork: attach.StateMissing},
			{Kind: clusterapi.KindMachineDeployment, Name: "md", Replicas: 2, Template: "md-tmpl", StorageNetwork: attach.StateAttached},
			{Kind: clusterapi.KindMachineSet, Name: "aws", StorageNetwork: attach.StateNA, Note: "not an OpenStack template"},
		},
		NodePools: []nodepools.Status{
			{Namespace: "clusters", Name: "hc1-workers", HostedCluster: "hc1", Platform: "OpenStack", Replicas: 3, StorageNetwork: attach.StateMissing},
			{Namespace: "clusters", Name: "kv", HostedCluster: "hc2", Platform: "KubeVirt", StorageNetwork: attach.StateNA},
			{Namespace: "clusters", Name: "odd", HostedCluster: "hc3", StorageNetwork: attach.StateNA},
		},
	}
}

func rowOf(t *testing.T, rows []Row, key string) Row {
	t.Helper()
	i := slices.IndexFunc(rows, func(r Row) bool { return r.Key == key })
	if i < 0 {
		t.Fatalf("no row %s", key)
	}
	return rows[i]
}

// TestOfferSections: which sections a cluster offers, in Patch's order, and what one row is
// called.
func TestOfferSections(t *testing.T) {
	full := testInventory()
	for _, c := range []struct {
		name     string
		inv      *Inventory
		served   Kinds
		sections []string
		choose   string
		empty    string // the first section's Empty
		warns    bool
	}{
		{"every kind", full, Kinds{MachineSets: true, ClusterAPI: true, NodePools: true},
			[]string{SectionMachineSets, SectionClusterAPI, SectionNodePools}, "MachineSet or Cluster API set or NodePool", "none in " + machinesets.Namespace, false},
		{"MachineSets alone", &Inventory{MachineSets: full.MachineSets}, Kinds{MachineSets: true},
			[]string{SectionMachineSets}, "MachineSet", "no MachineSets in " + machinesets.Namespace + ": nothing to attach", true},
		{"no MachineSets at all", &Inventory{}, Kinds{MachineSets: true},
			[]string{SectionMachineSets}, "MachineSet", "no MachineSets in " + machinesets.Namespace + ": nothing to attach", true},
		{"NodePools of a cluster without MachineSets", &Inventory{NodePools: full.NodePools}, Kinds{NodePools: true},
			[]string{SectionNodePools}, "NodePool", "no NodePools on this cluster: nothing to attach", true},
		{"a management cluster without NodePools", &Inventory{}, Kinds{NodePools: true},
			[]string{SectionNodePools}, "MachineSet", "no NodePools on this cluster: nothing to attach", true},
		{"Cluster API beside MachineSets", &Inventory{MachineSets: full.MachineSets, ClusterAPI: full.ClusterAPI}, Kinds{MachineSets: true, ClusterAPI: true},
			[]string{SectionMachineSets, SectionClusterAPI}, "MachineSet or Cluster API set", "none in " + machinesets.Namespace, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.inv.Offer(c.served)
			var ids []string
			for _, s := range o.Sections {
				ids = append(ids, s.ID)
			}
			if !slices.Equal(ids, c.sections) {
				t.Errorf("sections %v, want %v", ids, c.sections)
			}
			if o.Choose != c.choose {
				t.Errorf("Choose %q, want %q", o.Choose, c.choose)
			}
			if len(o.Sections) > 0 && (o.Sections[0].Empty != c.empty || o.Sections[0].EmptyWarns != c.warns) {
				t.Errorf("first section's Empty %q (warns %v), want %q (%v)", o.Sections[0].Empty, o.Sections[0].EmptyWarns, c.empty, c.warns)
			}
		})
	}
}

// TestOfferRows: each row's key, who rolls it, whether it is preselected and why it cannot be
// chosen.
func TestOfferRows(t *testing.T) {
	o := testInventory().Offer(Kinds{MachineSets: true, ClusterAPI: true, NodePools: true})
	rows := o.Rows()
	if len(rows) != 11 {
		t.Fatalf("%d rows, want 11", len(rows))
	}
	for _, c := range []struct {
		key, section, kind, what   string
		selectable, preselected    bool
		whyNot                     string
		rolls                      Rolls
		label, mark, joins, firstC string
	}{
		{"w-0", SectionMachineSets, "MachineSet", "MachineSet w-0", true, true, "it is not an OpenStack MachineSet", ByRollout, "w-0", "", "", "worker  "},
		{"infra-0", SectionMachineSets, "MachineSet", "MachineSet infra-0", true, false, "it is not an OpenStack MachineSet", ByRollout, "infra-0", "", "", "infra   "},
		{"master", SectionMachineSets, "MachineSet", "MachineSet master", false, false, "control plane: never touched", ByRollout, "master", "", "", "master  "},
		{"bm-0", SectionMachineSets, "MachineSet", "MachineSet bm-0", false, false, "it is not an OpenStack MachineSet", ByRollout, "bm-0", "", "", "worker  "},
		{"w-1", SectionMachineSets, "MachineSet", "MachineSet w-1", false, false, "its Cluster API copy: paused", ByRollout, "w-1", "via CAPI", "", "worker  "},
		{"machineset/gpu", SectionClusterAPI, clusterapi.KindMachineSet, "Cluster API MachineSet gpu", true, true, "", ByRollout, "gpu", "", "", "MachineSet"},
		{"machinedeployment/md", SectionClusterAPI, clusterapi.KindMachineDeployment, "Cluster API MachineDeployment md", true, true, "", ByItself, "md", "", "", "Deployment"},
		{"machineset/aws", SectionClusterAPI, clusterapi.KindMachineSet, "Cluster API MachineSet aws", false, false, "not an OpenStack template", ByRollout, "aws", "", "", "MachineSet"},
		{"clusters/hc1-workers", SectionNodePools, "NodePool", "NodePool clusters/hc1-workers", true, true, "not OpenStack (OpenStack)", ByItself, "clusters/hc1-workers", "", "hc1", "hc1           "},
		{"clusters/kv", SectionNodePools, "NodePool", "NodePool clusters/kv", false, false, "not OpenStack (KubeVirt)", ByItself, "clusters/kv", "", "hc2", "hc2           "},
		{"clusters/odd", SectionNodePools, "NodePool", "NodePool clusters/odd", false, false, "not OpenStack (none)", ByItself, "clusters/odd", "", "hc3", "hc3           "},
	} {
		r := rowOf(t, rows, c.key)
		got := []any{r.Section, r.Kind, r.What, r.Selectable, r.Preselected, r.WhyNot, r.Rolls, r.Label(), r.Mark, r.Joins, r.Cells[0].Text}
		want := []any{c.section, c.kind, c.what, c.selectable, c.preselected, c.whyNot, c.rolls, c.label, c.mark, c.joins, c.firstC}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %v, want %v", c.key, got, want)
		}
	}
	if st := rowOf(t, rows, "infra-0").Cells[2]; !st.Good || st.Text != "has it      " {
		t.Errorf("an attached set's state cell %+v", st)
	}
	// Follows' rule: a NodePool always, a MachineDeployment only once patched.
	if !rowOf(t, rows, "clusters/hc1-workers").AlwaysFollowed || rowOf(t, rows, "machinedeployment/md").AlwaysFollowed {
		t.Error("AlwaysFollowed: NodePools only")
	}
}

// TestSelect: the rows chosen, as Patch and Roll take them, nothing of a kind not chosen.
func TestSelect(t *testing.T) {
	rows := testInventory().Offer(Kinds{MachineSets: true, ClusterAPI: true, NodePools: true}).Rows()
	pick := func(keys ...string) []Row {
		var out []Row
		for _, k := range keys {
			out = append(out, rowOf(t, rows, k))
		}
		return out
	}
	for _, c := range []struct {
		name       string
		rows       []Row
		sets       []string // nil: no MachineSets selection at all
		capi, pool []string
	}{
		{"nothing", nil, nil, nil, nil},
		{"MachineSets", pick("w-0", "infra-0"), []string{"w-0", "infra-0"}, nil, nil},
		{"Cluster API", pick("machineset/gpu", "machinedeployment/md"), nil, []string{"machineset/gpu", "machinedeployment/md"}, nil},
		{"NodePools", pick("clusters/hc1-workers"), nil, nil, []string{"clusters/hc1-workers"}},
		{"all three", pick("w-0", "machinedeployment/md", "clusters/hc1-workers"), []string{"w-0"}, []string{"machinedeployment/md"}, []string{"clusters/hc1-workers"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			sel := Select(c.rows)
			if (sel.MachineSets == nil) != (c.sets == nil) {
				t.Fatalf("MachineSets selection %+v, want names %v", sel.MachineSets, c.sets)
			}
			if sel.MachineSets != nil && (!slices.Equal(sel.MachineSets.Names, c.sets) || sel.MachineSets.Selector != "") {
				t.Errorf("MachineSets %+v, want names %v", sel.MachineSets, c.sets)
			}
			if !slices.Equal(sel.ClusterAPI, c.capi) || !slices.Equal(sel.NodePools, c.pool) {
				t.Errorf("Cluster API %v NodePools %v, want %v %v", sel.ClusterAPI, sel.NodePools, c.capi, c.pool)
			}
		})
	}
}

func ms(name, action string) attach.Result {
	return attach.Result{Kind: "MachineSet", Namespace: machinesets.Namespace, Name: name, Action: action}
}

// TestSectionOf: a result finds its row's section.
func TestSectionOf(t *testing.T) {
	rows := testInventory().Offer(Kinds{MachineSets: true, ClusterAPI: true, NodePools: true}).Rows()
	for _, r := range rows {
		res := attach.Result{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
		if got := SectionOf(res); got != r.Section || !r.Is(res) {
			t.Errorf("%s: section %s (Is %v), want %s", r.Key, got, r.Is(res), r.Section)
		}
	}
}
