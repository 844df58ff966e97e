//go:build integration

package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/machinesets/attachment"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestPatchRefusesAFullStorageSubnet runs the binary against a sim cluster whose simulated
// Machine API makes real Neutron ports, and a storage network of a project of its own whose
// subnet's allocation pool has 2 addresses, for 3 workers: `machinesets patch` refuses before
// writing, naming the numbers, the subnet and the fix; a dry run says it would; --force
// patches; the rollout then gives two new machines the pool's two addresses, and the third
// fails with Neutron's "No more IP addresses available on network", which `machinesets list`
// shows.
func TestPatchRefusesAFullStorageSubnet(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "capacity")
	small := p.CreateNetworkWith("storage-small", nil, map[string]any{"cidr": "192.168.80.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"},
		"allocation_pools": []map[string]string{{"start": "192.168.80.10", "end": "192.168.80.11"}}})
	// A share network on it: Manila's network, as the network policy wants it.
	p.CreateShareNetwork("capacity-share-network", small.ID, small.SubnetIDs[0])
	t.Setenv("OS_CLIENT_CONFIG_FILE", p.CloudsFile)
	t.Setenv("OS_CLOUD", ostest.CloudName)

	bin := buildCLI(t)
	c := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	mc := createMachineSetNamespace(t, ctx, c.APIServer)
	ports, err := machinectl.NeutronPorts(ctx, p.CloudsFile, ostest.CloudName)
	if err != nil {
		t.Fatal(err)
	}
	ctl := machinectl.Start(t, c, machinectl.Options{NodeDelay: time.Second, Ports: ports})
	if _, err := c.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-config-v1", Namespace: "kube-system"},
		Data:       map[string]string{"install-config": machinectl.DefaultInstallConfig}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sets := []string{"ostest-8x2kq-worker-0", "ostest-8x2kq-worker-1"}
	for i, replicas := range []int32{2, 1} {
		if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("ostest-8x2kq", i, replicas), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range sets {
			ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil || ms.Status.ReadyReplicas != *ms.Spec.Replicas {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("workers never Ready: %v; %s", err, ctl)
	}

	run := func(wantCode int, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != wantCode {
			t.Fatalf("manila-setup %s: exit %d, want %d\n%s", strings.Join(args, " "), code, wantCode, out)
		}
		t.Logf("$ manila-setup %s\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	attached := func() int {
		t.Helper()
		n := 0
		for _, name := range sets {
			ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			spec, err := attachment.DecodeSpec(ms.Spec.Template.Spec.ProviderSpec.Value.Raw)
			if err != nil {
				t.Fatal(err)
			}
			if spec.HasNetwork(small.ID) {
				n++
			}
		}
		return n
	}

	subnet := "subnet storage-small-subnet-0 (" + small.SubnetIDs[0] + ") 192.168.80.0/24 (allocation pool 192.168.80.10-192.168.80.11: 2 addresses, 0 in use, 2 free)"
	out := run(1, "machinesets", "patch", "--network", small.ID)
	for _, want := range []string{
		`the storage network storage-small (` + small.ID + `) has 2 free addresses, but 4 are needed: 3 machines get a port on it (MachineSet ostest-8x2kq-worker-0 (2), MachineSet ostest-8x2kq-worker-1 (1)) plus 1 more while their rollout surges; 2 machines would get no address and never start`,
		subnet, "Fix: enlarge the allocation pool", "nothing patched; --force patches anyway",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, out)
		}
	}
	if n := attached(); n != 0 {
		t.Fatalf("%d MachineSets were patched although the patch was refused", n)
	}
	// With --rollout, its --max-surge counts.
	out = run(1, "machinesets", "patch", "--network", small.ID, "--rollout", "--max-surge", "0", "--max-unavailable", "1")
	if !strings.Contains(out, "has 2 free addresses, but 3 are needed") || attached() != 0 {
		t.Errorf("patch --rollout --max-surge 0:\n%s", out)
	}
	out = run(0, "machinesets", "patch", "--network", small.ID, "--dry-run")
	if !strings.Contains(out, "note: without --dry-run the patch would be refused: the storage network storage-small") || strings.Count(out, "would-patch") != 2 || attached() != 0 {
		t.Errorf("patch --dry-run:\n%s", out)
	}
	out = run(0, "machinesets", "patch", "--network", small.ID, "--force")
	if !strings.Contains(out, "warning: the storage network storage-small ("+small.ID+") has 2 free addresses, but 4 are needed") ||
		!strings.Contains(out, "(--force: attaching it anyway)") || strings.Count(out, "  patched  ") != 2 || attached() != 2 {
		t.Errorf("patch --force:\n%s", out)
	}

	// The rollout: the pool's two addresses go to the first set's new machines; the second
	// set's new machine gets none and fails, which stops the rollout there.
	start := time.Now()
	out = run(1, "machinesets", "rollout")
	t.Logf("rollout until the failure: %s", time.Since(start).Round(100*time.Millisecond))
	if !strings.Contains(out, "No more IP addresses available on network "+small.ID) {
		t.Errorf("the rollout does not say why it stopped:\n%s", out)
	}
	machines, err := mc.MachineV1beta1().Machines(machinesets.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var failed []machinev1beta1.Machine
	for _, m := range machines.Items {
		if m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseFailed {
			failed = append(failed, m)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("%d Failed Machines, want 1; %s", len(failed), ctl)
	}
	f := failed[0]
	if f.Status.NodeRef != nil || f.Status.ErrorReason == nil || *f.Status.ErrorReason != machinev1beta1.InvalidConfigurationMachineError ||
		f.Status.ErrorMessage == nil || !strings.Contains(*f.Status.ErrorMessage, "No more IP addresses available on network "+small.ID) ||
		!strings.HasPrefix(f.Name, "ostest-8x2kq-worker-1-") {
		t.Errorf("the Machine without an address: %s, nodeRef %v, errorReason %v, errorMessage %v", f.Name, f.Status.NodeRef, f.Status.ErrorReason, f.Status.ErrorMessage)
	}
	if _, err := c.Client.CoreV1().Nodes().Get(ctx, f.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("the failed Machine %s has a Node", f.Name)
	}
	out = run(0, "machinesets", "list")
	if !strings.Contains(out, "1 Machine attaches the storage network but failed without a Node") ||
		!strings.Contains(out, "ostest-8x2kq-worker-1  "+f.Name+"  Failed  InvalidConfiguration  error creating Openstack instance: creating the port on network "+small.ID+": No more IP addresses available on network "+small.ID) {
		t.Errorf("machinesets list does not show the failed Machine:\n%s", out)
	}
	// Now the subnet is full: a patch of one more set is refused with 0 free addresses.
	if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("ostest-8x2kq", 2, 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out = run(1, "machinesets", "patch", "--network", small.ID)
	if !strings.Contains(out, "has 0 free addresses, but 2 are needed: 1 machines get a port on it (MachineSet ostest-8x2kq-worker-2 (1)) plus 1 more") ||
		!strings.Contains(out, "2 addresses, 2 in use, 0 free") {
		t.Errorf("patch of a set added to a full subnet:\n%s", out)
	}
}

// TestControlPlanePatchRefusesAFullStorageSubnet: on a cluster whose masters run workloads, the
// ControlPlaneMachineSet's three masters and the one more a rolling replacement makes need four
// addresses on the storage network; a storage subnet with two free is refused before anything
// is written, naming the numbers, the set and the subnet; a dry run says it would be; --force
// patches.
func TestControlPlanePatchRefusesAFullStorageSubnet(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "cpcapacity")
	small := p.CreateNetworkWith("storage-small", nil, map[string]any{"cidr": "192.168.81.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"},
		"allocation_pools": []map[string]string{{"start": "192.168.81.10", "end": "192.168.81.11"}}})
	p.CreateShareNetwork("cpcapacity-share-network", small.ID, small.SubnetIDs[0])
	t.Setenv("OS_CLIENT_CONFIG_FILE", p.CloudsFile)
	t.Setenv("OS_CLOUD", ostest.CloudName)

	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	mc := createMachineSetNamespace(t, ctx, api)
	admin, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", admin)
	createControlPlaneMachineSet(t, ctx, mc, "ostest-cp3")
	attached := func() bool {
		t.Helper()
		got, err := mc.MachineV1().ControlPlaneMachineSets(machinesets.Namespace).Get(ctx, machinesets.ControlPlaneName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(got.Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value.Raw), small.ID)
	}

	code, out, errOut := runCLI(t, "controlplane", "patch", "--network", small.ID)
	all := out + errOut
	for _, want := range []string{
		"the storage network storage-small (" + small.ID + ") has 2 free addresses, but 4 are needed",
		"ControlPlaneMachineSet cluster (3)", "plus 1 more while their rollout surges",
		"subnet storage-small-subnet-0 (" + small.SubnetIDs[0] + ") 192.168.81.0/24 (allocation pool 192.168.81.10-192.168.81.11: 2 addresses, 0 in use, 2 free)",
		"nothing patched; --force patches anyway",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, all)
		}
	}
	if code != exitInvalid || attached() {
		t.Fatalf("controlplane patch on a full subnet: exit %d (want %d), patched: %v\n%s", code, exitInvalid, attached(), all)
	}
	code, out, errOut = runCLI(t, "controlplane", "patch", "--network", small.ID, "--dry-run")
	if code != exitOK || !strings.Contains(out+errOut, "note: without --dry-run the patch would be refused: the storage network storage-small") || attached() {
		t.Errorf("controlplane patch --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "controlplane", "patch", "--network", small.ID, "--force")
	if code != exitOK || !strings.Contains(out+errOut, "(--force: attaching it anyway)") || !attached() {
		t.Errorf("controlplane patch --force: exit %d, patched: %v\n%s%s", code, attached(), out, errOut)
	}
}
