//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestDriverRunsOnARealNode is the journey on a real kubelet: `operator install` as a user runs
// it, the operator as a pod of its image with its own ServiceAccount, and every pod it renders
// from images built here under the names it renders. It fails when a pod cannot start, when
// RBAC refuses any of their ServiceAccounts a request, when the driver's own pods cannot
// provision a claim, or when a pod's volume fails before the kernel's NFS mount (this machine's
// kernel has no NFS: the mount is where a real node would go on).
func TestDriverRunsOnARealNode(t *testing.T) {
	cloud := testenv.NewCloud(t)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{APIServer: testenv.APIServerOptions{ServiceAccountTokens: true}})
	images := map[string]string{}
	im := operator.DefaultImages
	for env, ref := range im.ImageEnv() {
		images[env] = *ref
	}
	// A single-node OpenShift: the node is control plane and worker.
	node := testenv.NewRealNode(t, sim, testenv.RealNodeOptions{
		Images: images,
		Labels: map[string]string{"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": ""},
	})
	kc := sim.Client
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	singleNodeShaped(t, ctx, sim, node)
	// What OpenShift's csi-snapshot-controller-operator gives every cluster, from installation.
	sim.NewSnapshots(t)
	// Whatever happens below: no request of an operand's or the operator's ServiceAccount was
	// refused. A missing RBAC rule shows here by name, also when what it stops (a claim, a pod)
	// failed the test first.
	t.Cleanup(func() { noRefusedRequests(t, sim) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(podReport(context.Background(), kc, node, operator.DefaultNamespace))
		}
	})

	// 1. The operator, installed as a user does, runs as a pod of the node.
	installOnRealNode(t, ctx, sim, cloud, node)
	start := time.Now()
	ns := operator.DefaultNamespace
	// OpenShift's service-ca operator gives the controller's metrics Service its serving
	// certificate, which the controller pod mounts: played here as on a real cluster.
	go func() {
		for ctx.Err() == nil {
			if _, err := testenv.FulfilServingCertSecrets(ctx, kc, ns); err != nil && ctx.Err() == nil {
				t.Logf("service-ca stand-in: %v", err)
			}
			time.Sleep(time.Second)
		}
	}()

	// 2. Every workload it renders runs there, all containers ready.
	for _, w := range []struct{ kind, name string }{
		{"Deployment", operator.OperatorName},
		{"DaemonSet", operator.NFSNodeDaemonSetName},
		{"DaemonSet", operator.NodeDaemonSetName},
		{"Deployment", operator.ControllerDeploymentName},
	} {
		pod := waitPodReady(t, ctx, kc, ns, w.kind, w.name, node.Name)
		t.Logf("%s %s: pod %s Ready on %s after %s (%d containers)", w.kind, w.name, pod.Name, node.Name,
			time.Since(start).Round(time.Second), len(pod.Spec.Containers))
	}

	// 3. The kubelet registered the Manila driver, with the node ID the plugin read from the
	// metadata service: the instance's. The NFS node plugin is not registered with the kubelet:
	// the Manila plugin forwards to it (--fwdendpoint), as on OpenShift.
	var registered *storagev1.CSINodeDriver
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		csiNode, err := kc.StorageV1().CSINodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for i, d := range csiNode.Spec.Drivers {
			if d.Name == "manila.csi.openstack.org" {
				registered = &csiNode.Spec.Drivers[i]
			}
		}
		return registered != nil, nil
	})
	if err != nil {
		csiNode, _ := kc.StorageV1().CSINodes().Get(ctx, node.Name, metav1.GetOptions{})
		t.Fatalf("CSINode %s does not list manila.csi.openstack.org: %v\n%+v", node.Name, err, csiNode)
	}
	if registered.NodeID != node.InstanceID {
		t.Errorf("CSINode %s: manila.csi.openstack.org registered node ID %q, want the instance's %s", node.Name, registered.NodeID, node.InstanceID)
	}
	t.Logf("CSINode %s lists manila.csi.openstack.org, node ID %s, after %s", node.Name, registered.NodeID, time.Since(start).Round(time.Second))

	// 4. A claim, provisioned by the csi-provisioner of the controller pod.
	const appNS = "app"
	pvc, pv := claimProvisionedByTheDriver(t, ctx, kc, appNS)
	t.Logf("claim Bound to %s (share %s) after %s", pv.Name, pv.Spec.CSI.VolumeHandle, time.Since(start).Round(time.Second))

	// 5. A pod using it: the kubelet stages and publishes through the Manila node plugin, which
	// forwards to the NFS node plugin, which asks the kernel for the NFS mount.
	mountReachesTheKernel(t, ctx, kc, node, "app", pvc, pv)

	// 6. The operator and the controller talked to the apiserver as themselves (their tokens,
	// their RBAC): the check of refused requests (at the end, also after a failure) covers them.
	for _, sa := range []string{operator.OperatorName, "manila-csi-driver-controller-sa"} {
		reqs, err := sim.ServiceAccountRequests(ns, sa)
		if err != nil {
			t.Fatal(err)
		}
		if len(reqs) == 0 {
			t.Errorf("ServiceAccount %s/%s made no request: the check of refused requests proves nothing for it", ns, sa)
		}
		t.Logf("ServiceAccount %s: %d requests, none refused", sa, len(reqs))
	}

	// 7. Snapshots and restores, through the driver's csi-snapshotter and csi-provisioner, and
	// what uninstall does with them.
	snapshotsAndRestores(t, ctx, sim, node, pvc, pv)
}

