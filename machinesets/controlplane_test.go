package machinesets

import (
	"errors"
	"strings"
	"testing"

	machinev1 "github.com/openshift/api/machine/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestControlPlaneSafety(t *testing.T) {
	atRest := func(mutate func(*machinev1.ControlPlaneMachineSet)) *machinev1.ControlPlaneMachineSet {
		three := int32(3)
		c := &machinev1.ControlPlaneMachineSet{
			ObjectMeta: metav1.ObjectMeta{Name: ControlPlaneName, Generation: 4},
			Spec: machinev1.ControlPlaneMachineSetSpec{State: machinev1.ControlPlaneMachineSetStateActive, Replicas: &three,
				Template: machinev1.ControlPlaneMachineSetTemplate{MachineType: machinev1.OpenShiftMachineV1Beta1MachineType,
					OpenShiftMachineV1Beta1Machine: &machinev1.OpenShiftMachineV1Beta1MachineTemplate{}}},
			Status: machinev1.ControlPlaneMachineSetStatus{ObservedGeneration: 4, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3},
		}
		if mutate != nil {
			mutate(c)
		}
		return c
	}
	for _, tc := range []struct {
		name      string
		cpms      *machinev1.ControlPlaneMachineSet
		force     bool
		want      string // "" when allowed
		forceable bool
	}{
		{name: "active, at rest, RollingUpdate by default", cpms: atRest(nil)},
		{name: "OnDelete", cpms: atRest(func(c *machinev1.ControlPlaneMachineSet) { c.Spec.Strategy.Type = machinev1.OnDelete })},
		{name: "inactive", cpms: atRest(func(c *machinev1.ControlPlaneMachineSet) {
			c.Spec.State = machinev1.ControlPlaneMachineSetStateInactive
		}),
			want: "its state is Inactive: the control-plane-machine-set operator rebuilds the template"},
		{name: "inactive, forced: still refused", force: true, cpms: atRest(func(c *machinev1.ControlPlaneMachineSet) { c.Spec.State = "" }),
			want: "its state is Inactive"},
		{name: "Recreate", cpms: atRest(func(c *machinev1.ControlPlaneMachineSet) { c.Spec.Strategy.Type = machinev1.Recreate }),
			want: "Recreate, which the control-plane-machine-set operator declares but does not implement"},
		{name: "unknown strategy", cpms: atRest(func(c *machinev1.ControlPlaneMachineSet) { c.Spec.Strategy.Type = "Surge" }),
			want: `spec.strategy.type: Unsupported value: "Surge"`},
		{name: "a master not ready", cpms: atRest(func(c *machinev1.ControlPlaneMachineSet) { c.Status.ReadyReplicas, c.Status.UnavailableReplicas = 2, 1 }),
			want: "its masters are not at rest (replicas 3 of 3, updated 3, ready 2, unavailable 1)", forceable: true},
		{name: "degraded", cpms: atRest(func(c *machinev1.ControlPlaneMachineSet) {
			c.Status.Conditions = []metav1.Condition{{Type: "Degraded", Status: metav1.ConditionTrue, Reason: "UnmanagedNodes", Message: "found unmanaged control plane nodes"}}
		}), want: "condition Degraded is True (UnmanagedNodes: found unmanaged control plane nodes)", forceable: true},
		{name: "degraded, forced", force: true, cpms: atRest(func(c *machinev1.ControlPlaneMachineSet) {
			c.Status.Conditions = []metav1.Condition{{Type: "Degraded", Status: metav1.ConditionTrue}}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ControlPlaneSafety(tc.cpms, tc.force)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var refused *ControlPlaneRefusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), tc.want) || refused.Forceable != tc.forceable {
				t.Fatalf("got %v (forceable %v), want a refusal saying %q (forceable %v)", err, refused != nil && refused.Forceable, tc.want, tc.forceable)
			}
			if strings.Contains(err.Error(), "--force") != tc.forceable {
				t.Errorf("the message offers --force iff it overrules: %v", err)
			}
		})
	}
}

func TestControlPlaneNext(t *testing.T) {
	five := int32(5)
	c := &machinev1.ControlPlaneMachineSet{Spec: machinev1.ControlPlaneMachineSetSpec{Replicas: &five, Strategy: machinev1.ControlPlaneMachineSetStrategy{Type: machinev1.OnDelete}}}
	if got := ControlPlaneNext(c); !strings.Contains(got, "strategy OnDelete: no master changes until its Machine is deleted; delete the 5 master Machines one at a time") {
		t.Errorf("OnDelete: %s", got)
	}
	c.Spec.Strategy.Type = ""
	if got := ControlPlaneNext(c); !strings.Contains(got, "replaces the 5 masters one at a time") {
		t.Errorf("RollingUpdate: %s", got)
	}
}
