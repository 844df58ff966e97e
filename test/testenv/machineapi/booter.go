package machineapi

import (
	"context"
	"fmt"
	"strings"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
	"github.com/manila-setup/manila-setup/test/testenv/nodeboot"
)

// ProviderIDPrefix starts an OpenStack Node's and Machine's providerID; the server ID follows.
const ProviderIDPrefix = nodeboot.ProviderIDPrefix

// machineServers lists the servers of the namespace's Machines, by the providerID the actuator
// set once it created the server; a master's by its role label.
func machineServers(mc machineclient.Interface, namespace string) func(context.Context) ([]nodeboot.Server, error) {
	return func(ctx context.Context) ([]nodeboot.Server, error) {
		machines, err := mc.MachineV1beta1().Machines(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing Machines: %w", err)
		}
		var out []nodeboot.Server
		for _, m := range machines.Items {
			if m.Spec.ProviderID == nil || !strings.HasPrefix(*m.Spec.ProviderID, ProviderIDPrefix) {
				continue
			}
			out = append(out, nodeboot.Server{
				ID:           strings.TrimPrefix(*m.Spec.ProviderID, ProviderIDPrefix),
				ControlPlane: m.Labels[machinectl.RoleLabel] == "master",
			})
		}
		return out, nil
	}
}
