//go:build integration

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestMachineSetsRemoveRollout goes there and back on a sim cluster whose Machine API stand-in
// gives each server real Neutron ports: a network added by hand (no record), the storage network
// attached and rolled with patch --rollout, then patch --remove --rollout, refused while a pod
// on a node of the set uses a Manila volume (naming the pod, the claim and the node), and with
// --force rolled through: the new Machines' servers have no port on the storage network and keep
// the one on the hand-added network; the canary checked that; a second removal is unchanged.
func TestMachineSetsRemoveRollout(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "detach")
	t.Setenv("OS_CLIENT_CONFIG_FILE", p.CloudsFile)
	t.Setenv("OS_CLOUD", ostest.CloudName)
	storage := p.CreateNetwork("detach-storage", "10.77.0.0/24")
	hand := p.CreateNetwork("detach-hand", "10.78.0.0/24")

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const set = "ostest-8x2kq-worker-0"
	c, mc, _ := canaryCluster(t, ctx, p.CloudsFile, ostest.CloudName, 2, machinectl.NodeIPRule{})
	cli := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, args...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		return out + errOut
	}
	rollFlags := []string{"--poll-interval", "100ms", "--timeout", "2m"}
	// The stand-in's servers have no primary port carrying the VIPs (the cluster network is not
	// in the cloud): without VIPs in the install-config the canary does not look for them.
	noVIPs := strings.Split(machinectl.DefaultInstallConfig, "    apiVIPs:")[0]
	cm, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "cluster-config-v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["install-config"] = noVIPs
	if _, err := c.Client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The user's own network: added, its record taken away, so nothing says it is ours.
	cli(0, "machinesets", "patch", "--network", hand.ID, "--force")
	unrecord := []byte(`{"metadata":{"annotations":{"` + attach.Annotation + `":null}}}`)
	if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Patch(ctx, set, types.MergePatchType, unrecord, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// The storage network, attached and rolled in one command.
	out := cli(0, append([]string{"machinesets", "patch", "--network", storage.ID, "--force", "--rollout"}, rollFlags...)...)
	if !strings.Contains(out, "added network "+storage.ID) || !strings.Contains(out, "2/2 replaced  done") {
		t.Fatalf("patch --rollout:\n%s", out)
	}
	neutron, err := openstack.Connect(ctx, openstack.Config{Cloud: ostest.CloudName, CloudsFile: p.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	attached := liveMachines(t, ctx, mc, set)
	for _, m := range attached {
		checkServerNetworks(t, ctx, neutron, m, []string{storage.ID, hand.ID}, nil)
	}

	// A pod on a node of the set uses a Manila volume: the removal's rollout is refused.
	node := attached[0].Status.NodeRef.Name
	manilaVolumeInUse(t, ctx, c.Client, node)
	before, _ := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, set, metav1.GetOptions{})
	out = cli(exitInvalid, append([]string{"machinesets", "patch", "--remove", "--rollout"}, rollFlags...)...)
	for _, want := range []string{"refusing to replace the machines of 1 node(s)", "pod default/app on node " + node, "claim default/data", "PersistentVolume manila-pv", "--force", "nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("refusal does not say %q:\n%s", want, out)
		}
	}
	after, _ := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, set, metav1.GetOptions{})
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the refused removal changed MachineSet %s", set)
	}
	// The rollout command refuses the same once the template has lost the network.
	out = cli(0, "machinesets", "patch", "--remove", "--dry-run")
	if !strings.Contains(out, "would-patch  removed network "+storage.ID) || !strings.Contains(out, "-  uuid: "+storage.ID) || strings.Contains(out, "-  uuid: "+hand.ID) {
		t.Errorf("patch --remove --dry-run:\n%s", out)
	}

	// --force: removed and rolled; the canary checks the first new server has no storage port.
	code, stdout, stderr := runCLI(t, append([]string{"machinesets", "patch", "--remove", "--rollout", "--force", "-o", "json"}, rollFlags...)...)
	if code != 0 || !strings.Contains(stderr, "warning: --force: replacing the machine of node "+node) || !strings.Contains(stderr, "no port on the removed networks") {
		t.Fatalf("patch --remove --rollout --force: exit %d\n%s%s", code, stdout, stderr)
	}
	var report struct {
		Results []attach.Result       `json:"results"`
		Rollout []rollout.SetProgress `json:"rollout"`
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout)
	}
	if len(report.Results) != 1 || strings.Join(report.Results[0].RemovedNetworks, ",") != storage.ID || report.Rollout[0].State != rollout.Done {
		t.Errorf("patch --remove --rollout -o json: %+v", report)
	}
	passed := 0
	for _, m := range liveMachines(t, ctx, mc, set) {
		for _, o := range attached {
			if m.Name == o.Name {
				t.Errorf("Machine %s, made with the storage network, was not replaced", m.Name)
			}
		}
		checkServerNetworks(t, ctx, neutron, m, []string{hand.ID}, []string{storage.ID})
		if m.Annotations[rollout.CanaryAnnotation] == rollout.CanaryPassed {
			passed++
		}
	}
	if passed != 1 {
		t.Errorf("%d Machines passed the canary, want 1", passed)
	}
	ms, _ := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, set, metav1.GetOptions{})
	if _, ok := ms.Annotations[attach.Annotation]; ok {
		t.Errorf("the record is still there: %v", ms.Annotations)
	}

	// Again: nothing recorded, nothing removed, the hand-added network kept.
	out = cli(0, "machinesets", "patch", "--remove")
	if !strings.Contains(out, set+"  unchanged  no attachment record") {
		t.Errorf("second removal:\n%s", out)
	}
	// --network naming the user's network: refused, naming the flag and the value.
	cli(0, "machinesets", "patch", "--network", storage.ID, "--force")
	out = cli(exitInvalid, "machinesets", "patch", "--remove", "--network", hand.ID)
	if !strings.Contains(out, `--network[0]: Invalid value: "`+hand.ID+`"`) || !strings.Contains(out, "not attached by manila-setup") {
		t.Errorf("--remove --network of the user's:\n%s", out)
	}
}

