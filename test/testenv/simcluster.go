package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// SimOptions shapes a sim cluster.
type SimOptions struct {
	// ControlPlaneNodes get the OpenShift master/control-plane labels and NoSchedule taint.
	ControlPlaneNodes int
	// WorkerNodes get the worker label.
	WorkerNodes int
	// APIServer shapes the apiserver: a cluster that gets a real node (NewRealNode) wants
	// ServiceAccountTokens.
	APIServer APIServerOptions
}

// SimCluster is an APIServer plus kube-controller-manager, kube-scheduler and kwok: workloads get
// pods scheduled onto fake nodes that kwok marks Running and Ready, as on a real cluster.
type SimCluster struct {
	*APIServer
	// Kubeconfig is a cluster-admin kubeconfig file for CLIs under test.
	Kubeconfig string

	dir       string
	processes []*process
}

// StartSimCluster starts the whole sim cluster and waits until its nodes are Ready.
func StartSimCluster(ctx context.Context, opts SimOptions) (_ *SimCluster, err error) {
	assets, err := KubeAssets()
	if err != nil {
		return nil, err
	}
	api, err := StartAPIServerWith(opts.APIServer)
	if err != nil {
		return nil, err
	}
	c := &SimCluster{APIServer: api}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.dir, err = os.MkdirTemp("", "manila-setup-sim-"); err != nil {
		return nil, err
	}
	// The components authenticate as cluster admins, like a real control plane's do.
	components, err := api.KubeconfigFor(c.dir, "sim-components", "system:masters")
	if err != nil {
		return nil, err
	}
	if c.Kubeconfig, err = api.KubeconfigFor(c.dir, "sim-admin", "system:masters"); err != nil {
		return nil, err
	}
	common := []string{"--kubeconfig=" + components, "--leader-elect=false", "--secure-port=0", "--bind-address=127.0.0.1"}
	for _, p := range []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", common},
		{"kube-scheduler", common},
		// Heartbeat Leases, as kubelets keep them: without them kube-controller-manager takes
		// every node for down after its 40-50 s grace period (kwok's node status heartbeat comes
		// only every 10-20 minutes) and marks the nodes NotReady and their pods not Ready.
		// Only the nodes AddNode makes (annotated fake): a real node's kubelet keeps its own.
		{"kwok", []string{"--kubeconfig=" + components, "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake", "--node-lease-duration-seconds=40",
			"--config=" + filepath.Join(assets, "kwok-stages.yaml")}},
	} {
		proc, err := startProcess(c.dir, p.name, filepath.Join(assets, p.name), p.args...)
		if err != nil {
			return nil, err
		}
		c.processes = append(c.processes, proc)
	}
	for i := 0; i < opts.ControlPlaneNodes; i++ {
		if err := c.AddNode(ctx, fmt.Sprintf("master-%d", i), true); err != nil {
			return nil, err
		}
	}
	for i := 0; i < opts.WorkerNodes; i++ {
		if err := c.AddNode(ctx, fmt.Sprintf("worker-%d", i), false); err != nil {
			return nil, err
		}
	}
	return c, c.WaitNodesReady(ctx, 2*time.Minute)
}

// NewSimCluster starts a sim cluster for one test and stops it when the test ends.
func NewSimCluster(t testing.TB, opts SimOptions) *SimCluster {
	t.Helper()
	// Generous: the suite starts its servers at once on two cores. It only caps a failure.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := StartSimCluster(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// Stop stops the components, then the apiserver, and removes the temporary files.
func (c *SimCluster) Stop() {
	for i := len(c.processes) - 1; i >= 0; i-- {
		c.processes[i].stop()
	}
	c.processes = nil
	if c.APIServer != nil {
		_ = c.APIServer.Stop()
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// AddNode registers a fake node that kwok keeps Ready. Control-plane nodes carry OpenShift's
// labels and NoSchedule taint, so only workloads that tolerate it land there.
func (c *SimCluster) AddNode(ctx context.Context, name string, controlPlane bool, internalIPs ...string) error {
	labels := map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	var taints []corev1.Taint
	if controlPlane {
		labels["node-role.kubernetes.io/master"] = ""
		labels["node-role.kubernetes.io/control-plane"] = ""
		taints = []corev1.Taint{{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule}}
	} else {
		labels["node-role.kubernetes.io/worker"] = ""
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("16"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec: corev1.NodeSpec{Taints: taints},
		// An address on the machine network (the loopback cloud's tenant subnet), as a real
		// node has; kwok keeps it (its own default would be an address of no subnet of ours).
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	// internalIPs, when given, are the node's addresses as a booted machine chose them (its node
	// IP first); else the address on the machine network.
	if len(internalIPs) == 0 {
		internalIPs = []string{NodeIP(name)}
	}
	for _, ip := range internalIPs {
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	_, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// NodeIP is the stable address a simulated node or machine of this name has on the machine
// network, 10.196.0.0/16 (the loopback cloud's tenant subnet).
func NodeIP(name string) string {
	var h uint32 = 2166136261
	for _, b := range []byte(name) {
		h = (h ^ uint32(b)) * 16777619
	}
	return fmt.Sprintf("10.196.%d.%d", (h>>8)%250+1, h%250+2)
}

// WaitNodesReady waits until every node reports Ready, and fails early if a component died.
func (c *SimCluster) WaitNodesReady(ctx context.Context, timeout time.Duration) error {
	var notReady []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.componentsAlive(); err != nil {
			return false, err
		}
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		notReady = notReady[:0]
		for _, n := range nodes.Items {
			if !NodeReady(&n) {
				notReady = append(notReady, n.Name)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("nodes not Ready (%s): %w\nkwok log:\n%s", strings.Join(notReady, ", "), err, c.processes[2].tail(20))
	}
	return nil
}

// componentsAlive reports a component that exited, with the end of its log.
func (c *SimCluster) componentsAlive() error {
	for _, p := range c.processes {
		if p.exited() {
			return fmt.Errorf("%s exited:\n%s", p.name, p.tail(30))
		}
	}
	return nil
}

// NodeReady reports whether the node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}
