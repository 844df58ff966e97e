//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// previousOperands is the operand table of the release before this one: what a cluster
// installed then runs, and what `operator install` of this build upgrades.
var previousOperands = map[string]string{
	"DRIVER_IMAGE":                "registry.k8s.io/provider-os/manila-csi-plugin:v1.34.1",
	"NFS_DRIVER_IMAGE":            "registry.k8s.io/sig-storage/nfsplugin:v4.10.0",
	"PROVISIONER_IMAGE":           "registry.k8s.io/sig-storage/csi-provisioner:v5.2.0",
	"SNAPSHOTTER_IMAGE":           "registry.k8s.io/sig-storage/csi-snapshotter:v8.2.1",
	"RESIZER_IMAGE":               "registry.k8s.io/sig-storage/csi-resizer:v1.13.2",
	"LIVENESS_PROBE_IMAGE":        "registry.k8s.io/sig-storage/livenessprobe:v2.15.0",
	"NODE_DRIVER_REGISTRAR_IMAGE": "registry.k8s.io/sig-storage/csi-node-driver-registrar:v2.13.0",
	"KUBE_RBAC_PROXY_IMAGE":       "quay.io/brancz/kube-rbac-proxy:v0.19.0",
}

const previousOperatorImage = "quay.io/example/manila-setup-operator:v0.3.0"

