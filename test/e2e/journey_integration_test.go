//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shareaccessrules"
	operatorv1 "github.com/openshift/api/operator/v1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/installconfig"
	"github.com/manila-setup/manila-setup/installconfig/cloudcheck"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/internal/rwxcheck"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/operator/shareclient"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
	"github.com/manila-setup/manila-setup/workers"
)

// TestWholeJourney walks what an administrator and then an application developer do, against
// the loopback OpenStack and a sim cluster shaped like a fresh OpenShift-on-OpenStack install
// whose workers are real servers made by the real Machine API (test/testenv/machineapi), in a
// project of their own beside the cloud's shared storage network:
//
//  1. install time: the install-config is checked with the cloud (no compute pool reaches
//     Manila), patched with the storage network discovery finds and the security group that lets
//     NFS through, and checked again (clean, comments kept);
//  2. Day 2: the worker MachineSet is patched and its Machines rolled, one at a time, until every
//     Machine's server has a port on the storage network (Neutron says so);
//  3. the operator (the real binary, `operator install` then `operator start`) deploys the driver,
//     writes csi-manila-secrets and one StorageClass per Manila share type, and reports healthy;
//  4. the real driver (manila-csi-plugin and csi-provisioner) provisions a ReadWriteMany claim on
//     every generated class as a real Manila share, and deleting the claims deletes the shares.
func TestWholeJourney(t *testing.T) { wholeJourney(t, platform.ModeDriver) }

// TestWholeJourneyBesideThePlatform is the same journey on a cluster whose platform runs its own
// Manila CSI driver operator (the stand-in of testenv.InstallPlatform, which here also writes the
// driver Secret with real credentials, as the platform's operator does): `operator install`
// installs the companion, whose StorageClasses restricted to the machine network the platform's
// driver (the real binaries again) provisions from.
func TestWholeJourneyBesideThePlatform(t *testing.T) { wholeJourney(t, platform.ModeCompanion) }

