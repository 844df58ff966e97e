//go:build integration

package main

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestRolloutChecksTheFirstNewMachine attaches a storage subnet as Neutron makes it by default
// (a gateway) to a cluster whose VIPs are not on-link, where the storage NIC's default route
// comes up first: the node IP of a new machine moves to the storage network (the Machine API
// stand-in follows nodeip-configuration's rule, with real Neutron ports). The rollout stops after
// that one machine with the three old ones serving and says the fix; run again it stays
// stopped; --resume checks the same machine again (a subnet fix reaches a machine only when it
// boots: still stopped); once the machine is deleted, a new one boots with the fixed subnet and
// the rollout goes through.
func TestRolloutChecksTheFirstNewMachine(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "canary")
	t.Setenv("OS_CLIENT_CONFIG_FILE", p.CloudsFile)
	t.Setenv("OS_CLOUD", ostest.CloudName)
	storage := p.CreateNetworkWith("canary-storage", nil, map[string]any{"cidr": "10.77.0.0/24", "dns_nameservers": []string{"0.0.0.0"}})

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const set = "ostest-8x2kq-worker-0"
	_, mc, old := canaryCluster(t, ctx, p.CloudsFile, ostest.CloudName, 3,
		machinectl.NodeIPRule{VIPs: []netip.Addr{netip.MustParseAddr("192.0.2.5")}, StorageRouteFirst: true})

	if code, out, errOut := runCLI(t, "machinesets", "patch", "--network", storage.ID, "--force"); code != 0 {
		t.Fatalf("patch: exit %d\n%s%s", code, out, errOut)
	}
	roll := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"machinesets", "rollout", "--poll-interval", "100ms", "--timeout", "2m"}, args...)...)
		if code != want {
			t.Fatalf("rollout %v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		return out + errOut
	}
	out := roll(1)
	t.Logf("stopped rollout:\n%s", out)
	for _, want := range []string{"failed its check", "took its node IP 10.77.0.", "from storage subnet canary-storage-subnet-0 10.77.0.0/24",
		"fix: openstack subnet set --gateway none canary-storage-subnet-0", "--resume", "0 of 3 Machines were replaced"} {
		if !strings.Contains(out, want) {
			t.Errorf("the stopped rollout does not say %q:\n%s", want, out)
		}
	}
	canary := checkStopped(t, ctx, mc, set, old)

	// Run again: still stopped, on the same Machine, nothing else made.
	out = roll(1)
	if !strings.Contains(out, "new Machine "+canary+", the first of the set, failed its check") {
		t.Errorf("run again:\n%s", out)
	}
	if again := checkStopped(t, ctx, mc, set, old); again != canary {
		t.Errorf("run again made another new Machine %s (was %s)", again, canary)
	}

	// The fix, on the subnet: it reaches a machine when it boots, so --resume, which checks the
	// running one again, still stops.
	neutron, err := openstack.Connect(ctx, openstack.Config{Cloud: ostest.CloudName, CloudsFile: p.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := neutron.UpdateSubnet(ctx, openstack.SubnetUpdate{SubnetID: storage.SubnetIDs[0], NoGateway: true}); err != nil {
		t.Fatal(err)
	}
	out = roll(1, "--resume")
	if !strings.Contains(out, "took its node IP 10.77.0.") {
		t.Errorf("--resume on the machine that booted before the fix:\n%s", out)
	}
	checkStopped(t, ctx, mc, set, old)

	// Deleted, it is replaced by one that boots with the fix: checked, passed, rolled through.
	if err := mc.MachineV1beta1().Machines(machinesets.Namespace).Delete(ctx, canary, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out = roll(0)
	if !strings.Contains(out, "3/3 replaced  done") {
		t.Errorf("rollout after the fix:\n%s", out)
	}
	passed := 0
	for _, m := range liveMachines(t, ctx, mc, set) {
		for _, o := range old {
			if m.Name == o.Name {
				t.Errorf("old Machine %s left", m.Name)
			}
		}
		if m.Annotations[rollout.CanaryAnnotation] == rollout.CanaryPassed {
			passed++
		}
	}
	if passed != 1 {
		t.Errorf("%d Machines carry a passed check, want 1", passed)
	}

	// --no-canary says what it skips; with --resume it makes no sense.
	if out := roll(0, "--no-canary"); !strings.Contains(out, "warning: --no-canary: no new Machine is checked") {
		t.Errorf("--no-canary:\n%s", out)
	}
	if code, _, errOut := runCLI(t, "machinesets", "rollout", "--no-canary", "--resume"); code == 0 || !strings.Contains(errOut, "cannot be used with --no-canary") {
		t.Errorf("--no-canary --resume: exit %d\n%s", code, errOut)
	}
}

// canaryCluster is a sim cluster shaped as the installer leaves one (cluster-config-v1), whose
// Machine API stand-in gives each server real ports in the cloud of cloudsFile and its node IP
// by rule, with one worker MachineSet of replicas Ready machines; it returns them (KUBECONFIG
// names the cluster for the commands).
func canaryCluster(t *testing.T, ctx context.Context, cloudsFile, cloud string, replicas int32, rule machinectl.NodeIPRule) (*testenv.SimCluster, machineclient.Interface, []machinev1beta1.Machine) {
	t.Helper()
	c := testenv.NewSimCluster(t, testenv.SimOptions{})
	t.Setenv("KUBECONFIG", c.Kubeconfig)
	mc := createMachineSetNamespace(t, ctx, c.APIServer)
	if _, err := c.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-config-v1", Namespace: "kube-system"},
		Data:       map[string]string{"install-config": machinectl.DefaultInstallConfig}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ports, err := machinectl.NeutronPorts(ctx, cloudsFile, cloud)
	if err != nil {
		t.Fatal(err)
	}
	ctl := machinectl.Start(t, c, machinectl.Options{NodeDelay: time.Second, Ports: ports, NodeIP: rule})
	const set = "ostest-8x2kq-worker-0"
	if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("ostest-8x2kq", 0, replicas), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSet(t, ctx, mc, set, replicas, ctl)
	return c, mc, liveMachines(t, ctx, mc, set)
}

// checkStopped checks that the old Machines all still serve beside one new Machine whose check
// failed, and returns that Machine's name.
func checkStopped(t *testing.T, ctx context.Context, mc machineclient.Interface, set string, old []machinev1beta1.Machine) string {
	t.Helper()
	canary := ""
	oldLeft := 0
	for _, m := range liveMachines(t, ctx, mc, set) {
		isOld := false
		for _, o := range old {
			isOld = isOld || o.Name == m.Name
		}
		if isOld {
			oldLeft++
			continue
		}
		if canary != "" {
			t.Errorf("more than one new Machine: %s, %s", canary, m.Name)
		}
		canary = m.Name
		if !strings.HasPrefix(m.Annotations[rollout.CanaryAnnotation], rollout.CanaryFailedPrefix) {
			t.Errorf("new Machine %s: canary annotation %q", m.Name, m.Annotations[rollout.CanaryAnnotation])
		}
	}
	if oldLeft != len(old) || canary == "" {
		t.Fatalf("stopped rollout: %d of %d old Machines left, new Machine %q", oldLeft, len(old), canary)
	}
	return canary
}

func liveMachines(t *testing.T, ctx context.Context, mc machineclient.Interface, set string) []machinev1beta1.Machine {
	t.Helper()
	live, err := machinectl.LiveMachines(ctx, mc, machinectl.MachineSetLabel+"="+set)
	if err != nil {
		t.Fatal(err)
	}
	return live
}

func waitSet(t *testing.T, ctx context.Context, mc machineclient.Interface, set string, ready int32, ctl *machinectl.Controller) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, set, metav1.GetOptions{})
		return err == nil && ms.Status.ReadyReplicas == ready, nil
	}); err != nil {
		t.Fatalf("%s never had %d Ready Machines: %v; %s", set, ready, err, ctl)
	}
}

