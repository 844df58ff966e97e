package probepod

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/operator/probe"
)

// poll is how often Run reads the pod: the probe itself takes a few seconds at most.
const poll = 500 * time.Millisecond

// cleanupTimeout bounds the pod's deletion, which is made even when ctx has ended.
const cleanupTimeout = 30 * time.Second

// Waiting reasons that do not go away by waiting: the pod cannot start on its own.
var stuck = map[string]bool{
	"ErrImagePull":               false, // retried by the kubelet; ImagePullBackOff follows
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
}

// Run probes from s.Node: it creates the probe pod (Pod), waits until its container ends or
// s.Timeout passes, and reads the result from the container's termination message. The pod is
// deleted in every case, with a context of its own when ctx has ended. The error, when there is
// no result, says what the pod did instead: it could not be created, its image could not be
// pulled, it stayed Pending (and why), or it ran and reported nothing in time. A pod that could
// not be deleted is named in Result.Leftover (or in the error) with the command that deletes it.
func Run(ctx context.Context, kube kubernetes.Interface, s Spec) (probe.Result, error) {
	if err := s.Validate(); err != nil {
		return probe.Result{}, err
	}
	pod, err := kube.CoreV1().Pods(s.Namespace).Create(ctx, Pod(s), metav1.CreateOptions{})
	if err != nil {
		err = fmt.Errorf("creating the probe pod for node %s in namespace %s: %w", s.Node, s.Namespace, err)
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "PodSecurity") {
			err = fmt.Errorf("%w; the probe needs a namespace whose Pod Security level admits hostNetwork (pod-security.kubernetes.io/enforce: privileged), such as the driver operator's", err)
		}
		return probe.Result{}, err
	}
	r, err := await(ctx, kube, s, pod)
	if left := remove(ctx, kube, pod); left != "" {
		if err != nil {
			return r, fmt.Errorf("%w; and %s", err, left)
		}
		r.Leftover = left
	}
	return r, err
}

// await reads the pod until it has a result, cannot have one, or the time is up.
func await(ctx context.Context, kube kubernetes.Interface, s Spec, pod *corev1.Pod) (probe.Result, error) {
	p := probePod{Spec: s, name: pod.Namespace + "/" + pod.Name}
	deadline := time.NewTimer(s.timeout())
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	last := pod
	for {
		cur, err := kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return probe.Result{}, fmt.Errorf("%s was deleted before it reported anything", p)
		case err == nil:
			last = cur
			if r, done, err := p.observe(cur); done {
				return r, err
			}
		}
		// A failed read is tried again until the deadline; the last pod seen says the rest.
		select {
		case <-ctx.Done():
			return probe.Result{}, fmt.Errorf("interrupted while waiting for %s: %w", p, ctx.Err())
		case <-deadline.C:
			return probe.Result{}, p.stalled(ctx, kube, last)
		case <-tick.C:
		}
	}
}

// probePod names the pod being waited for in every sentence about it.
type probePod struct {
	Spec
	name string
}

func (p probePod) String() string { return fmt.Sprintf("the probe pod %s on node %s", p.name, p.Node) }

// observe says whether pod has ended, with its result or why there is none.
func (p probePod) observe(pod *corev1.Pod) (probe.Result, bool, error) {
	cs := container(pod)
	switch {
	case cs != nil && cs.State.Terminated != nil:
		r, err := p.parse(cs.State.Terminated)
		return r, true, err
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		// Refused by the kubelet (OutOfmemory, NodeAffinity), or past activeDeadlineSeconds
		// before the container ran.
		return probe.Result{}, true, fmt.Errorf("%s ended (%s) before its container ran: %s", p, pod.Status.Phase, reasonMessage(pod.Status.Reason, pod.Status.Message))
	case cs != nil && cs.State.Waiting != nil && stuck[cs.State.Waiting.Reason]:
		return probe.Result{}, true, p.waitingError(cs.State.Waiting)
	}
	return probe.Result{}, false, nil
}