func wholeJourney(t *testing.T, mode platform.Mode) {
	// The two journeys run side by side: each has a project, a cluster and servers of its own.
	cloud := testenv.NewCloudParallel(t)
	t0 := time.Now()
	companion := mode == platform.ModeCompanion
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	project, storageNet, nfsSG := tenantProject(t, cloud, "e2e")
	cloudsFile, cloudName := project.CloudsFile, ostest.CloudName
	machineNetwork := machineapi.MachineNetwork

	// 1. Install time.
	osc, err := openstack.Connect(ctx, openstack.Config{Cloud: cloudName, CloudsFile: cloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	disc, err := osc.Discover(ctx, openstack.DiscoverOptions{SecurityGroupIDs: []string{nfsSG}})
	if err != nil {
		t.Fatal(err)
	}
	if best := disc.Best(); best == nil || best.Network.ID != storageNet {
		t.Fatalf("discovery found %+v, want the storage network %s", best, storageNet)
	}
	t.Logf("discovered storage network %s (%s): %s", disc.Best().Network.Name, storageNet, strings.Join(disc.Best().Reasons, "; "))

	const icName = "install-config.yaml"
	original, err := os.ReadFile("testdata/install-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	checker := cloudcheck.Checker{Client: osc, File: icName}
	before, err := installconfig.CheckWithCloud(ctx, icName, original, checker)
	if err != nil {
		t.Fatal(err)
	}
	if before.Errors() != 0 || !hasRule(before, cloudcheck.RuleNoManilaNetwork) {
		t.Fatalf("the unpatched install-config: want no errors and a %s warning, got\n%s", cloudcheck.RuleNoManilaNetwork, before.Text(icName))
	}
	f, problems := installconfig.Check(icName, original)
	if problems.Errors() != 0 {
		t.Fatal(problems.Text(icName))
	}
	res, err := installconfig.Patch(f, installconfig.PatchOptions{Networks: []string{storageNet}, SecurityGroups: []string{nfsSG}})
	if err != nil {
		t.Fatal(err)
	}
	after, err := installconfig.CheckWithCloud(ctx, icName, res.Output, checker)
	if err != nil {
		t.Fatal(err)
	}
	// The seeded storage subnet is as Neutron makes one: its gateway and DNS are warned about
	// (attach.Fitness), nothing else.
	if !res.Changed || after.Errors() != 0 || after.Warnings() != 2 || !hasRule(after, attach.FindingDefaultRoute) || !hasRule(after, attach.FindingDNSAnnounced) {
		t.Fatalf("patched install-config (changed %t):\n%s\n%s", res.Changed, res.Output, after.Text(icName))
	}
	if !bytes.Contains(res.Output, []byte("# the tenant subnet")) || !bytes.Contains(res.Output, []byte(storageNet)) || !bytes.Contains(res.Output, []byte(nfsSG)) {
		t.Errorf("patched install-config lost a comment or lacks the IDs:\n%s", res.Output)
	}
	t.Logf("install-config patched:\n%s", installconfig.UnifiedDiff(icName, icName, original, res.Output))

	// 2. Day 2: a cluster installed from that install-config, without the storage network.
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 3})
	cl := machineapi.NewCluster(t, ctx, sim, machineapi.ClusterOptions{CloudsFile: cloudsFile, Cloud: cloudName, Workers: 3, InstallConfig: original})
	t.Logf("installer-shaped cluster with 3 workers up at %s", time.Since(t0).Round(time.Millisecond))
	// Where the driver's Secret lives and who writes it: our operator in driver mode; in
	// companion mode the platform's operator, played here.
	secretNS := operator.DefaultNamespace
	if companion {
		secretNS = operator.PlatformDriverNamespace
		if err := testenv.InstallPlatform(ctx, sim.Config, testenv.PlatformOptions{}); err != nil {
			t.Fatal(err)
		}
		writePlatformDriverSecret(t, ctx, sim, cloudsFile, cloudName)
	}
	if v := readAttachmentViews(t, ctx, buildCLI(t), sim.Kubeconfig, cloudsFile, cloudName, sim, storageNet); !v.agree(3, false) {
		t.Errorf("before the attach, networks discover, machinesets list and the operator disagree or see an attachment: %+v", v)
	}
	mc := machineclient.NewForConfigOrDie(sim.Config)
	results, err := machinesets.Patch(ctx, mc, machinesets.Selection{}, attach.Options{
		Attachment: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{nfsSG}},
		Checker:    attach.NeutronChecker{Client: osc}, By: "manila-setup e2e",
	})
	if err != nil || len(results) != 1 || results[0].Action != attach.ActionPatched {
		t.Fatalf("machinesets.Patch: %v, %+v", err, results)
	}
	t2 := time.Now()
	// With the canary the commands use: the first new machine's node IP (on the machine network of
	// the install-config) and its address on the storage network are checked before the others go.
	// 10 minutes: on a cold machine (a load of 10, builds beside the tests) three replacements,
	// each with its server made and the old one drained and deleted, took more than 5.
	progress, err := machinesets.Rollout(ctx, mc, sim.Client, machinesets.Selection{}, rollout.Options{MaxSurge: 1, PollInterval: 500 * time.Millisecond, Timeout: 10 * time.Minute,
		Canary: workers.NewCanary(ctx, sim.Client, osc), Progress: func(p rollout.SetProgress) {}})
	if err != nil || len(progress) != 1 || progress[0].State != rollout.Done || progress[0].Replaced != 3 {
		t.Fatalf("machinesets.Rollout: %v, %+v", err, progress)
	}
	machines, err := mc.MachineV1beta1().Machines(machineapi.Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.MachineSetLabel + "=" + cl.MachineSet})
	if err != nil {
		t.Fatal(err)
	}
	live, checked := 0, 0
	var serverIDs []string
	for _, m := range machines.Items {
		if m.DeletionTimestamp != nil {
			continue
		}
		live++
		if m.Annotations[rollout.CanaryAnnotation] == rollout.CanaryPassed {
			checked++
		}
		if m.Spec.ProviderID == nil {
			t.Fatalf("Machine %s has no providerID", m.Name)
		}
		serverIDs = append(serverIDs, strings.TrimPrefix(*m.Spec.ProviderID, machineapi.ProviderIDPrefix))
		spec, err := machinesets.DecodeProviderSpec(m.Spec.ProviderSpec.Value.Raw)
		if err != nil || !spec.HasNetwork(storageNet) || !spec.HasSecurityGroup(nfsSG) {
			t.Errorf("Machine %s after the rollout: not on the storage network with the nfs group (%v)", m.Name, err)
		}
	}
	if live != 3 || checked != 1 {
		t.Errorf("%d live worker Machines after the rollout, want 3; %d passed the canary check, want 1", live, checked)
	}
	t.Logf("MachineSet %s patched and its 3 Machines replaced in %s", cl.MachineSet, time.Since(t2).Round(time.Millisecond))
	// Where the workers now mount from: their addresses on the storage network, as Neutron has
	// them (the ports the Machine API made for their servers), which lie in the subnet that
	// holds the export addresses.
	storagePorts, err := osc.Ports(ctx, openstack.PortFilter{NetworkIDs: []string{storageNet}, DeviceIDs: serverIDs})
	if err != nil {
		t.Fatal(err)
	}
	var workerStorageIPs []netip.Addr
	for _, p := range storagePorts {
		workerStorageIPs = append(workerStorageIPs, p.FixedIPs...)
	}
	if len(storagePorts) != 3 || len(workerStorageIPs) != 3 {
		t.Fatalf("the 3 workers have %d ports with %d addresses on the storage network: %+v", len(storagePorts), len(workerStorageIPs), storagePorts)
	}

	// 3. The operator, as the real binary.
	t3 := time.Now()
	cli := buildCLI(t)
	kubeconfig := sim.Kubeconfig
	out, err := exec.CommandContext(ctx, cli, "operator", "install", "--kubeconfig", kubeconfig,
		"--os-cloud", cloudName, "--os-client-config-file", cloudsFile).CombinedOutput()
	if err != nil {
		t.Fatalf("operator install: %v\n%s", err, out)
	}
	names := operator.NamesFor(mode)
	if companion != strings.Contains(string(out), "mode companion:") {
		t.Errorf("operator install chose the wrong mode, want %s:\n%s", mode, out)
	}
	// The operator runs here; the in-cluster Deployment's kwok pod would run nothing. A patch,
	// not an update: the deployment controller writes the object at the same time.
	if _, err := sim.Client.AppsV1().Deployments(names.Namespace).Patch(ctx, names.Operator, types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, cli, kubeconfig, "--mode", string(mode))
	classes := waitStorageClasses(t, ctx, sim, op, secretNS, cloud.Seed.ShareTypes, []string{names.StorageClassPrefix + "cephfs-fast", names.StorageClassPrefix + "default"})
	// Every worker is on the storage network, so the classes admit the storage subnet (where
	// the export addresses are, and the workers mount from), not the machine network.
	storageSubnet := cloud.Seed.Subnets["storage-subnet"].CIDR
	for _, sc := range classes {
		if sc.Parameters["nfs-shareClient"] != storageSubnet || sc.Parameters["csi.storage.k8s.io/provisioner-secret-name"] != operator.DriverSecretName ||
			sc.Parameters["csi.storage.k8s.io/node-stage-secret-namespace"] != secretNS {
			t.Errorf("StorageClass %s parameters %v: want nfs-shareClient %s (the storage subnet; the machine network is %s) and the driver Secret %s/%s",
				sc.Name, sc.Parameters, storageSubnet, machineNetwork, secretNS, operator.DriverSecretName)
		}
		admitsAll(t, "StorageClass "+sc.Name, sc.Parameters["nfs-shareClient"], workerStorageIPs)
	}
	var status []byte
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := op.alive(); err != nil {
			return false, err
		}
		status, err = exec.CommandContext(ctx, cli, "operator", "status", "--kubeconfig", kubeconfig).CombinedOutput()
		return err == nil && storageNetworkReachable(ctx, t, sim), nil
	})
	if err != nil {
		t.Fatalf("operator never healthy with the storage network reachable: %v\n%s\n%s", err, status, op.tail())
	}
	t.Logf("operator healthy in %s:\n$ manila-setup operator status\n%s", time.Since(t3).Round(time.Millisecond), status)
	// The three tools that judge the attachment agree, computed from the same real state.
	if v := readAttachmentViews(t, ctx, cli, kubeconfig, cloudsFile, cloudName, sim, storageNet); !v.agree(3, true) {
		t.Errorf("after the attach, networks discover, machinesets list and the operator disagree: %+v", v)
	}

	// 4. The real driver provisions a claim on every generated class.
	t4 := time.Now()
	drv := testenv.NewCSIController(t, testenv.CSIControllerOptions{Kubeconfig: kubeconfig, ClusterID: cl.InfraID})
	manila, err := testenv.ManilaClientOf(ctx, cloudsFile, cloudName)
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, ctx, sim.Client, "app")
	alive := func() error {
		if err := op.alive(); err != nil {
			return err
		}
		return drv.Alive()
	}
	type claimed struct {
		pvc   *corev1.PersistentVolumeClaim
		pv    *corev1.PersistentVolume
		share string
	}
	var claims []claimed
	for _, sc := range classes {
		pvc, err := sim.Client.CoreV1().PersistentVolumeClaims("app").Create(ctx, rwxClaim("app", "data-"+strings.TrimPrefix(sc.Name, names.StorageClassPrefix), sc.Name, "2Gi"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, claimed{pvc: pvc})
	}
	for i := range claims {
		c := &claims[i]
		c.pv = waitBound(t, ctx, sim.Client, c.pvc, 2*time.Minute, alive)
		shareType := classes[i].Annotations[operator.AnnotationShareType]
		c.share = checkShare(t, ctx, manila, c.pv, shareType, storageSubnet, 2).ID
		// The share's access rules, read back from Manila, admit every worker's storage address.
		shareAdmitsAll(t, ctx, manila, c.share, workerStorageIPs)
		checkVolume(t, c.pv, classes[i].Name, secretNS, operator.DriverSecretName)
		t.Logf("claim %s on %s: Bound, share %s of type %s", c.pvc.Name, classes[i].Name, c.share, shareType)
	}
	t.Logf("%d claims provisioned in %s", len(claims), time.Since(t4).Round(time.Millisecond))
	if !companion {
		// The node side, with the runtime configuration the operator wrote: the mount goes to
		// the export location in the storage network's subnet.
		vc := nodeStagesOnTheStorageNetwork(t, ctx, sim, claims[0].pv, cloud.Seed.Subnets["storage-subnet"].CIDR, "10.0.0.20")
		// And what the plugin would mount, the workers' kernels mount: the data path below.
		network, err := testenv.NetworkClient(ctx, testenv.CloudAdmin)
		if err != nil {
			t.Fatal(err)
		}
		workersWriteOneShare(t, ctx, cloud.NFS(t), network, []netip.Prefix{netip.MustParsePrefix(storageSubnet)}, storagePorts, vc)
	}
	t5 := time.Now()
	for _, c := range claims {
		if err := sim.Client.CoreV1().PersistentVolumeClaims("app").Delete(ctx, c.pvc.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range claims {
		if err := waitGone(ctx, 2*time.Minute, alive, func(ctx context.Context) error {
			_, err := sim.Client.CoreV1().PersistentVolumes().Get(ctx, c.pv.Name, metav1.GetOptions{})
			return err
		}); err != nil {
			t.Fatalf("volume %s not deleted: %v", c.pv.Name, err)
		}
		if err := shareGone(ctx, manila, c.share, time.Minute, alive); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("claims deleted, shares gone in %s", time.Since(t5).Round(time.Millisecond))

	// The wizard's multi-writer check, on the real driver: the volume binds and the writers are
	// scheduled on two nodes; the nodes are kwok's, so it says that it cannot go further and
	// cleans up.
	t6 := time.Now()
	r := rwxcheck.Run(ctx, sim.Client, rwxcheck.Options{StorageClass: names.StorageClassPrefix + "default", Timeout: 2 * time.Minute, Poll: 500 * time.Millisecond})
	t.Logf("multi-writer check in %s: %+v", time.Since(t6).Round(time.Millisecond), r)
	if !r.Simulated || r.OK || r.Nodes[0] == "" || r.Nodes[1] == "" || r.Nodes[0] == r.Nodes[1] || !r.CleanedUp ||
		!strings.Contains(r.Problem, "was provisioned and bound") {
		t.Errorf("multi-writer check on the sim cluster: %+v", r)
	}
	// Its claim went with its namespace; the driver deletes the share before the provisioner
	// removes the volume, so no volume left means no share left behind in Manila.
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		pvs, err := sim.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		return err == nil && len(pvs.Items) == 0, nil
	}); err != nil {
		t.Errorf("the multi-writer check's volume was not deleted: %v", err)
	}
	t.Logf("whole journey %s", time.Since(t0).Round(time.Millisecond))
}

// admitsAll checks that an nfs-shareClient or a share's access rules (comma-separated) admit
// every address.
func admitsAll(t *testing.T, what, value string, addrs []netip.Addr) {
	t.Helper()
	rules, err := shareclient.ParseValue(value)
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	for _, a := range addrs {
		if !slices.ContainsFunc(rules, func(r netip.Prefix) bool { return r.Contains(a) }) {
			t.Errorf("%s (%s) does not admit the worker address %s", what, value, a)
		}
	}
}

// shareAdmitsAll checks that the share's access rules, as Manila has them, admit every address,
// and returns them.
func shareAdmitsAll(t *testing.T, ctx context.Context, manila *gophercloud.ServiceClient, share string, addrs []netip.Addr) []string {
	t.Helper()
	rules, err := shareaccessrules.List(ctx, manila, share).Extract()
	if err != nil {
		t.Fatal(err)
	}
	var admitted []string
	for _, r := range rules {
		admitted = append(admitted, r.AccessTo)
	}
	admitsAll(t, "the access rules of share "+share, strings.Join(admitted, ","), addrs)
	return admitted
}

func hasRule(ps installconfig.Problems, rule string) bool {
	return slices.ContainsFunc(ps, func(p installconfig.Problem) bool { return p.Rule() == rule })
}

// buildCLI builds manila-setup and manila-setup-operator as users run them, once per test
// binary, and returns the CLI's path. The operator is a binary of its own, found next to the CLI
// (as make build puts it).
func buildCLI(t *testing.T) string {
	t.Helper()
	testenv.Command(t, "github.com/manila-setup/manila-setup/cmd/manila-setup-operator", e2eVersion)
	return testenv.Command(t, "github.com/manila-setup/manila-setup/cmd/manila-setup", e2eVersion)
}

// e2eVersion is the version buildCLI stamps into the binaries: the CLI renders the operator
// image of its version.
const e2eVersion = "v0.0.0-e2e"

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.RemoveCommands()
	os.Exit(code)
}

