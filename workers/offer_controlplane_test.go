package workers

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/machinesets"
)

// atRest is the ControlPlaneMachineSet of a compact cluster as ControlPlaneList reports it
// when nothing stands in the way of a change: Active, RollingUpdate, three masters at rest.
func atRest() *machinesets.ControlPlaneStatus {
	return &machinesets.ControlPlaneStatus{Name: "cluster", State: "Active", Strategy: "RollingUpdate", Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3,
		StorageNetwork: attach.StateMissing, SecurityGroups: attach.StateMissing, Masters: 3, OnNetworks: 3}
}

// controlPlaneRow is the one row of the control-plane section of an inventory with cp beside
// a worker MachineSet.
func controlPlaneRow(t *testing.T, cp *machinesets.ControlPlaneStatus) Row {
	t.Helper()
	inv := &Inventory{MachineSets: testInventory().MachineSets[:1], ControlPlane: cp}
	o := inv.Offer(Kinds{MachineSets: true, ControlPlane: true})
	last := o.Sections[len(o.Sections)-1]
	if last.ID != SectionControlPlane || len(last.Rows) != 1 {
		t.Fatalf("last section %s with %d rows, want %s with one", last.ID, len(last.Rows), SectionControlPlane)
	}
	return last.Rows[0]
}

// TestControlPlaneRow: the set is never preselected, says what choosing it costs, and can be
// chosen only when Active, RollingUpdate and at rest; otherwise it says why not.
func TestControlPlaneRow(t *testing.T) {
	with := func(change func(*machinesets.ControlPlaneStatus)) *machinesets.ControlPlaneStatus {
		cp := atRest()
		change(cp)
		return cp
	}
	busy := "its masters are not at rest (replicas 3 of 3, updated 2, ready 3, unavailable 0): an update is under way or a master is missing"
	inactive := "its state is Inactive: the control-plane-machine-set operator rebuilds the template of an inactive set from the newest master, which would undo the change"
	recreate := "spec.strategy.type is Recreate, which the control-plane-machine-set operator declares but does not implement"
	etcd := "ClusterOperator etcd is Degraded (EtcdMembersDegraded: 2 of 3 members are available)"
	for _, c := range []struct {
		name       string
		cp         *machinesets.ControlPlaneStatus
		selectable bool
		whyNot     string // a part of it
	}{
		{"Active, RollingUpdate, at rest", atRest(), true, ""},
		{"Inactive", with(func(cp *machinesets.ControlPlaneStatus) { cp.State, cp.Note = "Inactive", inactive }), false, inactive},
		{"Recreate", with(func(cp *machinesets.ControlPlaneStatus) { cp.Strategy, cp.Note = "Recreate", recreate }), false, recreate},
		{"OnDelete", with(func(cp *machinesets.ControlPlaneStatus) { cp.Strategy = "OnDelete" }), false, "replaced only when their Machines are deleted; run `manila-setup controlplane patch --rollout`"},
		{"masters not at rest", with(func(cp *machinesets.ControlPlaneStatus) { cp.UpdatedReplicas, cp.Note = 2, busy }), false, busy},
		{"a ClusterOperator not at rest", with(func(cp *machinesets.ControlPlaneStatus) { cp.Note = etcd }), false, etcd},
		{"not an OpenStack template", with(func(cp *machinesets.ControlPlaneStatus) {
			cp.StorageNetwork, cp.SecurityGroups, cp.Note = attach.StateNA, attach.StateNA, "not an OpenstackProviderSpec"
		}), false, "not an OpenstackProviderSpec"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := controlPlaneRow(t, c.cp)
			if r.Preselected {
				t.Error("preselected: the masters are never replaced unless chosen")
			}
			if r.Selectable != c.selectable {
				t.Errorf("selectable %v, want %v (why not: %q)", r.Selectable, c.selectable, r.WhyNot)
			}
			if !c.selectable && (c.whyNot == "" || !strings.Contains(r.WhyNot, c.whyNot)) {
				t.Errorf("why not %q, want it to say %q", r.WhyNot, c.whyNot)
			}
			got := []any{r.Kind, r.Namespace, r.Name, r.Key, r.What, r.Rolls, r.AlwaysFollowed, r.Label()}
			want := []any{machinesets.ControlPlaneKind, machinesets.Namespace, "cluster", "controlplanemachineset/cluster", "ControlPlaneMachineSet cluster", ByItself, false, "cluster"}
			if !slices.Equal(got, want) {
				t.Errorf("row %v, want %v", got, want)
			}
			if st, ok := r.Status.(*machinesets.ControlPlaneStatus); !ok || st.Name != "cluster" || st == c.cp {
				t.Errorf("Status %#v: want a copy of the listed *ControlPlaneStatus", r.Status)
			}
		})
	}
}