// TestCompanionRunsOnARealNode is the other mode on a real kubelet: beside the platform's own
// Manila operator (played by testenv.InstallPlatform, with the driver Secret its operator would
// write), `operator install` installs the companion, which runs as a pod of its image with its own
// ServiceAccount, reaches the cloud from the pod network and makes its StorageClasses, with no
// request refused.
func TestCompanionRunsOnARealNode(t *testing.T) {
	cloud := testenv.NewCloud(t)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{APIServer: testenv.APIServerOptions{ServiceAccountTokens: true}})
	node := testenv.NewRealNode(t, sim, testenv.RealNodeOptions{
		Labels: map[string]string{"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": ""},
	})
	kc := sim.Client
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	singleNodeShaped(t, ctx, sim, node)
	if err := testenv.InstallPlatform(ctx, sim.Config, testenv.PlatformOptions{}); err != nil {
		t.Fatal(err)
	}
	writePlatformDriverSecret(t, ctx, sim, cloud.CloudsFile, testenv.CloudDemo)
	names := operator.NamesFor(platform.ModeCompanion)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(podReport(context.Background(), kc, node, names.Namespace))
		}
	})
	t.Cleanup(func() { noRefusedRequests(t, sim) })

	out := installOnRealNode(t, ctx, sim, cloud, node)
	if !strings.Contains(out, "mode companion:") {
		t.Fatalf("operator install did not choose companion mode beside the platform:\n%s", out)
	}
	start := time.Now()
	pod := waitPodReady(t, ctx, kc, names.Namespace, "Deployment", names.Operator, node.Name)
	t.Logf("companion pod %s Ready on %s after %s", pod.Name, node.Name, time.Since(start).Round(time.Second))
	class := waitClass(t, ctx, kc, names.StorageClassPrefix+"default")
	t.Logf("the companion pod made StorageClass %s after %s", class, time.Since(start).Round(time.Second))
	reqs, err := sim.ServiceAccountRequests(names.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) == 0 {
		t.Errorf("ServiceAccount %s/%s made no request", names.Namespace, pod.Spec.ServiceAccountName)
	}
	t.Logf("ServiceAccount %s: %d requests", pod.Spec.ServiceAccountName, len(reqs))
}