// operatorProcess is `manila-setup operator start` running beside the sim cluster.
type operatorProcess struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startOperator(t *testing.T, cli, kubeconfig string, extra ...string) *operatorProcess {
	t.Helper()
	im := operator.DefaultImages
	return startOperatorWithImages(t, cli, kubeconfig, im, extra...)
}

// startOperatorWithImages is startOperator with the operand images of im in its environment, as
// its Deployment gives them.
func startOperatorWithImages(t *testing.T, cli, kubeconfig string, im operator.Images, extra ...string) *operatorProcess {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "operator.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cli, append([]string{"operator", "start", "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--health-address", "", "--resync", "10s"}, extra...)...)
	cmd.Env = os.Environ()
	for k, p := range im.ImageEnv() {
		cmd.Env = append(cmd.Env, k+"="+*p)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &operatorProcess{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Log("operator log:\n" + p.tail())
		}
	})
	return p
}

// stop ends the operator as its pod's replacement would: SIGTERM, then SIGKILL after 15 s.
func (p *operatorProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *operatorProcess) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("the operator exited:\n%s", p.tail())
	default:
		return nil
	}
}

func (p *operatorProcess) tail() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// nodeStage runs the real Manila node plugin with the runtime configuration config and has it
// stage the volume with its node stage secret, returning what it hands the NFS plugin (server,
// share), or its error with the end of its log.
func nodeStage(t *testing.T, ctx context.Context, sim *testenv.SimCluster, pv *corev1.PersistentVolume, config string) (map[string]string, error) {
	t.Helper()
	ref := pv.Spec.CSI.NodeStageSecretRef
	if ref == nil {
		t.Fatalf("volume %s has no node stage secret", pv.Name)
	}
	secret, err := sim.Client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for k, v := range secret.Data {
		secrets[k] = string(v)
	}
	dir, err := os.MkdirTemp("", "node-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	node, err := testenv.StartCSINode(ctx, testenv.CSINodeOptions{Dir: dir, RuntimeConfig: config})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Stop()
	vc, err := node.Stage(ctx, pv, secrets)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, node.Tail(10))
	}
	return vc, nil
}