// checkServerNetworks checks, in Neutron, that a Machine's server has a port on each of want
// and none on each of gone.
func checkServerNetworks(t *testing.T, ctx context.Context, neutron *openstack.Client, m machinev1beta1.Machine, want, gone []string) {
	t.Helper()
	ports, err := neutron.ServerPorts(ctx, string(m.UID))
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]bool{}
	for _, p := range ports {
		on[p.NetworkID] = true
	}
	for _, id := range want {
		if !on[id] {
			t.Errorf("Machine %s: no port on network %s (ports %+v)", m.Name, id, ports)
		}
	}
	for _, id := range gone {
		if on[id] {
			t.Errorf("Machine %s: still a port on network %s", m.Name, id)
		}
	}
}

// manilaVolumeInUse makes a PersistentVolume of the Manila driver, bound to claim default/data,
// and pod default/app on node using it.
func manilaVolumeInUse(t *testing.T, ctx context.Context, kc kubernetes.Interface, node string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "manila-pv"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: attach.ManilaDriver, VolumeHandle: "share-1"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: "data"},
		},
	}
	if _, err := kc.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
			Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
	}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestMachineSetsRemoveFile: the file form, with no cluster: a MachineSet file with a network the
// user added by hand gets the storage network with -f --in-place, then patch --remove -f
// --in-place gives the file back byte for byte (the hand-added network kept), and a second
// removal writes nothing.
func TestMachineSetsRemoveFile(t *testing.T) {
	t.Setenv("OS_CLOUD", "")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	const hand = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	src, err := os.ReadFile("../../machinesets/testdata/corpus/installer-default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(src), "          networks:\n", "          networks:\n          - uuid: "+hand+" # added by hand\n", 1)
	file := filepath.Join(t.TempDir(), "machinesets.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"machinesets", "patch", "-f", file}, args...)...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out + errOut
	}
	run("--network", cliStorageNet, "--security-group", cliStorageSG, "--in-place")
	out := run("--remove", "--dry-run")
	if !strings.Contains(out, "removed network "+cliStorageNet+", security group "+cliStorageSG) || !strings.Contains(out, "-          - uuid: "+cliStorageNet) || strings.Contains(out, "-          - uuid: "+hand) {
		t.Errorf("--remove --dry-run:\n%s", out)
	}
	run("--remove", "--in-place")
	if b, _ := os.ReadFile(file); string(b) != doc {
		t.Errorf("attached then removed is not the original:\n%s", b)
	}
	if out := run("--remove", "--in-place"); !strings.Contains(out, "unchanged, not written") {
		t.Errorf("second removal:\n%s", out)
	}
}