// claimProvisionedByTheDriver makes namespace and a ReadWriteMany claim "shared" on the
// operator's csi-manila-default, waits until it is Bound and checks that the Manila driver
// provisioned it (no other provisioner runs: it was the driver's own controller pod).
func claimProvisionedByTheDriver(t *testing.T, ctx context.Context, kc kubernetes.Interface, namespace string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	createNamespace(t, ctx, kc, namespace)
	waitServiceAccount(t, ctx, kc, namespace, "default")
	class := waitClass(t, ctx, kc, "csi-manila-default")
	pvc, err := kc.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, rwxClaim(namespace, "shared", class, "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := waitBound(t, ctx, kc, pvc, 3*time.Minute, func() error { return nil })
	if by := pv.Annotations["pv.kubernetes.io/provisioned-by"]; by != "manila.csi.openstack.org" {
		t.Errorf("PV %s provisioned by %q, want manila.csi.openstack.org", pv.Name, by)
	}
	return pvc, pv
}

// installOnRealNode runs `manila-setup operator install` as a user does (with flags), with the
// operator image the real node holds, and returns what it printed.
func installOnRealNode(t *testing.T, ctx context.Context, sim *testenv.SimCluster, cloud *testenv.Cloud, node *testenv.RealNode, flags ...string) string {
	t.Helper()
	install := exec.CommandContext(ctx, buildCLI(t), append([]string{"operator", "install", "--kubeconfig", sim.Kubeconfig,
		"--os-cloud", testenv.CloudDemo, "--os-client-config-file", cloud.CloudsFile}, flags...)...)
	install.Env = append(os.Environ(), "OPERATOR_IMAGE="+node.OperatorImage)
	out, err := install.CombinedOutput()
	if err != nil {
		t.Fatalf("operator install: %v\n%s", err, out)
	}
	return string(out)
}

// noRefusedRequests fails the test for every ServiceAccount request the apiserver refused (403):
// a missing RBAC rule, by name.
func noRefusedRequests(t *testing.T, sim *testenv.SimCluster) {
	refused, err := sim.Refused()
	if err != nil {
		t.Error(err)
	}
	for _, r := range refused {
		t.Errorf("RBAC refused %s", r)
	}
}

// waitPodReady waits until the workload kind/name has a pod on node whose containers are all
// ready, and fails early, with the container states, when one cannot start.
func waitPodReady(t *testing.T, ctx context.Context, kc kubernetes.Interface, ns, kind, name, node string) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if !ownedBy(ctx, kc, p, kind, name) {
				continue
			}
			last = podState(p)
			for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				if w := s.State.Waiting; w != nil && cannotStart[w.Reason] {
					return false, fmt.Errorf("%s %s: container %s cannot start: %s: %s", kind, name, s.Name, w.Reason, w.Message)
				}
			}
			if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
				continue
			}
			ready := true
			for _, s := range p.Status.ContainerStatuses {
				ready = ready && s.Ready
			}
			if ready {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s has no Ready pod on %s: %v\nlast: %s", kind, ns, name, node, err, last)
	}
	return found
}

// cannotStart are the waiting reasons that do not go away by waiting.
var cannotStart = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "CrashLoopBackOff": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "InvalidImageName": true, "RunContainerError": true}

// ownedBy says whether pod belongs to the Deployment or DaemonSet name (a Deployment's pods are
// owned by its ReplicaSet, whose name starts with the Deployment's).
func ownedBy(ctx context.Context, kc kubernetes.Interface, p *corev1.Pod, kind, name string) bool {
	for _, o := range p.OwnerReferences {
		switch {
		case kind == "DaemonSet" && o.Kind == "DaemonSet" && o.Name == name:
			return true
		case kind == "Deployment" && o.Kind == "ReplicaSet":
			rs, err := kc.AppsV1().ReplicaSets(p.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			for _, ro := range rs.OwnerReferences {
				if ro.Kind == "Deployment" && ro.Name == name {
					return true
				}
			}
		}
	}
	return false
}

func podState(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", p.Name, p.Status.Phase)
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, "; %s ready=%t restarts=%d", s.Name, s.Ready, s.RestartCount)
		switch {
		case s.State.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s %s", s.State.Waiting.Reason, s.State.Waiting.Message)
		case s.State.Terminated != nil:
			fmt.Fprintf(&b, " terminated %s (%d) %s", s.State.Terminated.Reason, s.State.Terminated.ExitCode, s.State.Terminated.Message)
		}
	}
	return b.String()
}

