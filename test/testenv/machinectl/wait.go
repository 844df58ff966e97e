package machinectl

import (
	"context"
	"fmt"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// WaitMachinesRunning waits until namespace Namespace holds exactly n Machines and every one
// has its Node, and returns their names: the starting point of a test that then replaces them.
func WaitMachinesRunning(ctx context.Context, mc machineclient.Interface, n int, timeout time.Duration) ([]string, error) {
	var names []string
	var seen, running int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // the apiserver may still be warming up; the timeout bounds this
		}
		names, seen, running = names[:0], len(list.Items), 0
		for _, m := range list.Items {
			if m.Status.NodeRef != nil {
				running++
			}
			names = append(names, m.Name)
		}
		return seen == n && running == n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%d of %d Machines with a Node (%d Machines in all): %w", running, n, seen, err)
	}
	return names, nil
}

// LiveMachines lists the Machines of namespace Namespace that match a label selector (a set's,
// MachineSetLabel=<name>, or a role's, RoleLabel=master) and are not being deleted.
func LiveMachines(ctx context.Context, mc machineclient.Interface, selector string) ([]machinev1beta1.Machine, error) {
	list, err := mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var live []machinev1beta1.Machine
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil {
			live = append(live, m)
		}
	}
	return live, nil
}