// waitStorageClasses waits for the operator's StorageClasses (want, sorted) and the driver
// Secret, and returns the classes in that order.
//
// Only the classes of the cloud's seeded share types count: the packages' tests share one cloud,
// and a share type another test creates and deletes meanwhile gets a class the operator keeps
// (a class is never deleted when its share type goes).
func waitStorageClasses(t *testing.T, ctx context.Context, sim *testenv.SimCluster, op *operatorProcess, secretNS string, seeded map[string]string, want []string) []storagev1.StorageClass {
	t.Helper()
	var got []storagev1.StorageClass
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := op.alive(); err != nil {
			return false, err
		}
		if _, err := sim.Client.CoreV1().Secrets(secretNS).Get(ctx, operator.DriverSecretName, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		list, err := sim.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: operator.LabelManagedBy + "=" + operator.ManagedByValue})
		if err != nil {
			return false, err
		}
		got = got[:0]
		for _, sc := range list.Items {
			if _, ok := seeded[sc.Annotations[operator.AnnotationShareType]]; ok {
				got = append(got, sc)
			}
		}
		slices.SortFunc(got, func(a, b storagev1.StorageClass) int { return strings.Compare(a.Name, b.Name) })
		var names []string
		for _, sc := range got {
			names = append(names, sc.Name)
		}
		return slices.Equal(names, want), nil
	})
	if err != nil {
		var names []string
		for _, sc := range got {
			names = append(names, sc.Name)
		}
		t.Fatalf("StorageClasses %v and Secret %s, want classes %v: %v\n%s", names, operator.DriverSecretName, want, err, op.tail())
	}
	return got
}

