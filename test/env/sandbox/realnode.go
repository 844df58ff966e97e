package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// realNodeName is the real node's Node: a control-plane node beside the three masters' kwok
// Nodes. It has no Machine: it stands for where a master's pods run, not for a master's server.
const realNodeName = "real-master"

const masterLabel = "node-role.kubernetes.io/master"

// wantRealNode tells whether the sandbox gets a real node, and why not when it does not.
func (s *sandbox) wantRealNode() (bool, string) {
	switch s.realNode {
	case "on":
		return true, ""
	case "off":
		return false, "--real-node=off"
	}
	if os.Geteuid() != 0 {
		return false, "not root: a kubelet needs root; make demo as root runs the driver's pods for real"
	}
	if _, err := testenv.NodeAssets(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// startRealNode builds the images of every operand under the names the operator renders (the
// local operator gets the same variables), starts containerd and the kubelet as a control-plane
// node, tainted as OpenShift's are when the cluster has workers, so only the platform's own pods
// land there. It returns what to say about it: it runs beside other steps, whose lines come
// first.
func (s *sandbox) startRealNode(ctx context.Context) (string, error) {
	start := time.Now()
	images := map[string]string{}
	im := operator.DefaultImages
	for env, ref := range im.ImageEnv() {
		images[env] = *ref
		if v := os.Getenv(env); v != "" {
			images[env] = v
		}
	}
	ports := testenv.CloudPorts()
	for _, p := range strings.FieldsFunc(s.podPorts, func(r rune) bool { return r == ',' }) {
		port, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || port < 1 || port > 65535 {
			return "", fmt.Errorf("--pod-loopback-ports: %q is not a port", p)
		}
		ports = append(ports, port)
	}
	n, err := testenv.StartRealNode(ctx, s.sim, testenv.RealNodeOptions{Name: realNodeName, Images: images, LoopbackPorts: ports,
		Labels: map[string]string{masterLabel: "", "node-role.kubernetes.io/control-plane": ""}})
	if err != nil {
		return "", err
	}
	s.node = n
	nodes := s.sim.Client.CoreV1().Nodes()
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, t := range node.Spec.Taints {
			if t.Key == masterLabel {
				return nil
			}
		}
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: masterLabel, Effect: corev1.TaintEffectNoSchedule})
		_, err = nodes.Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("real node %s: tainting it as a control-plane node: %w", n.Name, err)
	}
	// What make demo's summary (test/env/demo-info.sh) reads.
	if err := os.WriteFile(filepath.Join(s.dir, "real-node"), []byte(n.Name+"\n"+n.PodLogDir()+"\n"), 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("real node %s Ready in %s: containerd, kubelet, pod network, metadata service, %d images built here",
		n.Name, since(start), len(images)+2), nil
}

// tendRealNode plays, once, what a real OpenShift cluster does around the driver's pods and the
// sandbox cannot leave to kwok: OpenShift's service-ca writes the controller's metrics serving
// certificate, and one controller replica runs on the real node (the other is on a kwok node,
// where it runs nothing).
func (s *sandbox) tendRealNode(ctx context.Context) {
	if _, err := testenv.FulfilServingCertSecrets(ctx, s.sim.Client, operator.DefaultNamespace); err != nil && ctx.Err() == nil {
		step("warning: %v", err)
	}
	if err := s.keepControllerOnRealNode(ctx); err != nil && ctx.Err() == nil {
		step("warning: %v", err)
	}
}

// reserveRealNode cordons all kwok control-plane nodes but one until the controller's two
// replicas are placed (releaseKwokNodes): they repel each other, so one lands on the real node,
// whenever it registers.
func (s *sandbox) reserveRealNode(ctx context.Context) error {
	kwok, err := s.kwokControlPlane(ctx)
	if err != nil || len(kwok) < 2 {
		return err
	}
	s.reserved = kwok[1:]
	return s.cordon(ctx, s.reserved, true)
}

func (s *sandbox) releaseKwokNodes(ctx context.Context) error {
	err := s.cordon(ctx, s.reserved, false)
	s.reserved = nil
	return err
}

