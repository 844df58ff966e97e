//go:build integration

package testenv

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

func TestAPIServerServesOpenShiftCRDs(t *testing.T) {
	s := NewAPIServer(t)
	for _, gv := range []string{"machine.openshift.io/v1beta1", "operator.openshift.io/v1", "config.openshift.io/v1"} {
		res, err := s.Client.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("%s not served: %v", gv, err)
		}
		if len(res.APIResources) == 0 {
			t.Errorf("%s serves no resources", gv)
		}
	}
}

func TestSimClusterRunsWorkloads(t *testing.T) {
	c := NewSimCluster(t, SimOptions{ControlPlaneNodes: 1, WorkerNodes: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	labels := map[string]string{"app": "probe"}
	podSpec := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/probe:1"}}},
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podSpec},
	}
	dsLabels := map[string]string{"app": "probe-ds"}
	dsPod := *podSpec.DeepCopy()
	dsPod.Labels = dsLabels
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "probe-ds", Namespace: "default"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: dsLabels}, Template: dsPod},
	}
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.AppsV1().DaemonSets("default").Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var lastDep *appsv1.Deployment
	var lastDS *appsv1.DaemonSet
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if lastDep, err = c.Client.AppsV1().Deployments("default").Get(ctx, "probe", metav1.GetOptions{}); err != nil {
			return false, err
		}
		if lastDS, err = c.Client.AppsV1().DaemonSets("default").Get(ctx, "probe-ds", metav1.GetOptions{}); err != nil {
			return false, err
		}
		return lastDep.Status.ReadyReplicas == 2 && lastDS.Status.NumberReady == 2, nil
	})
	if err != nil {
		t.Fatalf("workloads not Ready: deployment %d/2 ready, daemonset %d ready of %d desired: %v",
			lastDep.Status.ReadyReplicas, lastDS.Status.NumberReady, lastDS.Status.DesiredNumberScheduled, err)
	}
	// The DaemonSet does not tolerate the control-plane taint: exactly the two workers run it.
	if lastDS.Status.DesiredNumberScheduled != 2 {
		t.Errorf("daemonset desired %d pods, want 2 (one per worker)", lastDS.Status.DesiredNumberScheduled)
	}
	pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=probe-ds"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "master-0" {
			t.Errorf("pod %s landed on the tainted control-plane node", p.Name)
		}
		if p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s is %s, want Running", p.Name, p.Status.Phase)
		}
	}

	// Every node keeps a heartbeat Lease, as a kubelet does: without one, kube-controller-manager
	// would mark the nodes NotReady after its grace period and the pods with them.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, node := range []string{"master-0", "worker-0", "worker-1"} {
			l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, node, metav1.GetOptions{})
			if err != nil || l.Spec.RenewTime == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("nodes without a heartbeat Lease in kube-node-lease: %v", err)
	}
}

func TestSimClusterAddsNodesLater(t *testing.T) {
	c := NewSimCluster(t, SimOptions{WorkerNodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.AddNode(ctx, "worker-late", false); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitNodesReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, "worker-late", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Labels["node-role.kubernetes.io/worker"]; !ok || !NodeReady(n) {
		t.Errorf("late node: labels %v, ready %v", n.Labels, NodeReady(n))
	}
}
