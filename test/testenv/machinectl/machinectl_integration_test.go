//go:build integration

package machinectl

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestControllerPlaysTheMachineAPI checks the sim controller against the behaviour the rollout
// relies on: Machines from replicas, Nodes after the delay, the delete-machine annotation
// honoured on scale-down with the Node removed, and a Machine told to fail going Failed.
func TestControllerPlaysTheMachineAPI(t *testing.T) {
	c := testenv.NewSimCluster(t, testenv.SimOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc, err := machineclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctl := Start(t, c, Options{NodeDelay: 500 * time.Millisecond})

	ms := WorkerMachineSet("sim-x7k2p", 0, 3)
	if _, err := mc.MachineV1beta1().MachineSets(Namespace).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sel := MachineSetLabel + "=" + ms.Name
	machines := waitMachines(t, ctx, mc, sel, func(ms []machinev1beta1.Machine) bool {
		if len(ms) != 3 {
			return false
		}
		for _, m := range ms {
			if m.Status.NodeRef == nil || m.Status.Phase == nil || *m.Status.Phase != machinev1beta1.PhaseRunning {
				return false
			}
		}
		return true
	}, ctl)
	if err := c.WaitNodesReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// The set's status follows, as `oc get machineset` shows it.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := mc.MachineV1beta1().MachineSets(Namespace).Get(ctx, ms.Name, metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == 3 && got.Status.Replicas == 3, nil
	}); err != nil {
		t.Fatalf("MachineSet status never showed 3 ready: %v", err)
	}
	// The template's providerSpec, unknown field included, is the Machine's.
	var spec map[string]any
	if err := json.Unmarshal(machines[0].Spec.ProviderSpec.Value.Raw, &spec); err != nil || spec["simFutureField"] == nil {
		t.Errorf("Machine providerSpec lost the template's fields: %v %v", err, spec)
	}

	// Scale down by one with a marked Machine: that one goes, with its Node.
	victim := machines[1].Name
	mark := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, DeleteMachineAnnotation)
	if _, err := mc.MachineV1beta1().Machines(Namespace).Patch(ctx, victim, types.MergePatchType, []byte(mark), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	scale(t, ctx, mc, ms.Name, 2)
	waitMachines(t, ctx, mc, sel, func(ms []machinev1beta1.Machine) bool {
		if len(ms) != 2 {
			return false
		}
		for _, m := range ms {
			if m.Name == victim {
				return false
			}
		}
		return true
	}, ctl)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("the Node of deleted Machine %s is still there", victim)
	}

	// A Machine told to fail goes Failed with the message, and gets no Node.
	ctl.FailNext("Quota exceeded for instances")
	scale(t, ctx, mc, ms.Name, 3)
	failed := waitMachines(t, ctx, mc, sel, func(ms []machinev1beta1.Machine) bool {
		for _, m := range ms {
			if m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseFailed {
				return true
			}
		}
		return false
	}, ctl)
	for _, m := range failed {
		if m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseFailed {
			if m.Status.ErrorMessage == nil || *m.Status.ErrorMessage != "Quota exceeded for instances" || m.Status.NodeRef != nil {
				t.Errorf("failed Machine %s: message %v, nodeRef %v", m.Name, m.Status.ErrorMessage, m.Status.NodeRef)
			}
		}
	}
	if created := ctl.Created(); len(created) != 4 {
		t.Errorf("controller created %v, want 4 Machines", created)
	}
}

func scale(t *testing.T, ctx context.Context, mc machineclient.Interface, name string, replicas int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if _, err := mc.MachineV1beta1().MachineSets(Namespace).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitMachines(t *testing.T, ctx context.Context, mc machineclient.Interface, selector string, ok func([]machinev1beta1.Machine) bool, ctl *Controller) []machinev1beta1.Machine {
	t.Helper()
	var last []machinev1beta1.Machine
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		last = nil
		for _, m := range list.Items {
			if m.DeletionTimestamp == nil {
				last = append(last, m)
			}
		}
		return ok(last), nil
	})
	if err != nil {
		var states []string
		for _, m := range last {
			phase := ""
			if m.Status.Phase != nil {
				phase = *m.Status.Phase
			}
			states = append(states, m.Name+":"+phase)
		}
		t.Fatalf("Machines never reached the expected state: %v; now %v; %s; last error %v", err, states, ctl, ctl.Err())
	}
	return last
}
