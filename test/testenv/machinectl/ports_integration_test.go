//go:build integration

package machinectl

import (
	"context"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestPortsFollowMachines: with a real Neutron behind it, each Machine's server gets a port on
// the network its providerSpec names (device_id = the server ID in the Node's providerID), and
// the port goes with the Machine.
func TestPortsFollowMachines(t *testing.T) {
	cloud := testenv.NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	storage := cloud.Seed.Networks["storage"]
	ports, err := NeutronPorts(ctx, cloud.CloudsFile, testenv.CloudDemo)
	if err != nil {
		t.Fatal(err)
	}
	osc, err := openstack.Connect(ctx, openstack.Config{Cloud: testenv.CloudDemo, CloudsFile: cloud.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.NewSimCluster(t, testenv.SimOptions{})
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc, err := machineclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctl := Start(t, c, Options{NodeDelay: 300 * time.Millisecond, Ports: ports})

	spec := strings.Replace(WorkerProviderSpec("sim-ports", "nova"), `"networks": [`,
		`"networks": [{"uuid": "`+strings.ToUpper(storage)+`", "noAllowedAddressPairs": true}, `, 1)
	ms := MachineSet("sim-ports", "worker", "sim-ports-worker-0", 2, spec)
	if _, err := mc.MachineV1beta1().MachineSets(Namespace).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	machines := waitMachines(t, ctx, mc, MachineSetLabel+"="+ms.Name, func(ms []machinev1beta1.Machine) bool {
		return len(ms) == 2 && ms[0].Status.NodeRef != nil && ms[1].Status.NodeRef != nil
	}, ctl)
	for _, m := range machines {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := "openstack:///" + string(m.UID); node.Spec.ProviderID != want || m.Spec.ProviderID == nil || *m.Spec.ProviderID != want {
			t.Errorf("Machine %s: Node providerID %q, Machine %v, want %s", m.Name, node.Spec.ProviderID, m.Spec.ProviderID, want)
		}
		got, err := osc.ServerPorts(ctx, string(m.UID))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].NetworkID != storage {
			t.Errorf("server of Machine %s has ports %+v, want one on the storage network %s", m.Name, got, storage)
		}
	}

	// Scaled to zero: the Machines go, and so do their ports.
	if _, err := mc.MachineV1beta1().MachineSets(Namespace).Patch(ctx, ms.Name, "application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, m := range machines {
			got, err := osc.ServerPorts(ctx, string(m.UID))
			if err != nil || len(got) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("ports of the deleted Machines still there: %v (%s)", err, ctl)
	}
}
