//go:build integration

package datapath

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// writersShareTheClaim runs a writer pod on each of worker-one and worker-two, both mounting the
// claim, and checks what a user would: both Running, each node's kernel mounting the export from
// its storage address, each pod reading the other's lines (exec), and the pods' logs served.
func writersShareTheClaim(t *testing.T, ctx context.Context, sim *testenv.SimCluster, nodes map[string]*testenv.GuestNode, storageIP map[string]string, ns, claim, export string) {
	t.Helper()
	k := sim.Client
	var err error
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
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
				TerminationGracePeriodSeconds: new(int64),
			},
		}
		if _, err := k.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
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
			ls, lsErr := execIn(ctx, sim, ns, pod, "ls", "-la", "/mnt/test")
			mounts, _, _ := nodes[pods[pod]].RunOnNode(ctx, time.Minute, "grep nfs /proc/mounts; ls -la /var/lib/kubelet/pods/*/volumes/*/*")
			t.Fatalf("kubectl exec -n %s %s -- tail /mnt/test/%s: %q, %v\nls -la /mnt/test: %s %v\nnode %s:\n%s", ns, pod, other, out, err, ls, lsErr, pods[pod], mounts)
		}
		t.Logf("kubectl exec -n %s %s -- tail -n 2 /mnt/test/%s:\n%s", ns, pod, other, out)
	}
	for _, name := range []string{"worker-one", "worker-two"} {
		rss, err := nodes[name].RSSBytes()
		free, _, _ := nodes[name].Run(ctx, 10*time.Second, "free -m | sed -n 2p")
		if err == nil {
			t.Logf("guest node %s: %d MiB resident on the host; inside (total used free shared buff/cache available, MiB): %s", name, rss>>20, strings.Join(strings.Fields(free), " "))
		}
	}
	// And the kubelet serves the pods' logs through the apiserver, as kubectl logs does.
	if _, err := k.CoreV1().Pods(ns).GetLogs("writer-one", &corev1.PodLogOptions{}).DoRaw(ctx); err != nil {
		t.Errorf("kubectl logs -n %s writer-one: %v", ns, err)
	}
}

// shellImage is a busybox image (test/env/node/images.sh, SHELL_IMAGE) for the writer pods.
const shellImage = "localhost/manila-setup/shell:node-test"

// bootGuestNodes builds the images and boots one guest node per name, in parallel, each with a
// port on the machine network and one on the storage network (Neutron ports, as Nova would make
// a server's). It returns the nodes and their storage addresses, by name.
func bootGuestNodes(t *testing.T, ctx context.Context, sim *testenv.SimCluster, cloud *testenv.Cloud, c *clients, images map[string]string, names ...string) (map[string]*testenv.GuestNode, map[string]string) {
	t.Helper()
	nfs := cloud.NFS(t)
	suffix := testenv.NameSuffix()
	start := time.Now()
	// Short: podman refuses a run root of more than 50 characters, and t.TempDir's is longer.
	dir, err := os.MkdirTemp("", "msimg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	built, err := testenv.BuildNodeImages(ctx, dir, images)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node images built in %s", time.Since(start).Round(time.Second))

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
			Images:    built,
			PodSubnet: fmt.Sprintf("10.244.%d.0/24", i+1),
			Labels:    map[string]string{"node-role.kubernetes.io/worker": ""},
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
	return nodes, storageIP
}

// execIn runs a command in a pod's first container, as `kubectl exec` does.
func execIn(ctx context.Context, sim *testenv.SimCluster, ns, pod string, command ...string) (string, error) {
	return testenv.ExecInPod(ctx, sim.Config, ns, pod, command...)
}