// keepControllerOnRealNode moves a controller replica to the real node when none is there. The
// scheduler puts the Deployment's two replicas on two of the four control-plane nodes (they
// repel each other); it may pick the two kwok ones, and then no replica of the driver runs. With
// the kwok control-plane nodes cordoned, a replica deleted there can only come back on the real
// node. Only a settled Deployment is touched: during a rollout its own controller moves pods.
func (s *sandbox) keepControllerOnRealNode(ctx context.Context) error {
	kc := s.sim.Client
	ns := operator.DefaultNamespace
	d, err := kc.AppsV1().Deployments(ns).Get(ctx, operator.ControllerDeploymentName, metav1.GetOptions{})
	if err != nil || !settled(d) {
		return nil
	}
	pods, err := controllerPods(ctx, s, d)
	if err != nil {
		return err
	}
	var away *corev1.Pod
	for i, p := range pods {
		switch {
		case p.DeletionTimestamp != nil || p.Spec.NodeName == "":
			return nil // a replica is going or not placed yet: look again later
		case p.Spec.NodeName == realNodeName:
			return nil
		default:
			away = &pods[i]
		}
	}
	if away == nil {
		return nil
	}
	kwok, err := s.kwokControlPlane(ctx)
	if err != nil {
		return err
	}
	if err := s.cordon(ctx, kwok, true); err != nil {
		return err
	}
	defer func() {
		if err := s.cordon(context.WithoutCancel(ctx), kwok, false); err != nil {
			step("warning: %v", err)
		}
	}()
	if err := kc.CoreV1().Pods(ns).Delete(ctx, away.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		return fmt.Errorf("moving controller replica %s from kwok node %s: %w", away.Name, away.Spec.NodeName, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := controllerPods(ctx, s, d)
		if err != nil {
			return false, nil
		}
		for _, p := range pods {
			if p.Spec.NodeName == realNodeName && p.DeletionTimestamp == nil {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("moving a controller replica to the real node %s: %w", realNodeName, err)
	}
	step("controller replica moved from kwok node %s to the real node %s", away.Spec.NodeName, realNodeName)
	return nil
}

func settled(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.Replicas == want && d.Status.UpdatedReplicas == want
}

func controllerPods(ctx context.Context, s *sandbox, d *appsv1.Deployment) ([]corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return nil, err
	}
	list, err := s.sim.Client.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// kwokControlPlane are the control-plane nodes other than the real one.
func (s *sandbox) kwokControlPlane(ctx context.Context) ([]string, error) {
	list, err := s.sim.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: masterLabel})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range list.Items {
		if n.Name != realNodeName {
			names = append(names, n.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

func (s *sandbox) cordon(ctx context.Context, nodes []string, on bool) error {
	patch := `{"spec":{"unschedulable":null}}`
	if on {
		patch = `{"spec":{"unschedulable":true}}`
	}
	for _, name := range nodes {
		if _, err := s.sim.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("cordon=%t of kwok node %s: %w", on, name, err)
		}
	}
	return nil
}

// waitDriverPods waits until every workload of the driver has a pod on the real node with all
// its containers ready, tending the node meanwhile, and says how long it took.
func (s *sandbox) waitDriverPods(ctx context.Context) error {
	start := time.Now()
	workloads := []string{operator.ControllerDeploymentName, operator.NodeDaemonSetName, operator.NFSNodeDaemonSetName}
	var last map[string]podSummary
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := s.operatorExited(); err != nil {
			return false, err
		}
		if _, err := testenv.FulfilServingCertSecrets(ctx, s.sim.Client, operator.DefaultNamespace); err != nil {
			return false, nil
		}
		var err error
		if last, err = s.podsOnRealNode(ctx); err != nil {
			return false, nil
		}
		for _, w := range workloads {
			if last[w].state != "Ready" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		var states []string
		for _, w := range workloads {
			states = append(states, fmt.Sprintf("%s: %s", w, last[w].state))
		}
		return fmt.Errorf("the driver's pods on the real node %s: %w\n  %s", realNodeName, err, strings.Join(states, "\n  "))
	}
	if err := s.releaseKwokNodes(ctx); err != nil {
		return err
	}
	var ready []string
	for _, w := range workloads {
		unit := "containers"
		if last[w].containers == 1 {
			unit = "container"
		}
		ready = append(ready, fmt.Sprintf("%s (%d %s)", w, last[w].containers, unit))
	}
	step("the driver's pods Ready on the real node %s in %s: %s", realNodeName, since(start), strings.Join(ready, ", "))
	return nil
}

type podSummary struct {
	state      string
	containers int
}

// podsOnRealNode returns the state of the real node's pod of each driver workload, by the
// workload's name: "Ready", or what its containers wait for.
func (s *sandbox) podsOnRealNode(ctx context.Context) (map[string]podSummary, error) {
	list, err := s.sim.Client.CoreV1().Pods(operator.DefaultNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + realNodeName})
	if err != nil {
		return nil, err
	}
	states := map[string]podSummary{}
	for _, p := range list.Items {
		w := workloadOf(&p)
		if w == "" {
			continue
		}
		states[w] = podSummary{podState(&p), len(p.Spec.Containers)}
	}
	return states, nil
}

// workloadOf names the Deployment or DaemonSet of a pod, from its owner (a ReplicaSet is named
// after its Deployment, with the template's hash).
func workloadOf(p *corev1.Pod) string {
	for _, o := range p.OwnerReferences {
		switch o.Kind {
		case "DaemonSet":
			return o.Name
		case "ReplicaSet":
			if i := strings.LastIndex(o.Name, "-"); i > 0 {
				return o.Name[:i]
			}
		}
	}
	return ""
}

func podState(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == len(p.Spec.Containers) {
		ready := true
		for _, c := range p.Status.ContainerStatuses {
			ready = ready && c.Ready
		}
		if ready {
			return "Ready"
		}
	}
	var waiting []string
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if w := c.State.Waiting; w != nil {
			waiting = append(waiting, fmt.Sprintf("%s %s %s", c.Name, w.Reason, w.Message))
		} else if !c.Ready && c.State.Running != nil {
			waiting = append(waiting, c.Name+" not ready")
		}
	}
	if len(waiting) == 0 {
		return string(p.Status.Phase)
	}
	return string(p.Status.Phase) + ": " + strings.Join(waiting, "; ")
}
