//go:build integration

package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

const (
	cliStorageNet = "3f5a9c3e-5d1b-4e0a-9a57-6b1f0c2d7e11"
	cliStorageSG  = "8d2c4b1a-7e6f-4a3b-9c0d-1e2f3a4b5c6d"
)

func createMachineSetNamespace(t *testing.T, ctx context.Context, c *testenv.APIServer) machineclient.Interface {
	t.Helper()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinesets.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc, err := machineclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// TestMachineSetsCommandsOnAPIServer runs list and patch as an admin would, in-process against
// a real apiserver: text and JSON output, --dry-run, idempotency, and a read-only user.
func TestMachineSetsCommandsOnAPIServer(t *testing.T) {
	api := testenv.NewAPIServer(t)
	ctx := context.Background()
	mc := createMachineSetNamespace(t, ctx, api)
	for i := 0; i < 2; i++ {
		if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("ostest-8x2kq", i, 3), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	infra := machinectl.MachineSet("ostest-8x2kq", "infra", "ostest-8x2kq-infra-0", 2, machinectl.WorkerProviderSpec("ostest-8x2kq", "nova"))
	if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, infra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	admin, err := api.KubeconfigFor(dir, "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OS_CLOUD", "")
	t.Setenv("KUBECONFIG", admin)

	code, out, errOut := runCLI(t, "machinesets", "list")
	if code != exitOK || !strings.Contains(out, "NAME") || !strings.Contains(out, "ostest-8x2kq-worker-0  worker  3") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("$ manila-setup machinesets list\n%s", out)

	code, out, errOut = runCLI(t, "machinesets", "patch", "--network", cliStorageNet, "--security-group", cliStorageSG, "--dry-run")
	if code != exitOK || !strings.Contains(out, "ostest-8x2kq-worker-0  would-patch  added network "+cliStorageNet) ||
		!strings.Contains(out, "+- noAllowedAddressPairs: true") || !strings.Contains(out, "Dry run: nothing was written.") {
		t.Fatalf("patch --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("$ manila-setup machinesets patch --network %s --security-group %s --dry-run\n%s", cliStorageNet, cliStorageSG, out)

	code, out, errOut = runCLI(t, "machinesets", "patch", "--network", cliStorageNet, "--security-group", cliStorageSG)
	if code != exitOK || strings.Count(out, " patched ") != 2 || !strings.Contains(out, "ostest-8x2kq-infra-0   skipped") ||
		!strings.Contains(out, "manila-setup machinesets rollout") {
		t.Fatalf("patch: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("$ manila-setup machinesets patch --network %s --security-group %s\n%s", cliStorageNet, cliStorageSG, out)

	code, out, _ = runCLI(t, "machinesets", "patch", "--network", cliStorageNet, "--security-group", cliStorageSG, "-o", "json")
	var results []attach.Result
	if err := json.Unmarshal([]byte(out), &results); code != exitOK || err != nil || len(results) != 3 {
		t.Fatalf("patch -o json: exit %d, %v\n%s", code, err, out)
	}
	for _, r := range results {
		if r.Action == attach.ActionPatched {
			t.Errorf("second patch changed %s again", r.Name)
		}
	}

	code, out, _ = runCLI(t, "machinesets", "list", "-o", "json")
	var sets []machinesets.SetStatus
	if err := json.Unmarshal([]byte(out), &sets); code != exitOK || err != nil || len(sets) != 3 {
		t.Fatalf("list -o json: exit %d, %v\n%s", code, err, out)
	}
	if sets[1].Name != "ostest-8x2kq-worker-0" || sets[1].StorageNetwork != attach.StateAttached || sets[1].Recorded == nil {
		t.Errorf("list -o json after patching: %+v", sets[1])
	}

	code, _, errOut = runCLI(t, "machinesets", "patch", "--network", cliStorageNet, "--name", "ostest-8x2kq-worker-9")
	if code != exitInvalid || !strings.Contains(errOut, "MachineSet ostest-8x2kq-worker-9 not found in namespace openshift-machine-api") {
		t.Errorf("unknown --name: exit %d, %s", code, errOut)
	}

	// A user who may only read: clear refusal, exit 2, nothing changed.
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "machine-api-view"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"machine.openshift.io"}, Resources: []string{"machinesets", "machines"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := api.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "viewer"}},
	}
	if _, err := api.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	viewer, err := api.KubeconfigFor(dir, "viewer")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, "ostest-8x2kq-infra-0", metav1.GetOptions{})
	code, _, errOut = runCLI(t, "--kubeconfig", viewer, "machinesets", "patch", "--network", cliStorageNet, "--name", "ostest-8x2kq-infra-0")
	if code != exitUsage || !strings.Contains(errOut, "error: patching MachineSet openshift-machine-api/ostest-8x2kq-infra-0 was refused") ||
		!strings.Contains(errOut, "nothing was changed") {
		t.Errorf("read-only user: exit %d, %s", code, errOut)
	}
	t.Logf("read-only user:\n%s", errOut)
	after, _ := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, "ostest-8x2kq-infra-0", metav1.GetOptions{})
	if after.ResourceVersion != before.ResourceVersion {
		t.Error("the read-only user's patch changed the MachineSet")
	}
}

// buildCLI builds the real binary, as users run it, once for all the tests.
func buildCLI(t *testing.T) string {
	t.Helper()
	return testenv.Command(t, "github.com/manila-setup/manila-setup/cmd/manila-setup", "")
}

func init() { afterTests = append(afterTests, testenv.RemoveCommands) }

// TestRolloutSurvivesKill9 runs the real binary against a sim cluster and kills it with SIGKILL
// twice: while it waits for a surge Machine's Node, and right after it removed an old Machine.
// Each time the set is left at or above its replica count, the original count recorded; the
// run after that finishes the job. The Ready count, replayed from watch events, never drops
// below the replicas over the whole time, kills included.
func TestRolloutSurvivesKill9(t *testing.T) {
	bin := buildCLI(t)
	c := testenv.NewSimCluster(t, testenv.SimOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	mc := createMachineSetNamespace(t, ctx, c.APIServer)
	ctl := machinectl.Start(t, c, machinectl.Options{NodeDelay: 1500 * time.Millisecond})
	const set = "sim-x7k2p-worker-0"
	if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("sim-x7k2p", 0, 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	live := func() []machinev1beta1.Machine {
		list, err := mc.MachineV1beta1().Machines(machinesets.Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.MachineSetLabel + "=" + set})
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(list.Items, func(m machinev1beta1.Machine) bool { return m.DeletionTimestamp != nil })
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v; %s", what, err, ctl)
		}
	}
	waitFor("3 Running Machines", func() bool {
		ms := live()
		return len(ms) == 3 && !slices.ContainsFunc(ms, func(m machinev1beta1.Machine) bool { return m.Status.NodeRef == nil })
	})
	if err := c.WaitNodesReady(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	var old []string
	for _, m := range live() {
		old = append(old, m.Name)
	}

	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "OS_CLOUD=")
		return cmd
	}
	if out, err := run("machinesets", "patch", "--network", cliStorageNet, "--security-group", cliStorageSG).CombinedOutput(); err != nil {
		t.Fatalf("patch: %v\n%s", err, out)
	}

	mon := machinectl.WatchReady(t, c, machinectl.MachineSetLabel+"="+set)
	roll := func() (*exec.Cmd, *testenv.SyncBuffer) {
		cmd := run("machinesets", "rollout", "--poll-interval", "200ms", "--timeout", "2m")
		out := &testenv.SyncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	kill := func(cmd *exec.Cmd, out *testenv.SyncBuffer, when string) {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s: %v\n%s", when, err, out)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("the rollout ended before it could be killed %s (%v):\n%s", when, err, out)
		}
		ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, set, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("killed %s: replicas %d, annotation %q; output so far:\n%s", when, *ms.Spec.Replicas, ms.Annotations[rollout.OriginalReplicasAnnotation], out)
		if ms.Annotations[rollout.OriginalReplicasAnnotation] != "3" || *ms.Spec.Replicas < 3 {
			t.Errorf("after the kill %s: replicas %d, original-replicas annotation %q", when, *ms.Spec.Replicas, ms.Annotations[rollout.OriginalReplicasAnnotation])
		}
	}

	// Kill 1: a new Machine exists and has no Node yet.
	cmd, out := roll()
	waitFor("a surge Machine without a Node", func() bool {
		ms := live()
		return len(ms) == 4 && slices.ContainsFunc(ms, func(m machinev1beta1.Machine) bool { return m.Status.NodeRef == nil })
	})
	kill(cmd, out, "while waiting for a new Node")

	// Kill 2: right after an old Machine was removed.
	cmd, out = roll()
	waitFor("an old Machine removed", func() bool { return countOld(live(), old) < 3 })
	kill(cmd, out, "right after removing an old Machine")

	// The third run finishes, on a terminal (script(1) gives it a pty): its progress is one
	// line, redrawn in place.
	start := time.Now()
	cmd = exec.Command("script", "-qfec", strings.Join([]string{bin, "--kubeconfig", c.Kubeconfig, "machinesets", "rollout", "--poll-interval", "200ms"}, " "), "/dev/null")
	cmd.Env = append(os.Environ(), "OS_CLOUD=")
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("resumed rollout: %v\n%q", err, raw)
	}
	screen := renderTerminal(string(raw))
	t.Logf("resumed rollout finished in %s; %d bytes written to the terminal, final screen:\n%s", time.Since(start).Round(time.Millisecond), len(raw), strings.Join(screen, "\n"))
	if len(screen) != 1 || !strings.HasPrefix(screen[0], "sim-x7k2p-worker-0  3/3 replaced  done        done: 3 of 3 replaced") {
		t.Errorf("final screen is not the one finished line: %q", screen)
	}
	if !strings.Contains(string(raw), "\x1b[1A") {
		t.Errorf("no redraw on a terminal: %q", raw)
	}
	stats, err := mon.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("over the whole run, two kills included: %s", stats)
	if stats.MinReady < 3 || stats.MaxLive > 4 || stats.EndReady != 3 {
		t.Errorf("bounds broken (min Ready 3, max Machines 4): %s", stats)
	}
	ms, _ := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, set, metav1.GetOptions{})
	if *ms.Spec.Replicas != 3 || ms.Annotations[rollout.OriginalReplicasAnnotation] != "" {
		t.Errorf("set after the rollout: replicas %d, annotations %v", *ms.Spec.Replicas, ms.Annotations)
	}
	final := live()
	if len(final) != 3 || countOld(final, old) != 0 {
		t.Errorf("Machines after the rollout: %v (old: %v)", final, old)
	}
}