// TestUpgradeKeepsVolumes is `operator install` of this build over an install of the previous
// release, with a volume in use: the operator's Deployment takes this build's images, the
// driver's workloads roll to this table's (the node DaemonSets never with all their pods
// unavailable, and never more at once than their maxUnavailable), the StorageClasses stay (same
// objects: their parameters did not change), the bound volume stays Bound and grows when asked,
// and a new claim is provisioned by the real driver. It reports the writes the upgrade took.
func TestUpgradeKeepsVolumes(t *testing.T) {
	cloud := testenv.NewCloud(t)
	cli := buildCLI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	// Three control-plane nodes, as OpenShift's: the controller's two replicas repel each other.
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 3})
	cl, err := machinectl.InstallerShaped(ctx, sim, machinectl.ClusterOptions{InfraID: "ostest-upgr", Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	kc := sim.Client
	ns := operator.DefaultNamespace

	// 1. The previous release, installed and running, its driver deployed.
	var previous operator.Images
	for env, p := range previous.ImageEnv() {
		*p = previousOperands[env]
	}
	installWith(t, ctx, cli, cloud, sim.Kubeconfig, append(imageEnv(previous), "OPERATOR_IMAGE="+previousOperatorImage))
	// The operator runs in the test, its Deployment scaled to 0 under install's own field manager:
	// the upgrade's install then takes the field back. (Scaled by anyone else, install stops and
	// names the field: TestInstallKnowsThePlatform.)
	if _, err := kc.AppsV1().Deployments(ns).Patch(ctx, operator.OperatorName, types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil {
		t.Fatal(err)
	}
	op := startOperatorWithImages(t, cli, sim.Kubeconfig, previous, "--mode", string(platform.ModeDriver))
	classes := waitStorageClasses(t, ctx, sim, op, ns, cloud.Seed.ShareTypes, []string{"csi-manila-cephfs-fast", "csi-manila-default"})
	waitWorkloadsAt(t, ctx, sim, op, previous)
	classUIDs := map[string]string{}
	for _, c := range classes {
		classUIDs[c.Name] = string(c.UID)
	}

	// A volume of the previous install, provisioned by the real driver, in use.
	csi, err := testenv.StartCSIController(ctx, testenv.CSIControllerOptions{Kubeconfig: sim.Kubeconfig, ClusterID: "ostest-upgr", Resizer: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(csi.Stop)
	createNamespace(t, ctx, kc, "app")
	before, err := kc.CoreV1().PersistentVolumeClaims("app").Create(ctx, rwxClaim("app", "before", "csi-manila-default", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := waitBound(t, ctx, kc, before, 2*time.Minute, csi.Alive)

	// 2. The upgrade: this build's install, then this build's operator (as its Deployment's new
	// pod would replace the old one), while the node DaemonSets are watched.
	watch := watchDaemonSets(ctx, sim, operator.NodeDaemonSetName, operator.NFSNodeDaemonSetName)
	t0 := time.Now()
	im := operator.DefaultImages
	installWith(t, ctx, cli, cloud, sim.Kubeconfig, imageEnv(im))
	d, err := kc.AppsV1().Deployments(ns).Get(ctx, operator.OperatorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got == previousOperatorImage {
		t.Errorf("operator Deployment still runs %s after the upgrade", got)
	}
	if env := containerEnv(d.Spec.Template.Spec.Containers[0]); env["DRIVER_IMAGE"] != im.Driver {
		t.Errorf("operator Deployment's DRIVER_IMAGE = %q, want %q", env["DRIVER_IMAGE"], im.Driver)
	}
	op.stop()
	op = startOperatorWithImages(t, cli, sim.Kubeconfig, im, "--mode", string(platform.ModeDriver))
	waitWorkloadsAt(t, ctx, sim, op, im)
	upgraded := time.Since(t0)
	stats := watch.stop()

	// 3. Nothing was lost on the way.
	for name, s := range stats {
		t.Logf("DaemonSet %s during the upgrade: %d desired, at most %d unavailable at once (maxUnavailable %s)", name, s.desired, s.maxUnavailable, s.allowed)
		if s.desired == 0 || s.maxUnavailable >= s.desired {
			t.Errorf("DaemonSet %s had all its %d pods unavailable at once", name, s.desired)
		}
		// The promise of docs/operator.md ("Upgrades"), not only the object's own setting: a node
		// plugin DaemonSet rolls 10% of the nodes at a time, at least one.
		documented, _ := intstr.GetScaledValueFromIntOrPercent(ptr.To(intstr.FromString("10%")), s.desired, true)
		if documented < 1 {
			documented = 1
		}
		if s.maxUnavailable > s.allowedPods || s.maxUnavailable > documented {
			t.Errorf("DaemonSet %s had %d pods unavailable at once: more than 10%% of %d (%d), or than its maxUnavailable %s (%d)",
				name, s.maxUnavailable, s.desired, documented, s.allowed, s.allowedPods)
		}
	}
	for name, uid := range classUIDs {
		sc, err := kc.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil || string(sc.UID) != uid {
			t.Errorf("StorageClass %s was replaced or removed by the upgrade (%v): its parameters did not change", name, err)
		}
	}
	got, err := kc.CoreV1().PersistentVolumeClaims("app").Get(ctx, before.Name, metav1.GetOptions{})
	if err != nil || got.Status.Phase != "Bound" || got.Spec.VolumeName != pv.Name {
		t.Errorf("claim %s after the upgrade: %v %+v, want Bound to %s", before.Name, err, got.Status, pv.Name)
	}
	after, err := kc.CoreV1().PersistentVolumeClaims("app").Create(ctx, rwxClaim("app", "after", "csi-manila-default", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitBound(t, ctx, kc, after, 2*time.Minute, csi.Alive)
	expandAfterUpgrade(t, ctx, sim, csi, before.Name, pv.Spec.CSI.VolumeHandle)

	// 4. What the upgrade wrote, by whom.
	writes, err := sim.Writes(func(w testenv.AuditWrite) bool { return !w.Time.Before(t0) })
	if err != nil {
		t.Fatal(err)
	}
	byAgent := map[string]int{}
	for _, w := range writes {
		agent, _, _ := strings.Cut(w.UserAgent, "/")
		byAgent[agent]++
	}
	t.Logf("upgrade converged in %s; writes since operator install: %s", upgraded.Round(100*time.Millisecond), countsOf(byAgent))
	ours := 0
	for _, a := range []string{"manila-setup", "manila-setup-operator"} {
		ours += byAgent[a]
	}
	if ours == 0 {
		t.Error("the upgrade wrote nothing: the audit log did not see it")
	}
}

// expandAfterUpgrade asks 2Gi of the claim made before the upgrade, and waits until the real
// driver (csi-resizer, then manila-csi-plugin's ControllerExpandVolume, with the StorageClass's
// expand Secret) has grown its share in Manila and the claim says so.
func expandAfterUpgrade(t *testing.T, ctx context.Context, sim *testenv.SimCluster, csi *testenv.CSIController, claim, shareID string) {
	t.Helper()
	kc := sim.Client
	if _, err := kc.CoreV1().PersistentVolumeClaims("app").Patch(ctx, claim, types.MergePatchType,
		[]byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	manila := manilaClient(t, ctx, testenv.CloudDemo)
	var size int
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := csi.Alive(); err != nil {
			return false, err
		}
		pvc, err := kc.CoreV1().PersistentVolumeClaims("app").Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		got := pvc.Status.Capacity[corev1.ResourceStorage]
		share, err := shares.Get(ctx, manila, shareID).Extract()
		if err != nil {
			return false, nil
		}
		size = share.Size
		return got.String() == "2Gi" && size == 2, nil
	})
	if err != nil {
		t.Fatalf("claim %s did not grow to 2Gi after the upgrade (share %s is %d GiB): %v\n%s\n%s", claim, shareID, size, err,
			events(ctx, kc, "app", claim), csi.Tail(30))
	}
	t.Logf("claim %s of the previous install grew to 2Gi, its share %s too", claim, shareID)
}

// installWith runs `operator install` with env added to the test's environment.
func installWith(t *testing.T, ctx context.Context, cli string, cloud *testenv.Cloud, kubeconfig string, env []string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, cli, "operator", "install", "--kubeconfig", kubeconfig,
		"--os-cloud", testenv.CloudDemo, "--os-client-config-file", cloud.CloudsFile)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("operator install: %v\n%s", err, out)
	}
}

func imageEnv(im operator.Images) []string {
	var env []string
	for k, p := range im.ImageEnv() {
		env = append(env, k+"="+*p)
	}
	return env
}

func containerEnv(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	return env
}

// waitWorkloadsAt waits until the driver's Deployment and DaemonSets run the images of im and
// their rollout is over: every pod updated and available.
func waitWorkloadsAt(t *testing.T, ctx context.Context, sim *testenv.SimCluster, op *operatorProcess, im operator.Images) {
	t.Helper()
	kc := sim.Client
	ns := operator.DefaultNamespace
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := op.alive(); err != nil {
			return false, err
		}
		d, err := kc.AppsV1().Deployments(ns).Get(ctx, operator.ControllerDeploymentName, metav1.GetOptions{})
		if err != nil {
			if ctx.Err() == nil {
				last = err.Error()
			}
			return false, nil
		}
		if img := imageOf(d.Spec.Template.Spec.Containers, "csi-driver"); img != im.Driver {
			last = fmt.Sprintf("Deployment %s: csi-driver %s", d.Name, img)
			return false, nil
		}
		want := *d.Spec.Replicas
		if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != want || d.Status.AvailableReplicas != want || d.Status.Replicas != want {
			last = fmt.Sprintf("Deployment %s: %+v", d.Name, d.Status)
			return false, nil
		}
		for _, name := range []string{operator.NodeDaemonSetName, operator.NFSNodeDaemonSetName} {
			ds, err := kc.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				if ctx.Err() == nil {
					last = err.Error()
				}
				return false, nil
			}
			wantImage := im.Driver
			if name == operator.NFSNodeDaemonSetName {
				wantImage = im.NFSDriver
			}
			if img := ds.Spec.Template.Spec.Containers[0].Image; img != wantImage {
				last = fmt.Sprintf("DaemonSet %s: %s", name, img)
				return false, nil
			}
			s := ds.Status
			if s.ObservedGeneration < ds.Generation || s.DesiredNumberScheduled == 0 || s.UpdatedNumberScheduled != s.DesiredNumberScheduled || s.NumberAvailable != s.DesiredNumberScheduled {
				last = fmt.Sprintf("DaemonSet %s: %+v", name, s)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the driver's workloads did not roll to %s: %v (last: %s)\n%s", im.Driver, err, last, op.tail())
	}
}

func imageOf(containers []corev1.Container, name string) string {
	for _, c := range containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// daemonSetStats is what a DaemonSet went through while it was watched.
type daemonSetStats struct {
	desired, maxUnavailable, allowedPods int
	allowed                              string
}

type daemonSetWatch struct {
	stop func() map[string]daemonSetStats
}

// watchDaemonSets polls the DaemonSets every 50 ms until stop, recording the most pods each had
// unavailable at once.
func watchDaemonSets(ctx context.Context, sim *testenv.SimCluster, names ...string) daemonSetWatch {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	stats := map[string]daemonSetStats{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			for _, name := range names {
				ds, err := sim.Client.AppsV1().DaemonSets(operator.DefaultNamespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					continue
				}
				mu.Lock()
				s := stats[name]
				s.desired = int(ds.Status.DesiredNumberScheduled)
				unavailable := int(ds.Status.DesiredNumberScheduled - ds.Status.NumberAvailable)
				if unavailable > s.maxUnavailable {
					s.maxUnavailable = unavailable
				}
				s.allowed, s.allowedPods = maxUnavailableOf(ds)
				stats[name] = s
				mu.Unlock()
			}
			return false, nil
		})
	}()
	return daemonSetWatch{stop: func() map[string]daemonSetStats {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return stats
	}}
}

// maxUnavailableOf is the DaemonSet's maxUnavailable, as written and in pods (the DaemonSet
// controller rounds a percentage up, and allows one when it comes to 0).
func maxUnavailableOf(ds *appsv1.DaemonSet) (string, int) {
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil {
		return "1 (default)", 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(ds.Status.DesiredNumberScheduled), true)
	if err != nil || n < 1 {
		n = 1
	}
	return ru.MaxUnavailable.String(), n
}

func countsOf(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
