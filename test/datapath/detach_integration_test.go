//go:build integration

package datapath

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
)

// TestDetachWithAMountedPod follows one worker of a cluster whose Machines are Nova servers made
// by the real Machine API, each server's body a guest node (a real kernel and kubelet with the
// server's ports), through what a user does to take the storage network off again:
//   - attached (machinesets patch --rollout), the new worker's pod mounts the claim and writes;
//   - patch --remove --rollout is refused while that pod uses the volume, naming it, and
//     nothing is replaced: the pod writes on;
//   - with --force, the worker is replaced by one without a storage port: the pod is evicted
//     (its last line stays in the share), and its replacement on the new worker cannot mount:
//     the kubelet reports the mount failing, and diagnose names the missing storage port.
func TestDetachWithAMountedPod(t *testing.T) {
	cloud := testenv.NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c := newClients(t, ctx, cloud)
	nfs := cloud.NFS(t)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{APIServer: testenv.APIServerOptions{GuestNodes: true}})
	k := sim.Client

	clients, err := machineapi.Connect(ctx, cloud.CloudsFile, testenv.CloudDemo)
	if err != nil {
		t.Fatal(err)
	}
	// Two at once: during a rollout the old worker and its replacement both run. Unattached:
	// the worker without a storage port is a real one too, so that its pod fails as on a cloud.
	gw, err := machineapi.NewGuestWorkers(ctx, sim, cloud, clients, machineapi.GuestWorkersOptions{
		Max: 2, Unattached: true, ShellImage: shellImage, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Stop)
	cl := machineapi.NewCluster(t, ctx, sim, machineapi.ClusterOptions{CloudsFile: cloud.CloudsFile, Workers: 1, Bodies: gw})
	if ready := gw.Ready(); len(ready) != 1 || ready[0].StorageIP != "" {
		t.Fatalf("before the attach: guest workers %+v, want one without a storage address", ready)
	}

	storageSubnet := deployNodeSide(t, ctx, sim, cloud, driverImages())
	sc, _ := deployControllerAndClass(t, ctx, sim, cloud, storageSubnet)

	cli := func(want int, args ...string) string {
		t.Helper()
		bin := testenv.Command(t, "github.com/manila-setup/manila-setup/cmd/manila-setup", "")
		cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig=" + sim.Kubeconfig, "--os-client-config-file=" + cloud.CloudsFile, "--os-cloud=" + testenv.CloudDemo}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("manila-setup %s: %v", strings.Join(args, " "), err)
		}
		if code != want {
			t.Fatalf("manila-setup %s: exit %d, want %d\n%s\nmachine-api-openstack log:\n%s", strings.Join(args, " "), code, want, out.String(), cl.Log(20))
		}
		return out.String()
	}
	roll := []string{"--poll-interval", "1s", "--timeout", "10m"}

	// Attached: the replacement worker boots with its storage port.
	start := time.Now()
	storage, group := cloud.Seed.Networks["storage"], cloud.Seed.SecurityGroups["nfs"]
	cli(0, append([]string{"machinesets", "patch", "--network", storage, "--security-group", group, "--rollout"}, roll...)...)
	t.Logf("attached and rolled in %s", time.Since(start).Round(time.Second))
	attached := waitGuestWorker(t, ctx, gw, func(w machineapi.GuestWorker) bool { return w.StorageIP != "" })

	// A Deployment's pod on it writes to a claim of the class.
	const ns = "detach"
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &sc.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := k.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "writer"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "writer", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"node-role.kubernetes.io/worker": ""},
					Containers: []corev1.Container{{
						Name: "writer", Image: shellImage, ImagePullPolicy: corev1.PullNever,
						Command:      []string{"sh", "-c", `i=0; while :; do i=$((i+1)); echo "$(hostname) line $i" >>/mnt/data/log; sleep 1; done`},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/mnt/data"}},
					}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}},
					TerminationGracePeriodSeconds: new(int64),
				},
			},
		},
	}
	*deploy.Spec.Replicas = 1
	if _, err := k.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := waitPod(t, ctx, sim, ns, func(p corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if first.Spec.NodeName != attached.Name {
		t.Fatalf("the writer runs on %s, want the attached worker %s", first.Spec.NodeName, attached.Name)
	}
	lines := func(pod string) int {
		t.Helper()
		out, err := execIn(ctx, sim, ns, pod, "sh", "-c", "wc -l </mnt/data/log")
		if err != nil {
			t.Fatalf("%s: counting its lines: %v", pod, err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(out))
		return n
	}
	var before int
	if !eventually(ctx, time.Minute, func() bool { before = lines(first.Name); return before > 0 }) {
		t.Fatalf("the writer %s on %s wrote nothing", first.Name, attached.Name)
	}

	// Refused while the pod uses the volume, naming it; nothing replaced, the pod writes on.
	out := cli(1, append([]string{"machinesets", "patch", "--remove", "--rollout"}, roll...)...)
	if !strings.Contains(out, "refusing to replace the machines of 1 node(s) while pods on them use Manila volumes") ||
		!strings.Contains(out, ns+"/"+first.Name) || !strings.Contains(out, "--force") {
		t.Errorf("patch --remove --rollout with a mounted pod: want a refusal naming %s/%s and --force:\n%s", ns, first.Name, out)
	}
	t.Logf("patch --remove --rollout, refused:\n%s", out)
	if w := gw.Ready(); len(w) != 1 || w[0].Name != attached.Name {
		t.Errorf("after the refusal the guest workers are %v, want %s alone", w, attached.Name)
	}
	if !eventually(ctx, 30*time.Second, func() bool { return lines(first.Name) > before }) {
		t.Errorf("the writer %s stopped writing after the refused removal", first.Name)
	}

	// --force: the worker is replaced by one without a storage port. The pod is evicted by the
	// drain; the Deployment's new pod lands on the new worker and cannot mount.
	start = time.Now()
	out = cli(0, append([]string{"machinesets", "patch", "--remove", "--rollout", "--force"}, roll...)...)
	t.Logf("patch --remove --rollout --force, in %s:\n%s", time.Since(start).Round(time.Second), out)
	detached := waitGuestWorker(t, ctx, gw, func(w machineapi.GuestWorker) bool { return w.StorageIP == "" && w.Name != attached.Name })
	second := waitPod(t, ctx, sim, ns, func(p corev1.Pod) bool { return p.Name != first.Name && p.Spec.NodeName == detached.Name })

	// The evicted pod's lines are in the share, up to its eviction: nothing it wrote was lost.
	pv, err := k.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vol, err := k.CoreV1().PersistentVolumes().Get(ctx, pv.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	share := vol.Spec.CSI.VolumeHandle
	saved, err := os.ReadFile(nfs.Root + "/shares/share-" + instanceOf(t, ctx, c, share) + "/log")
	if err != nil {
		t.Fatal(err)
	}
	written := strings.Count(string(saved), first.Name+" line ")
	if written <= before || !strings.Contains(string(saved), first.Name+" line "+strconv.Itoa(written)+"\n") {
		t.Errorf("the share holds %d lines of %s (it had written %d before the removal), not in order", written, first.Name, before)
	}
	t.Logf("the evicted writer's %d lines are in the share, the last one written before the drain", written)

	// Its replacement stays ContainerCreating: the kubelet's mount fails (the node has no way to
	// the export), and diagnose says why. The first FailedMount may come before the node
	// plugin registered on the new node; the one that counts is the mount's own.
	var failed string
	if !eventually(ctx, 6*time.Minute, func() bool {
		ev, err := k.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + second.Name})
		if err != nil {
			return false
		}
		for _, e := range ev.Items {
			if e.Reason == "FailedMount" && !strings.Contains(e.Message, "not found in the list of registered CSI drivers") {
				failed = e.Message
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the writer %s on the detached worker %s: no FailedMount event of the mount itself in 6 minutes\n%s", second.Name, detached.Name, podsReport(ctx, sim, ns))
	}
	t.Logf("the writer %s on %s: FailedMount: %s", second.Name, detached.Name, failed)
	explained(t, failed, "does not reach the export")
	if p, err := k.CoreV1().Pods(ns).Get(ctx, second.Name, metav1.GetOptions{}); err != nil || p.Status.Phase == corev1.PodRunning {
		t.Errorf("the writer %s on a worker without a storage port is Running (%v)", second.Name, err)
	}
	out = cli(1, "diagnose", "pod/"+second.Name, "-n", ns)
	if !strings.Contains(out, "failed") || !strings.Contains(out, "storage port") || !strings.Contains(out, detached.Name) {
		t.Errorf("diagnose pod/%s: want the storage port check failed for %s:\n%s", second.Name, detached.Name, out)
	}
	t.Logf("diagnose pod/%s -n %s:\n%s", second.Name, ns, out)
}

// driverImages are the images a guest node needs for the driver's node plugins and the writers.
func driverImages() map[string]string {
	images := map[string]string{"SHELL_IMAGE": shellImage}
	for env, ref := range operatorImages() {
		images[env] = ref
	}
	return images
}

// waitGuestWorker waits until a Ready guest worker matches and returns it.
func waitGuestWorker(t *testing.T, ctx context.Context, gw *machineapi.GuestWorkers, match func(machineapi.GuestWorker) bool) machineapi.GuestWorker {
	t.Helper()
	var found machineapi.GuestWorker
	if !eventually(ctx, 5*time.Minute, func() bool {
		for _, w := range gw.Ready() {
			if match(w) {
				found = w
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no such guest worker after 5 minutes: %+v", gw.Ready())
	}
	return found
}

// waitPod waits until a pod of the namespace matches and returns it.
func waitPod(t *testing.T, ctx context.Context, sim *testenv.SimCluster, ns string, match func(corev1.Pod) bool) corev1.Pod {
	t.Helper()
	var found corev1.Pod
	if !eventually(ctx, 4*time.Minute, func() bool {
		pods, err := sim.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && match(p) {
				found = p
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no such pod in %s after 4 minutes\n%s", ns, podsReport(ctx, sim, ns))
	}
	return found
}