func countOld(ms []machinev1beta1.Machine, old []string) int {
	n := 0
	for _, m := range ms {
		if slices.Contains(old, m.Name) {
			n++
		}
	}
	return n
}

// TestDay2Walkthrough is docs/day2.md run for real: the binary against a sim cluster (the sim
// Machine API turning Machines into kwok Nodes) and the loopback OpenStack, whose storage
// network and NFS security group are attached with --os-cloud checking the IDs in Neutron.
// Run with -v to see the transcript the document quotes.
func TestDay2Walkthrough(t *testing.T) {
	cloud := testenv.NewCloud(t) // sets OS_CLIENT_CONFIG_FILE and OS_CLOUD for the commands
	bin := buildCLI(t)
	c := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	mc := createMachineSetNamespace(t, ctx, c.APIServer)
	// Real ports on the networks the Machines name, so that the rollout's check of the first new
	// machine finds its address on the storage network.
	ports, err := machinectl.NeutronPorts(ctx, cloud.CloudsFile, testenv.CloudDemo)
	if err != nil {
		t.Fatal(err)
	}
	ctl := machinectl.Start(t, c, machinectl.Options{NodeDelay: 2 * time.Second, Ports: ports})
	// The install-config the installer leaves in the cluster: the check of the first new machine
	// reads the machine network from it.
	if _, err := c.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-config-v1", Namespace: "kube-system"},
		Data:       map[string]string{"install-config": machinectl.DefaultInstallConfig}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, replicas := range []int32{2, 1} {
		if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("ostest-8x2kq", i, replicas), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"ostest-8x2kq-worker-0", "ostest-8x2kq-worker-1"} {
			ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil || ms.Status.ReadyReplicas != *ms.Spec.Replicas {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("workers never Ready: %v; %s", err, ctl)
	}
	storage, nfs := cloud.Seed.Networks["storage"], cloud.Seed.SecurityGroups["nfs"]

	var transcript strings.Builder
	sh := func(wantCode int, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		out, _ := cmd.CombinedOutput()
		code := cmd.ProcessState.ExitCode()
		transcript.WriteString("$ manila-setup " + strings.Join(args, " ") + "\n" + string(out))
		if code != wantCode {
			transcript.WriteString("(exit " + string(rune('0'+code)) + ")\n")
			t.Fatalf("manila-setup %s: exit %d, want %d\n%s", strings.Join(args, " "), code, wantCode, out)
		}
		if code != 0 {
			transcript.WriteString("(exit " + string(rune('0'+code)) + ")\n")
		}
		transcript.WriteString("\n")
		return string(out)
	}
	defer func() { t.Logf("transcript:\n%s", transcript.String()) }()

	// With a cloud named (OS_CLOUD here), the storage network is the one discovery finds:
	// "missing", not an "unknown" that reads as healthy.
	out := sh(0, "machinesets", "list")
	if !strings.Contains(out, "ostest-8x2kq-worker-0  worker  2         2      missing          unknown") ||
		!strings.Contains(out, `storage network "storage" (`+storage+`), as discovery finds it`) {
		t.Errorf("list before:\n%s", out)
	}
	cmd := exec.Command(bin, "machinesets", "list")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "OS_CLOUD=")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "      unknown          unknown") ||
		!strings.Contains(string(out), "no cloud was named (--os-cloud) to find it") {
		t.Errorf("list without a cloud: %v\n%s", err, out)
	}
	// A typo in the ID is caught in Neutron before the cluster is touched.
	typo := storage[:len(storage)-1] + "0"
	if typo == storage {
		typo = storage[:len(storage)-1] + "1"
	}
	out = sh(1, "machinesets", "patch", "--network", typo, "--security-group", nfs)
	if !strings.Contains(out, "network "+typo+" does not exist") || !strings.Contains(out, "nothing was changed") {
		t.Errorf("typo not caught:\n%s", out)
	}
	// Tab completes the cluster's MachineSets and the cloud's networks.
	out = sh(0, "__complete", "machinesets", "patch", "--name", "")
	if !strings.Contains(out, "ostest-8x2kq-worker-0\tworker") || !strings.Contains(out, "ostest-8x2kq-worker-1\tworker") {
		t.Errorf("--name completion:\n%s", out)
	}
	out = sh(0, "__complete", "machinesets", "patch", "--network", "")
	if !strings.Contains(out, storage+"\tstorage") {
		t.Errorf("--network completion:\n%s", out)
	}
	// The wrong network: one Manila does not export on, or the machines' own. Refused unless
	// --force, as the wizard asks before taking it.
	decoy, tenant := cloud.Seed.Networks["decoy"], cloud.Seed.Networks["tenant"]
	out = sh(1, "machinesets", "patch", "--network", decoy, "--security-group", nfs)
	if !strings.Contains(out, "no Manila export location lies in the subnets of network") || !strings.Contains(out, `Manila exports on network "storage"`) ||
		!strings.Contains(out, "--force attaches it anyway") {
		t.Errorf("a network without exports:\n%s", out)
	}
	out = sh(1, "machinesets", "patch", "--network", tenant)
	if !strings.Contains(out, "is the machines' own network") || !strings.Contains(out, "holds the node address 10.196.") {
		t.Errorf("the machines' own network:\n%s", out)
	}
	out = sh(0, "machinesets", "patch", "--network", decoy, "--force", "--dry-run")
	if !strings.Contains(out, "--force: attaching it anyway") || strings.Count(out, "  would-patch  ") != 2 {
		t.Errorf("--force:\n%s", out)
	}
	// --discover: the network Manila exports on, as installconfig patch --discover finds it.
	out = sh(0, "machinesets", "patch", "--discover", "--security-group", nfs)
	if strings.Count(out, "  patched  ") != 2 || !strings.Contains(out, `discovered: network "storage"`) || !strings.Contains(out, "network "+storage) {
		t.Errorf("patch --discover:\n%s", out)
	}
	// The seeded storage subnet is as Neutron makes a subnet by default (a gateway, no DNS
	// servers): attached, with what it does to the nodes said, and the fix.
	if !strings.Contains(out, "warning: --network[0] "+storage+": network storage") ||
		!strings.Contains(out, "its gateway 10.0.0.1 is handed out by DHCP") || !strings.Contains(out, "fix: openstack subnet set --gateway none storage-subnet") ||
		!strings.Contains(out, "its DHCP server announces itself as a DNS server") || !strings.Contains(out, "--dns-nameserver 0.0.0.0 storage-subnet") {
		t.Errorf("patch --discover does not warn about the subnet's gateway and DNS:\n%s", out)
	}
	out = sh(0, "machinesets", "list")
	if !strings.Contains(out, "attached         attached         0/2") {
		t.Errorf("list after patch:\n%s", out)
	}
	out = sh(0, "machinesets", "rollout")
	if !strings.Contains(out, "ostest-8x2kq-worker-0  2/2 replaced  done") || !strings.Contains(out, "ostest-8x2kq-worker-1  1/1 replaced  done") {
		t.Errorf("rollout:\n%s", out)
	}
	// The first new machine of each set was checked before an old one went.
	if strings.Count(out, "passed its check (no warning events; node IP 10.196.") != 2 || !strings.Contains(out, "on the machine network; an address on storage; VIP address pairs not checked (the server has no port off the storage networks in Neutron); NFS not probed (the manila-setup operator does not run in the cluster))") {
		t.Errorf("rollout without the check of the first new machines:\n%s", out)
	}
	out = sh(0, "machinesets", "list")
	if !strings.Contains(out, "attached         attached         2/2") || !strings.Contains(out, "attached         attached         1/1") {
		t.Errorf("list after rollout:\n%s", out)
	}
	// The new nodes list their storage address after their node IP. Patching again changes
	// nothing, and a set added later is patched: neither takes the storage network for the
	// machines' own and asks for --force.
	if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("ostest-8x2kq", 2, 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out = sh(0, "machinesets", "patch", "--discover", "--security-group", nfs)
	if strings.Count(out, "  unchanged  ") != 2 || strings.Count(out, "  patched  ") != 1 || !strings.Contains(out, "ostest-8x2kq-worker-2") {
		t.Errorf("patch again, with a set added after the rollout:\n%s", out)
	}
}

