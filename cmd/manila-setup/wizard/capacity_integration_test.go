//go:build integration

package wizard

import (
	"context"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestWizardRefusesAFullStorageSubnet walks the wizard, on its live backend, to the review of a
// storage network whose subnet's allocation pool has 2 addresses, for 3 workers: the review
// refuses with the words of `machinesets patch` (the free addresses, the machines and the
// surge, the subnet, the fix), and nothing is written.
func TestWizardRefusesAFullStorageSubnet(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "wizcap")
	small := p.CreateNetworkWith("storage-small", nil, map[string]any{"cidr": "192.168.82.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"},
		"allocation_pools": []map[string]string{{"start": "192.168.82.10", "end": "192.168.82.11"}}})
	p.CreateShareNetwork("wizcap-share-network", small.ID, small.SubnetIDs[0])

	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinesets.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc, err := machineclient.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]string{}
	for i, replicas := range []int32{2, 1} {
		ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("ostest", i, replicas), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions[ms.Name] = ms.ResourceVersion
	}
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	b := testBackend(LiveConfig{Kubeconfig: kubeconfig, CloudsFile: p.CloudsFile, Cloud: ostest.CloudName, UserAgent: "manila-setup/test", By: "manila-setup test",
		PollInterval: 50 * time.Millisecond, RolloutTimeout: time.Minute})
	// Wide enough that the refusal's sentences are not wrapped.
	tm := teatest.NewTestModel(t, New(Options{Backend: b, Context: ctx}), teatest.WithInitialTermSize(1000, 50))
	scr := &terminal{}
	go scr.copyFrom(tm.Output())
	scr.waitFor(t, 0, settle, "✓ cloud "+ostest.CloudName)
	for _, s := range []struct {
		want []string
	}{
		{[]string{"2/7 Storage network", "storage-small"}},
		{[]string{"3/7 Security groups"}},
		{[]string{"4/7 MachineSets", "ostest-worker-0", "ostest-worker-1"}},
		{[]string{"5/7 Review", "✗ the storage network storage-small (" + small.ID + ") has 2 free addresses, but 4 are needed: 3 machines get a port on it (MachineSet ostest-worker-0 (2), MachineSet ostest-worker-1 (1)) plus 1 more while their rollout surges",
			"subnet storage-small-subnet-0 (" + small.SubnetIDs[0] + ") 192.168.82.0/24 (allocation pool 192.168.82.10-192.168.82.11: 2 addresses, 0 in use, 2 free)",
			"Fix: enlarge the allocation pool", "Press esc to go back and change the choice"}},
	} {
		m := scr.mark()
		tm.Send(enter)
		scr.waitFor(t, m, settle, s.want...)
	}
	tm.Send(keyMsg("q"))
	tm.FinalModel(t, teatest.WithFinalTimeout(settle))
	for name, rv := range versions {
		ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ms.ResourceVersion != rv {
			t.Errorf("MachineSet %s was written (resourceVersion %s -> %s)", name, rv, ms.ResourceVersion)
		}
	}
}