// storageNetworkReachable reads the operator's StorageNetworkReachable condition: on the
// companion's ManilaCompanion when there is one, else on the ClusterCSIDriver.
func storageNetworkReachable(ctx context.Context, t *testing.T, sim *testenv.SimCluster) bool {
	status, _, _ := conditionOf(ctx, t, sim, operator.ConditionStorageNetworkReachable)
	return status == operatorv1.ConditionTrue
}

// conditionOf reads one of the operator's conditions (status, reason, message; all "" when it
// is not there): on the companion's ManilaCompanion when there is one, else on the
// ClusterCSIDriver.
func conditionOf(ctx context.Context, t *testing.T, sim *testenv.SimCluster, condition string) (operatorv1.ConditionStatus, string, string) {
	dyn, err := dynamic.NewForConfig(sim.Config)
	if err != nil {
		t.Fatal(err)
	}
	u, err := dyn.Resource(schema.GroupVersionResource{Group: operator.CompanionGroup, Version: operator.CompanionVersion, Resource: operator.CompanionResource}).
		Get(ctx, operator.CompanionName, metav1.GetOptions{})
	if err != nil {
		u, err = dyn.Resource(operatorv1.GroupVersion.WithResource("clustercsidrivers")).Get(ctx, operator.DriverName, metav1.GetOptions{})
	}
	if err != nil {
		return "", "", ""
	}
	var d operatorv1.ClusterCSIDriver // the ManilaCompanion has its status shape
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Status.Conditions {
		if c.Type == condition {
			return c.Status, c.Reason, c.Message
		}
	}
	return "", "", ""
}