func (p probePod) waitingError(w *corev1.ContainerStateWaiting) error {
	if strings.Contains(w.Reason, "Image") {
		return fmt.Errorf("%s cannot pull image %s: %s", p, p.Image, reasonMessage(w.Reason, w.Message))
	}
	return fmt.Errorf("%s cannot start its container: %s", p, reasonMessage(w.Reason, w.Message))
}

// parse reads the result from the container's termination message.
func (p probePod) parse(t *corev1.ContainerStateTerminated) (probe.Result, error) {
	ended := fmt.Sprintf("%s ended (exit code %d", p, t.ExitCode)
	if t.Reason != "" {
		ended += ", " + t.Reason
	}
	ended += ")"
	msg := strings.TrimSpace(t.Message)
	if msg == "" {
		return probe.Result{}, fmt.Errorf("%s with no termination message", ended)
	}
	var r probe.Result
	if err := json.Unmarshal([]byte(msg), &r); err != nil || len(r.Targets) == 0 {
		return probe.Result{}, fmt.Errorf("%s without a result; its message: %q", ended, probe.Cut(msg, 400))
	}
	seen := map[string]bool{}
	for _, tr := range r.Targets {
		seen[tr.Address] = true
	}
	for _, want := range p.Targets {
		if !seen[want] {
			return probe.Result{}, fmt.Errorf("%s with a result that does not name target %s: %q", ended, want, probe.Cut(msg, 400))
		}
	}
	r.Node = p.Node
	return r, nil
}

// stalled says why the pod has no result at the deadline.
func (p probePod) stalled(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) error {
	// The deadline may be ctx's own; the node is read with a context that outlives it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	node, nodeErr := kube.CoreV1().Nodes().Get(ctx, p.Node, metav1.GetOptions{})
	if pod.Status.Phase == corev1.PodRunning {
		err := fmt.Sprintf("%s reported nothing within %s: its container is still running", p, p.timeout())
		if nodeErr == nil && node.Annotations["kwok.x-k8s.io/node"] == "fake" {
			err += fmt.Sprintf(" (node %s is simulated by kwok and runs no containers)", p.Node)
		}
		return fmt.Errorf("%s", err)
	}
	return fmt.Errorf("%s was still %s after %s: %s", p, phase(pod), p.timeout(), pendingReason(pod, node, nodeErr))
}

// pendingReason is why a pod that names its node has not started, from the most precise
// source: its container's waiting reason, its scheduling condition, then its node.
func pendingReason(pod *corev1.Pod, node *corev1.Node, nodeErr error) string {
	if cs := container(pod); cs != nil && cs.State.Waiting != nil {
		return "its container is waiting: " + reasonMessage(cs.State.Waiting.Reason, cs.State.Waiting.Message)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return "not scheduled: " + reasonMessage(c.Reason, c.Message)
		}
	}
	switch {
	case apierrors.IsNotFound(nodeErr):
		return fmt.Sprintf("node %s does not exist, so no kubelet will run it", pod.Spec.NodeName)
	case nodeErr != nil:
		return fmt.Sprintf("no kubelet has reported on it, and node %s could not be read: %v", pod.Spec.NodeName, nodeErr)
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("node %s is not Ready (%s)", node.Name, reasonMessage(c.Reason, c.Message))
		}
	}
	return fmt.Sprintf("the kubelet of node %s has not reported on it", node.Name)
}

// remove deletes the pod at once (it keeps nothing worth a grace period), with a context of its
// own: the pod must go even when the caller's context has ended. It returns what was left.
func remove(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ref(int64(0))})
	if err == nil || apierrors.IsNotFound(err) {
		return ""
	}
	return fmt.Sprintf("the probe pod %s/%s could not be deleted (%v): delete it with `oc delete pod -n %s %s`", pod.Namespace, pod.Name, err, pod.Namespace, pod.Name)
}

func container(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == containerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func phase(pod *corev1.Pod) corev1.PodPhase {
	if pod.Status.Phase == "" {
		return corev1.PodPending
	}
	return pod.Status.Phase
}

func reasonMessage(reason, message string) string {
	if reason == "" {
		reason = "no reason given"
	}
	if message == "" {
		return reason
	}
	return reason + ": " + message
}