// podReport lists the namespace's pods with their containers' states, and their events.
func podReport(ctx context.Context, kc kubernetes.Interface, node *testenv.RealNode, ns string) string {
	pods, err := kc.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var lines []string
	for i := range pods.Items {
		p := &pods.Items[i]
		lines = append(lines, podState(p)+" on "+p.Spec.NodeName, events(ctx, kc, ns, p.Name))
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			n := 8
			if !c.Ready && (c.State.Terminated == nil || c.State.Terminated.ExitCode != 0) {
				n = 30
			}
			lines = append(lines, fmt.Sprintf("  log of %s/%s:\n%s", p.Name, c.Name, node.ContainerLogs(ns, p.Name, c.Name, n)))
		}
	}
	sort.Strings(lines)
	return "pods of " + ns + ":\n" + strings.Join(lines, "\n")
}

func waitServiceAccount(t *testing.T, ctx context.Context, kc kubernetes.Interface, ns, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kc.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("ServiceAccount %s/%s never appeared (kube-controller-manager makes it): %v", ns, name, err)
	}
}

func waitClass(t *testing.T, ctx context.Context, kc kubernetes.Interface, name string) string {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kc.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("StorageClass %s: %v", name, err)
	}
	return name
}

// singleNodeShaped makes the cluster look like a single-node OpenShift on OpenStack around the
// real node, as the installer leaves one: Infrastructure "cluster" (OpenStack, single-replica
// control plane) and kube-system/cluster-config-v1 whose machine network is the node's.
func singleNodeShaped(t *testing.T, ctx context.Context, sim *testenv.SimCluster, node *testenv.RealNode) {
	t.Helper()
	cc, err := configclient.NewForConfig(sim.Config)
	if err != nil {
		t.Fatal(err)
	}
	infra, err := cc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec:       configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: configv1.OpenStackPlatformType}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{
		InfrastructureName:     "sno-real",
		ControlPlaneTopology:   configv1.SingleReplicaTopologyMode,
		InfrastructureTopology: configv1.SingleReplicaTopologyMode,
		PlatformStatus:         &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType},
	}
	if _, err := cc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, ctx, sim.Client, "kube-system")
	installConfig := fmt.Sprintf(`apiVersion: v1
baseDomain: example.com
metadata:
  name: sno-real
networking:
  networkType: OVNKubernetes
  machineNetwork:
  - cidr: %s
controlPlane:
  name: master
  replicas: 1
compute:
- name: worker
  replicas: 0
platform:
  openstack:
    cloud: openstack
`, node.Network)
	if _, err := sim.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-config-v1", Namespace: "kube-system"},
		Data:       map[string]string{"install-config": installConfig},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// mountReachesTheKernel runs a pod of the claim on the real node and waits until its volume
// reaches the kernel's NFS mount: the kubelet staged and published through the Manila node
// plugin, which chose the share's export and forwarded it to the NFS node plugin, which called
// mount(2), failing with ENODEV (this machine's kernel has no NFS client). Everything before the
// kernel's NFS client happened, for the volume's own share.
func mountReachesTheKernel(t *testing.T, ctx context.Context, kc kubernetes.Interface, node *testenv.RealNode, name string, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	t.Helper()
	ns := pvc.Namespace
	app := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:                      node.Name,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "app", Image: node.PauseImage,
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}},
		},
	}
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, app, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var mountErr string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=FailedMount"})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			mountErr = e.Message
			if strings.Contains(e.Message, "no such device") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s: its volume did not reach the kernel's NFS mount (last FailedMount: %q): %v\nevents:\n%s", name, mountErr, err, events(ctx, kc, ns, name))
	}
	// The export path names the share (its id, with underscores, on this back end).
	if share := strings.ReplaceAll(pv.Spec.CSI.VolumeHandle, "-", "_"); !strings.Contains(mountErr, "mount failed: no such device") || !strings.Contains(mountErr, share) {
		t.Errorf("pod %s: FailedMount %q: want the NFS plugin's mount(2) of share %s failing with the kernel's ENODEV", name, mountErr, pv.Spec.CSI.VolumeHandle)
	}
	t.Logf("pod %s: the mount of share %s went as far as the kernel: %s", name, pv.Spec.CSI.VolumeHandle, mountErr)
}
