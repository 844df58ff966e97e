package wizard

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/workers"
)

// The ControlPlaneMachineSet as the wizard offers, reviews, patches and follows it.

// TestSetsOfferTheControlPlaneUnchosen: the set is listed last, never preselected, with its
// cost; space chooses it; the title and help name the control plane. A cluster without one
// keeps its screen as it was.
func TestSetsOfferTheControlPlaneUnchosen(t *testing.T) {
	d := toSets(t, newControlPlaneBackend(), false, 120, 40)
	if got := chosenKeys(d.m.screens.sets, workers.SectionControlPlane); got != nil {
		t.Fatalf("the control plane is preselected: %v", got)
	}
	mustContain(t, view(d), "4/7 MachineSets, control plane", "2 of 3 MachineSets and 0 of 1 ControlPlaneMachineSet selected",
		"Control plane the masters, through the ControlPlaneMachineSet of openshift-machine-api",
		"[ ] cluster               missing      replaces the 3 masters, one at a time", "Control plane: never preselected")
	d.press("down", "down", "down", "space")
	if got := chosenKeys(d.m.screens.sets, workers.SectionControlPlane); !slices.Equal(got, []string{"controlplanemachineset/cluster"}) {
		t.Fatalf("space on the set: chosen %v", got)
	}
	if sel := workers.Select(d.m.screens.sets.chosen()); !sel.ControlPlane || sel.MachineSets == nil {
		t.Errorf("selection %+v: want the MachineSets and the control plane", sel)
	}
	d.press("d")
	mustContain(t, strings.Join(strings.Fields(view(d)), " "), "ControlPlaneMachineSet cluster cannot be detached here: the wizard detaches MachineSets; use `manila-setup controlplane patch --remove`")
	d.press("?")
	mustContain(t, strings.Join(strings.Fields(view(d)), " "), "The control plane (the ControlPlaneMachineSet, for masters that run workloads) is never preselected")

	plain := toSets(t, newFakeBackend(), false, 120, 40)
	if v := view(plain); strings.Contains(v, "ontrol plane the masters") || strings.Contains(v, "ControlPlaneMachineSet") || !strings.Contains(v, "4/7 MachineSets\n") {
		t.Errorf("a cluster without a ControlPlaneMachineSet:\n%s", v)
	}
}

// TestSetsRefuseABusyControlPlane: a set that is not at rest cannot be chosen, and says why
// in ControlPlaneList's words.
func TestSetsRefuseABusyControlPlane(t *testing.T) {
	b := newControlPlaneBackend()
	b.controlPlane.Note = "ClusterOperator etcd is Degraded (EtcdMembersDegraded: 2 of 3 members are available)"
	d := toSets(t, b, false, 120, 40)
	d.press("down", "down", "down", "space")
	if got := chosenKeys(d.m.screens.sets, workers.SectionControlPlane); got != nil {
		t.Fatalf("a busy control plane was chosen: %v", got)
	}
	mustContain(t, view(d), " -  cluster               missing      ClusterOperator etcd is Degraded",
		"ControlPlaneMachineSet cluster cannot be chosen: ClusterOperator etcd is Degraded")
}

// TestControlPlaneReviewAndApply: the review shows the set's cost, its diff and commands; enter
// patches it (after the MachineSets), the apply screen follows its operator, and the closing
// words name it.
func TestControlPlaneReviewAndApply(t *testing.T) {
	b := newControlPlaneBackend()
	d := toSets(t, b, false, 120, 40)
	d.press("down", "down", "down", "space", "enter")
	mustContain(t, view(d), "ControlPlaneMachineSet cluster: adds network "+fakeStorageNet+", security group",
		"replaces the 3 masters one at a time (its operator, RollingUpdate)", "--- ControlPlaneMachineSet cluster spec.template.machines_v1beta1_machine_openshift_io")
	cmds := strings.Join(d.m.screens.review.commands, "\n")
	for _, want := range []string{"controlplane patch --network " + fakeStorageNet + " --security-group " + fakeNFSGroup, "manila-setup controlplane rollout"} {
		if !strings.Contains(cmds, want) {
			t.Errorf("commands lack %q:\n%s", want, cmds)
		}
	}
	if !slices.Equal(b.cpPatched, []string{"dry"}) {
		t.Fatalf("the review patched the set: %v", b.cpPatched)
	}
	d.press("enter")
	d.settle(time.Second)
	if !slices.Equal(b.cpPatched, []string{"dry", "patched"}) {
		t.Fatalf("the set was not patched once: %v", b.cpPatched)
	}
	v := strings.Join(strings.Fields(view(d)), " ")
	mustContain(t, v, "the ControlPlaneMachineSet's masters are replaced by its operator, one at a time (below)",
		"ControlPlaneMachineSet cluster: patched, adds network", "the control-plane-machine-set operator replaces the masters one at a time (RollingUpdate)",
		"watch: manila-setup controlplane list", "now: 1 of 3 masters on the template")
	o := d.m.Outcome()
	if !o.Applied || o.Err != nil || !strings.Contains(o.Summary, "The network was also attached to ControlPlaneMachineSet cluster: the ControlPlaneMachineSet's masters are replaced by its operator, one at a time") {
		t.Errorf("outcome %+v", o)
	}
}