// TestControlPlaneRowCells: the cost in plain words, from the set's replicas; a template that
// has the network and groups says so as the other kinds do, and that nothing changes.
func TestControlPlaneRowCells(t *testing.T) {
	five := atRest()
	five.Replicas, five.Masters, five.OnNetworks = 5, 5, 5
	r := controlPlaneRow(t, five)
	if r.Cells[0].Text != "missing     " || r.Cells[0].Good || r.Cells[1].Text != "replaces the 5 masters, one at a time" {
		t.Errorf("cells %+v", r.Cells)
	}
	has := atRest()
	has.StorageNetwork, has.SecurityGroups, has.OnNetworks = attach.StateAttached, attach.StateAttached, 2
	r = controlPlaneRow(t, has)
	if !r.Cells[0].Good || r.Cells[0].Text != "has it      " || r.Cells[1].Text != "nothing to change: 2 of 3 masters on the template" {
		t.Errorf("attached: cells %+v", r.Cells)
	}
	groups := atRest()
	groups.StorageNetwork = attach.StateAttached
	if r = controlPlaneRow(t, groups); r.Cells[1].Text != "replaces the 3 masters, one at a time" {
		t.Errorf("a template that lacks a group: cost %q", r.Cells[1].Text)
	}
}

// TestControlPlaneSection: last, beside every other kind; named in "choose at least one …"; a
// cluster without the set has no section, keeps its MachineSets' warning when it has none, and
// gets no note.
func TestControlPlaneSection(t *testing.T) {
	full := testInventory()
	full.ControlPlane = atRest()
	o := full.Offer(Kinds{MachineSets: true, ClusterAPI: true, NodePools: true, ControlPlane: true})
	var ids []string
	for _, s := range o.Sections {
		ids = append(ids, s.ID)
	}
	if want := []string{SectionMachineSets, SectionClusterAPI, SectionNodePools, SectionControlPlane}; !slices.Equal(ids, want) {
		t.Errorf("sections %v, want %v", ids, want)
	}
	if want := "MachineSet or Cluster API set or NodePool or ControlPlaneMachineSet"; o.Choose != want {
		t.Errorf("Choose %q, want %q", o.Choose, want)
	}
	if rows := full.Rows(); !slices.ContainsFunc(rows, func(r Row) bool { return r.Section == SectionControlPlane }) {
		t.Error("Rows (what the progress reads) leave out the control plane")
	}

	// A compact cluster: no worker MachineSets, the masters are what there is.
	compact := (&Inventory{ControlPlane: atRest()}).Offer(Kinds{MachineSets: true, ControlPlane: true})
	if len(compact.Sections) != 2 || compact.Sections[0].EmptyWarns || compact.Choose != "MachineSet or ControlPlaneMachineSet" {
		t.Errorf("compact cluster: %d sections, MachineSets warn %v, Choose %q", len(compact.Sections), compact.Sections[0].EmptyWarns, compact.Choose)
	}

	inv, err := Assemble(Kinds{MachineSets: true, ControlPlane: true}, Listed{MachineSets: full.MachineSets})
	if err != nil {
		t.Fatal(err)
	}
	none := inv.Offer(Kinds{MachineSets: true, ControlPlane: true})
	if len(none.Sections) != 1 || none.Sections[0].ID != SectionMachineSets || len(none.Notes) != 0 || none.Choose != "MachineSet" {
		t.Errorf("no ControlPlaneMachineSet: sections %+v, notes %v, Choose %q", none.Sections, none.Notes, none.Choose)
	}
	empty := (&Inventory{}).Offer(Kinds{MachineSets: true, ControlPlane: true})
	if !empty.Sections[0].EmptyWarns {
		t.Error("no MachineSets and no ControlPlaneMachineSet: nothing to attach is no longer a warning")
	}
}