// writePlatformDriverSecret plays the platform's Manila operator, which turns the cluster's
// cloud credentials into the driver's Secret csi-manila-secrets in its driver's namespace: the
// Secret the platform's StorageClasses, and the companion's, name.
func writePlatformDriverSecret(t *testing.T, ctx context.Context, sim *testenv.SimCluster, cloudsFile, cloudName string) {
	t.Helper()
	raw, err := os.ReadFile(cloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := operator.ParseCredentials(raw, cloudName, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.Client.CoreV1().Secrets(operator.PlatformDriverNamespace).Get(ctx, operator.DriverSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Data, s.StringData = creds.DriverSecretData(), nil
	if _, err := sim.Client.CoreV1().Secrets(operator.PlatformDriverNamespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: "csi-operator"}); err != nil {
		t.Fatal(err)
	}
}

// nodeStagesOnTheStorageNetwork runs the real node plugin with the runtime configuration the
// operator wrote (ConfigMap manila-csi-driver-runtime-config, as the node DaemonSet mounts it)
// and stages pv the way the kubelet does, with the node stage Secret the StorageClass names: the
// export location forwarded to the NFS plugin must be in the storage subnet. Two more
// configurations show that the plugin follows the file: one naming the second export address
// gets that address, one matching no export fails the stage. It returns what the plugin hands
// the NFS plugin with the operator's configuration (server, share).
func nodeStagesOnTheStorageNetwork(t *testing.T, ctx context.Context, sim *testenv.SimCluster, pv *corev1.PersistentVolume, storageSubnet, secondExport string) map[string]string {
	t.Helper()
	cm, err := sim.Client.CoreV1().ConfigMaps(operator.DefaultNamespace).Get(ctx, "manila-csi-driver-runtime-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	written := cm.Data["runtimeconfig.json"]
	var conf struct {
		NFS struct {
			MatchExportLocationAddress string `json:"matchExportLocationAddress"`
		} `json:"nfs"`
	}
	if err := json.Unmarshal([]byte(written), &conf); err != nil || conf.NFS.MatchExportLocationAddress != storageSubnet {
		t.Fatalf("the operator's runtime configuration %q: want nfs.matchExportLocationAddress %s (%v)", written, storageSubnet, err)
	}
	_, subnet, err := net.ParseCIDR(storageSubnet)
	if err != nil {
		t.Fatal(err)
	}
	stage := func(config string) (map[string]string, error) { return nodeStage(t, ctx, sim, pv, config) }
	vc, err := stage(written)
	if err != nil {
		t.Fatalf("NodeStageVolume with the operator's runtime configuration: %v", err)
	}
	server := net.ParseIP(vc["server"])
	if server == nil || !subnet.Contains(server) || vc["share"] == "" {
		t.Errorf("with the operator's runtime configuration the plugin mounts %v, want an export in %s", vc, storageSubnet)
	}
	t.Logf("node plugin, operator's runtime configuration %s: mounts %s:%s", written, vc["server"], vc["share"])

	// A share with a second export in the subnet: a configuration naming it mounts it.
	if secondExport != "" {
		if vc, err := stage(fmt.Sprintf(`{"nfs":{"matchExportLocationAddress":"%s/32"}}`, secondExport)); err != nil || vc["server"] != secondExport {
			t.Errorf("a configuration naming the second export: %v, %v (want server %s)", vc, err, secondExport)
		}
	}
	if vc, err := stage(`{"nfs":{"matchExportLocationAddress":"192.0.2.0/24"}}`); err == nil {
		t.Errorf("a configuration matching no export staged %v; want an error", vc)
	}
	return vc
}
