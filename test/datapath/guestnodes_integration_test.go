//go:build integration

package datapath

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestPodsOnGuestNodesShareAVolume runs the last step of the product's promise on real nodes:
// two kubelets, each in a guest whose NICs are a server's Neutron ports (machine and storage
// network), run a pod each; the pods mount one Manila share, exported by the real NFS back end
// and admitted by the share's access rules for the nodes' storage addresses, and read each
// other's lines through `exec`, as a user would with kubectl. The mount is the guest kernel's:
// its source is the export address, its client address the node's storage port.
func TestPodsOnGuestNodesShareAVolume(t *testing.T) {
	cloud := testenv.NewCloud(t)
	nfs := cloud.NFS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c := newClients(t, ctx, cloud)
	suffix := testenv.NameSuffix()
	sim := testenv.NewSimCluster(t, testenv.SimOptions{APIServer: testenv.APIServerOptions{GuestNodes: true}})

	start := time.Now()
	const shellImage = "localhost/manila-setup/shell:node-test"
	// Short: podman refuses a run root of more than 50 characters, and t.TempDir's is longer.
	dir, err := os.MkdirTemp("", "msimg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	images, err := testenv.BuildNodeImages(ctx, dir, map[string]string{"SHELL_IMAGE": shellImage})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node images built in %s", time.Since(start).Round(time.Second))

	names := []string{"worker-one", "worker-two"}
	nodes := map[string]*testenv.GuestNode{}
	storageIP := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start = time.Now()
	for i, name := range names {
		mac, ip := c.port(t, ctx, cloud.Seed.Networks["tenant"], name+"-machine-"+suffix)
		smac, sip := c.port(t, ctx, cloud.Seed.Networks["storage"], name+"-storage-"+suffix)
		storageIP[name] = sip
		opts := testenv.GuestNodeOptions{
			Name:      name,
			NICs:      []testenv.GuestNIC{nfs.MachinePort(mac, ip+"/16"), nfs.StoragePort(smac, sip+"/24")},
			Images:    images,
			PodSubnet: fmt.Sprintf("10.244.%d.0/24", i+1),
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := testenv.StartGuestNode(ctx, sim, opts)
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("guest node %s, kubelet log (last lines):\n%s", n.Name, n.KubeletLog(context.Background(), 40))
				}
				n.Stop()
			})
			mu.Lock()
			nodes[name] = n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d guest nodes Ready in %s", len(nodes), time.Since(start).Round(time.Second))

	share, export := c.share(t, ctx, "guestnodes-"+suffix, "")
	for _, name := range names {
		c.grant(t, ctx, share, storageIP[name], "rw")
	}
	server, path, ok := strings.Cut(export, ":")
	if !ok {
		t.Fatalf("export location %q is not server:path", export)
	}

	// The share as a ReadWriteMany volume, and one writer pod on each node.
	const ns = "rwx-demo"
	k := sim.Client
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "share-" + suffix},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			MountOptions:                  []string{"nfsvers=4.1"},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: server, Path: path}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: "shared"},
		},
	}
	if _, err := k.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &empty,
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := k.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]string{"writer-one": "worker-one", "writer-two": "worker-two"}
	for pod, node := range pods {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns},
			Spec: corev1.PodSpec{
				NodeName: node,
				Containers: []corev1.Container{{
					Name: "writer", Image: shellImage, ImagePullPolicy: corev1.PullNever,
					Command:      []string{"sh", "-c", `i=0; while :; do i=$((i+1)); echo "$(hostname) line $i" >>/mnt/test/$(hostname); sleep 1; done`},
					VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/mnt/test"}},
				}},
				Volumes: []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}}},
				TerminationGracePeriodSeconds: new(int64),
			},
		}
		if _, err := k.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start = time.Now()
	for pod := range pods {
		if !eventually(ctx, 3*time.Minute, func() bool {
			p, err := k.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			return err == nil && p.Status.Phase == corev1.PodRunning
		}) {
			p, _ := k.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			ev, _ := k.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
			var msgs []string
			if ev != nil {
				for _, e := range ev.Items {
					msgs = append(msgs, e.Reason+": "+e.Message)
				}
			}
			t.Fatalf("pod %s not Running after 3 minutes: %+v\nevents:\n%s", pod, p.Status, strings.Join(msgs, "\n"))
		}
	}
	t.Logf("both writers Running in %s", time.Since(start).Round(time.Second))

	// Each node's kernel mounted the export from its storage address.
	for _, node := range pods {
		out, code, err := nodes[node].RunOnNode(ctx, time.Minute, "grep ' nfs4 ' /proc/mounts")
		if err != nil || code != 0 {
			t.Fatalf("%s: reading the node's mounts: exit code %d, %v: %s", node, code, err, out)
		}
		if !strings.Contains(out, export) || !strings.Contains(out, "clientaddr="+storageIP[node]) {
			t.Errorf("%s: the kernel's NFS mounts do not show %s from the storage address %s:\n%s", node, export, storageIP[node], out)
		}
		t.Logf("%s mounts %s", node, strings.Fields(out)[0])
	}

	// Each reads the other's lines, through the apiserver's exec, as kubectl exec does.
	for pod, other := range map[string]string{"writer-one": "writer-two", "writer-two": "writer-one"} {
		var out string
		if !eventually(ctx, time.Minute, func() bool {
			out, err = execIn(ctx, sim, ns, pod, "tail", "-n", "2", "/mnt/test/"+other)
			return err == nil && strings.Contains(out, other+" line ")
		}) {
			ls, lsErr := execIn(ctx, sim, ns, pod, "sh", "-c", "hostname; ls -la / /mnt; tail -n 8 /proc/self/mountinfo; ls -l /proc/1/ns/mnt /proc/self/ns/mnt; cat /proc/1/cmdline")
			mounts, _, _ := nodes[pods[pod]].RunOnNode(ctx, time.Minute, "grep nfs /proc/mounts; ls -la /var/lib/kubelet/pods/*/volumes/*/*")
			t.Fatalf("kubectl exec -n %s %s -- tail /mnt/test/%s: %q, %v\nls -la /mnt/test: %s %v\nnode %s:\n%s", ns, pod, other, out, err, ls, lsErr, pods[pod], mounts)
		}
		t.Logf("kubectl exec -n %s %s -- tail -n 2 /mnt/test/%s:\n%s", ns, pod, other, out)
	}
	// And the kubelet serves the pods' logs through the apiserver, as kubectl logs does.
	if _, err := k.CoreV1().Pods(ns).GetLogs("writer-one", &corev1.PodLogOptions{}).DoRaw(ctx); err != nil {
		t.Errorf("kubectl logs -n %s writer-one: %v", ns, err)
	}
}

// execIn runs a command in a pod's first container through the apiserver and the node's kubelet,
// as `kubectl exec` does, and returns its standard output.
func execIn(ctx context.Context, sim *testenv.SimCluster, ns, pod string, command ...string) (string, error) {
	req := sim.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(sim.Config, "GET", req.URL().String())
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = ws.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: io.Writer(&stderr)})
	if err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.String(), nil
}