// TestAssembleControlPlane: the set is carried into the inventory; when it cannot be read the
// rest is offered with a note naming why, and alone it is an error.
func TestAssembleControlPlane(t *testing.T) {
	inv, err := Assemble(Kinds{MachineSets: true, ControlPlane: true}, Listed{ControlPlane: atRest()})
	if err != nil || inv.ControlPlane == nil || inv.ControlPlane.Name != "cluster" {
		t.Fatalf("Assemble: %+v, %v", inv, err)
	}
	refused := errors.New("reading ControlPlaneMachineSet openshift-machine-api/cluster was refused: forbidden")
	inv, err = Assemble(Kinds{MachineSets: true, ControlPlane: true}, Listed{ControlPlane: atRest(), ControlPlaneErr: refused})
	if err != nil || inv.ControlPlane != nil || len(inv.Notes) != 1 || !strings.Contains(inv.Notes[0], "control plane is not offered: "+refused.Error()) {
		t.Errorf("refused beside MachineSets: %+v, %v", inv, err)
	}
	if _, err := Assemble(Kinds{ControlPlane: true}, Listed{ControlPlaneErr: refused}); !errors.Is(err, refused) {
		t.Errorf("refused alone (a read of the section's progress): %v, want %v", err, refused)
	}
}

// TestSelectControlPlane: choosing the row selects the set and nothing else; its result finds
// its section and row, and its progress is read again once patched.
func TestSelectControlPlane(t *testing.T) {
	r := controlPlaneRow(t, atRest())
	sel := Select([]Row{r})
	if !sel.ControlPlane || sel.MachineSets != nil || sel.ClusterAPI != nil || sel.NodePools != nil {
		t.Errorf("Select %+v, want the control plane alone", sel)
	}
	if Select([]Row{rowOf(t, testInventory().Offer(Kinds{MachineSets: true}).Rows(), "w-0")}).ControlPlane {
		t.Error("a MachineSet selects the control plane")
	}
	res := attach.Result{Kind: machinesets.ControlPlaneKind, Namespace: machinesets.Namespace, Name: "cluster", Action: attach.ActionPatched}
	if SectionOf(res) != SectionControlPlane || !r.Is(res) || UnderBars(res) {
		t.Errorf("result: section %s, Is %v, under the bars %v", SectionOf(res), r.Is(res), UnderBars(res))
	}
	if !Follows(r, []attach.Result{res}) {
		t.Error("a patched set is not followed")
	}
	res.Action = attach.ActionUnchanged
	if Follows(r, []attach.Result{res}) {
		t.Error("an unchanged set is followed")
	}
	if Reads(SectionControlPlane) != (Kinds{ControlPlane: true}) {
		t.Errorf("Reads %+v", Reads(SectionControlPlane))
	}
	if k := (Served{MachineAPI: true}).Kinds(); !k.ControlPlane {
		t.Error("a cluster serving the Machine API does not read its ControlPlaneMachineSet")
	}
	if k := (Served{HyperShift: true}).Kinds(); k.ControlPlane {
		t.Error("a cluster without the Machine API reads a ControlPlaneMachineSet")
	}
}