// TestControlPlaneWords: the review line, progress lines, commands and closing words of the
// set, on their own.
func TestControlPlaneWords(t *testing.T) {
	st := &machinesets.ControlPlaneStatus{Name: "cluster", State: "Active", Strategy: "RollingUpdate", Replicas: 3,
		StorageNetwork: attach.StateMissing, SecurityGroups: attach.StateMissing, Masters: 3, OnNetworks: 3}
	inv := &workers.Inventory{MachineSets: []machinesets.SetStatus{{Name: "w-0", Role: "worker"}}, ControlPlane: st}
	rows := keyedRows(inv.Rows())
	cp, w0 := rows.pick(t, "controlplanemachineset/cluster")[0], rows.pick(t, "w-0")[0]
	res := attach.Result{Kind: machinesets.ControlPlaneKind, Namespace: machinesets.Namespace, Name: "cluster", Action: attach.ActionWouldPatch,
		AddedNetworks: []string{"net-1"}, AddedSecurityGroups: []string{"sg-1"},
		Warning: "network net-1 has port security disabled, but ... add portSecurity: false there; strategy RollingUpdate: the control-plane-machine-set operator now replaces the 3 masters one at a time"}
	unchanged := res
	unchanged.Action, unchanged.Reason, unchanged.Warning = attach.ActionUnchanged, "already attached", ""

	if got, want := reviewLines([]attach.Result{res, machineSetResult("w-0", attach.ActionUnchanged)}, []workers.Row{w0, cp}), []screenLine{
		{Text: "MachineSet w-0: unchanged, ", Tone: toneDim},
		{Text: "Every chosen MachineSet already has the network and groups: enter replaces the machines that still lack them.", Tone: toneGood, Cut: true},
		{Text: "ControlPlaneMachineSet cluster: adds network net-1, security group sg-1; replaces the 3 masters one at a time (its operator, RollingUpdate)"},
		{Text: "! network net-1 has port security disabled, but ... add portSecurity: false there", Tone: toneWarn},
	}; !slices.Equal(got, want) {
		t.Errorf("review lines\n%v\nwant\n%v", got, want)
	}
	if got := reviewLines([]attach.Result{unchanged}, nil); !slices.Equal(got, []screenLine{
		{Text: "ControlPlaneMachineSet cluster: unchanged, already attached; this patch replaces no master", Tone: toneDim},
	}) {
		t.Errorf("review of an attached set: %v", got)
	}

	a := attach.Attachment{Networks: []string{"net-1"}, SecurityGroups: []string{"sg-1"}}
	if got, want := equivalentCommands("ms", "c", workers.Selection{ControlPlane: true}, a, true), []string{
		"ms --os-cloud c controlplane patch --network net-1 --security-group sg-1 --force", "ms controlplane rollout",
	}; !slices.Equal(got, want) {
		t.Errorf("commands %q, want %q", got, want)
	}
	if got := rolloutCommands("ms", workers.Selection{ControlPlane: true}); got != nil {
		t.Errorf("manila-setup's own rollout resumes the control plane: %v", got)
	}

	if got := offeredTitle(workers.Kinds{MachineSets: true, ControlPlane: true}); got != "MachineSets, control plane" {
		t.Errorf("title %q", got)
	}
	for step, want := range map[stepID]string{stepSets: " The control plane (the ControlPlaneMachineSet", stepReview: " The ControlPlaneMachineSet's line says what its change costs", stepApply: " The ControlPlaneMachineSet is patched only"} {
		if got := kindsHelp(workers.Kinds{MachineSets: true, ControlPlane: true}, step); !strings.HasPrefix(got, want) {
			t.Errorf("help of screen %d: %q, want it to start with %q", step, got, want)
		}
	}
	if got := legend(workers.Section{ID: workers.SectionControlPlane, Rows: []workers.Row{cp}}); len(got) != 1 || !strings.HasPrefix(got[0], "Control plane: never preselected") {
		t.Errorf("legend %q", got)
	}
}