// TestRolloutProbesNFSWhereTheOperatorRuns: where the manila-setup operator runs (its
// Deployment, labelled as this product's, available in the driver's namespace), the check of the
// first new machine runs the NFS probe pod on its node, to the export addresses discovery finds
// on the storage network. A kwok node runs no container, so the probe reports nothing and the
// rollout stops there with the old machine serving: the wiring is proven up to the pod; a node
// that runs it is another environment's.
func TestRolloutProbesNFSWhereTheOperatorRuns(t *testing.T) {
	cloud := testenv.NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	const set = "ostest-8x2kq-worker-0"
	c, mc, old := canaryCluster(t, ctx, cloud.CloudsFile, testenv.CloudDemo, 1, machinectl.NodeIPRule{})

	// The operator, as `operator install` leaves it: its namespace admits host-network pods, its
	// Deployment says it is this product's; kwok runs its pod (Ready, so available).
	ns := operator.DefaultNamespace
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"name": operator.OperatorName}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: operator.OperatorName, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/managed-by": "manila-setup"}},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "operator", Image: "localhost/manila-setup:probe-test"}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
		}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, operator.OperatorName, metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 1, nil
	}); err != nil {
		t.Fatalf("the operator's Deployment never available: %v", err)
	}

	if code, out, errOut := runCLI(t, "machinesets", "patch", "--network", cloud.Seed.Networks["storage"]); code != 0 {
		t.Fatalf("patch: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, "machinesets", "rollout", "--poll-interval", "100ms", "--timeout", "2m", "--probe-timeout", "3s")
	t.Logf("rollout:\n%s%s", out, errOut)
	if code != 1 || !strings.Contains(errOut, "the NFS probe on its node gave no answer") || !strings.Contains(errOut, "reported nothing within 3s") ||
		!strings.Contains(errOut, "0 of 1 Machines were replaced") {
		t.Errorf("rollout where the operator runs: exit %d\n%s%s", code, out, errOut)
	}
	checkStopped(t, ctx, mc, set, old)
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=manila-setup-probe"})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("probe pods left: %v, %v", pods, err)
	}
}
