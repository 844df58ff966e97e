//go:build integration

package probepod

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/manila-setup/manila-setup/operator/probe"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestRun runs the probe against a real apiserver with kwok nodes: kwok marks a pod on its node
// Running and never ends it, and no kubelet takes a pod whose node does not exist. What a real
// kubelet writes when the probe ends (the termination message) is written here through the
// status subresource, as a fixture for the parser.
func TestRun(t *testing.T) {
	c := testenv.NewSimCluster(t, testenv.SimOptions{WorkerNodes: 1})
	kube := c.Client
	ctx := context.Background()
	ns := namespace(t, kube, "manila-setup-probe", "privileged")
	spec := func(node string, timeout time.Duration) Spec {
		return Spec{Namespace: ns, Node: node, Image: "example.test/manila-setup-operator:1",
			Targets: []string{"10.0.0.5:2049", "10.0.0.6:2049"}, Timeout: timeout}
	}

	t.Run("a node that runs nothing: nothing reported in time", func(t *testing.T) {
		start := time.Now()
		_, err := Run(ctx, kube, spec("worker-0", 3*time.Second))
		elapsed := time.Since(start)
		t.Log(err)
		if err == nil || !strings.Contains(err.Error(), "on node worker-0 reported nothing within 3s") || !strings.Contains(err.Error(), "simulated by kwok") {
			t.Fatalf("Run: %v", err)
		}
		if elapsed > 10*time.Second {
			t.Errorf("Run took %s with a 3s timeout", elapsed)
		}
		noProbePods(t, kube, ns)
	})

	t.Run("interrupted: the pod is deleted all the same", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := Run(ctx, kube, spec("worker-0", time.Minute))
		if err == nil || !strings.Contains(err.Error(), "interrupted while waiting for the probe pod") || !strings.Contains(err.Error(), "on node worker-0") {
			t.Fatalf("Run: %v", err)
		}
		noProbePods(t, kube, ns)
	})

	t.Run("a node that does not exist: Pending, and why", func(t *testing.T) {
		_, err := Run(ctx, kube, spec("no-such-node", 2*time.Second))
		t.Log(err)
		if err == nil || !strings.Contains(err.Error(), "on node no-such-node was still Pending after 2s: node no-such-node does not exist") {
			t.Fatalf("Run: %v", err)
		}
		noProbePods(t, kube, ns)
	})

	t.Run("a namespace whose Pod Security level refuses hostNetwork", func(t *testing.T) {
		s := spec("worker-0", 2*time.Second)
		s.Namespace = namespace(t, kube, "manila-setup-probe-baseline", "baseline")
		_, err := Run(ctx, kube, s)
		t.Log(err)
		if err == nil || !strings.Contains(err.Error(), "creating the probe pod for node worker-0 in namespace "+s.Namespace) || !strings.Contains(err.Error(), "hostNetwork=true") || !strings.Contains(err.Error(), "enforce: privileged") {
			t.Fatalf("Run: %v", err)
		}
	})

	// The fixtures below stand in for a kubelet: the pod names a node that does not exist, so
	// that neither kwok nor anything else writes its status but the test.
	result := probe.Result{Targets: []probe.Target{
		{Address: "10.0.0.5:2049", Reachable: true, Milliseconds: 3},
		{Address: "10.0.0.6:2049", Error: "connect: connection refused", Milliseconds: 1},
	}}
	message, err := json.Marshal(result)
	if err != nil {
		t.Fatal(err)
	}
	terminated := func(code int32, message string) func(*corev1.PodStatus) {
		return func(st *corev1.PodStatus) {
			st.Phase = corev1.PodFailed
			st.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: "Error", Message: message, StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}}
		}
	}
	for _, tt := range []struct {
		name    string
		status  func(*corev1.PodStatus)
		wantErr string
	}{
		{"the probe ended with its result", terminated(1, string(message)), ""},
		{"the probe ended without a result", terminated(2, `Error: --target: Invalid value: "x": must be ADDR:PORT`),
			`ended (exit code 2, Error) without a result; its message: "Error: --target: Invalid value: \"x\"`},
		{"the image cannot be pulled", func(st *corev1.PodStatus) {
			st.Phase = corev1.PodPending
			st.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ImagePullBackOff", Message: `Back-off pulling image "example.test/manila-setup-operator:1"`}}}}
		}, "on node fixture-node cannot pull image example.test/manila-setup-operator:1: ImagePullBackOff: Back-off pulling image"},
		{"the kubelet refused the pod", func(st *corev1.PodStatus) {
			st.Phase, st.Reason, st.Message = corev1.PodFailed, "OutOfmemory", "Node didn't have enough resource: memory, requested: 33554432, used: 8388608000, capacity: 8388608000"
		}, "on node fixture-node ended (Failed) before its container ran: OutOfmemory: Node didn't have enough resource: memory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			type answer struct {
				r   probe.Result
				err error
			}
			done := make(chan answer, 1)
			go func() {
				r, err := Run(ctx, kube, spec("fixture-node", time.Minute))
				done <- answer{r, err}
			}()
			setStatus(t, kube, ns, tt.status)
			var a answer
			select {
			case a = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not see the pod's status within 30s")
			}
			noProbePods(t, kube, ns)
			t.Log(a.err)
			if tt.wantErr != "" {
				if a.err == nil || !strings.Contains(a.err.Error(), tt.wantErr) {
					t.Fatalf("Run: %v, want %q", a.err, tt.wantErr)
				}
				return
			}
			if a.err != nil {
				t.Fatal(a.err)
			}
			want := []string{"node fixture-node cannot reach 10.0.0.6:2049 (NFS): connect: connection refused"}
			if got := a.r.Problems(); len(got) != 1 || got[0] != want[0] || a.r.Reachable() || len(a.r.Targets) != 2 || !a.r.Targets[0].Reachable {
				t.Errorf("result %+v, problems %q; want %q", a.r, got, want)
			}
		})
	}
}

// namespace creates a namespace whose Pod Security level is enforced at level.
func namespace(t *testing.T, kube kubernetes.Interface, name, level string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pod-security.kubernetes.io/enforce": level}}}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

var probeSelector = labels.Set{NameLabel: Name, ManagedByLabel: ManagedBy}.String()

// noProbePods fails the test if a probe pod is left in ns.
func noProbePods(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	pods, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: probeSelector})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("probe pod %s/%s left behind (deletionTimestamp %v)", p.Namespace, p.Name, p.DeletionTimestamp)
	}
}

// setStatus waits for the probe pod Run creates and writes its status as a kubelet would.
func setStatus(t *testing.T, kube kubernetes.Interface, ns string, edit func(*corev1.PodStatus)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var name string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: probeSelector})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		name = pods.Items[0].Name
		return true, nil
	})
	if err != nil {
		t.Fatalf("no probe pod appeared: %v", err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(&pod.Status)
		for i := range pod.Status.ContainerStatuses {
			pod.Status.ContainerStatuses[i].Image = pod.Spec.Containers[0].Image
		}
		_, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("writing the status of probe pod %s/%s: %v", ns, name, err)
	}
}