// renderTerminal replays what a program wrote to a terminal (cursor up, carriage return, clear
// line, newline) and returns the lines left on the screen.
func renderTerminal(out string) []string {
	var lines []string
	row, col := 0, 0
	put := func(r rune) {
		for len(lines) <= row {
			lines = append(lines, "")
		}
		line := []rune(lines[row])
		for len(line) < col {
			line = append(line, ' ')
		}
		if col < len(line) {
			line[col] = r
		} else {
			line = append(line, r)
		}
		lines[row] = string(line)
		col++
	}
	rs := []rune(out)
	for i := 0; i < len(rs); i++ {
		switch r := rs[i]; {
		case r == '\x1b' && i+1 < len(rs) && rs[i+1] == '[':
			j, n := i+2, 0
			for j < len(rs) && rs[j] >= '0' && rs[j] <= '9' {
				n = n*10 + int(rs[j]-'0')
				j++
			}
			if j < len(rs) {
				switch rs[j] {
				case 'A':
					row = max(0, row-max(n, 1))
				case 'K':
					for len(lines) <= row {
						lines = append(lines, "")
					}
					if line := []rune(lines[row]); col < len(line) {
						lines[row] = string(line[:col])
					}
				}
			}
			i = j
		case r == '\r':
			col = 0
		case r == '\n':
			row, col = row+1, 0
		default:
			put(r)
		}
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
