// Package probepod runs the probe of package probe on a node: the pod (Pod: the operator's image
// on the node's host network, restricted in all else) and its life (Run: create it, read its
// termination message, delete it). It links client-go's typed clientset, which the operator's
// binary does not, so it is apart from package probe.
package probepod

import (
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/operator/probe"
)

// Labels of every probe pod: what it is and who made it, so that one left behind (its creator
// killed before it could delete it) can be found and removed.
const (
	NameLabel      = "app.kubernetes.io/name"
	Name           = "manila-setup-probe"
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "manila-setup"
)

// containerName is the probe pod's only container.
const containerName = "probe"

// RunAsUser is the user the operator's image runs as (build/Containerfile.in: USER 65532, the
// nonroot user of distroless images); the probe runs the same image as the same user.
const RunAsUser = 65532

// Spec says where to probe and what.
type Spec struct {
	// Namespace of the probe pod. Its Pod Security level must admit hostNetwork: the operator's
	// namespace in driver mode (privileged) does, a restricted one does not.
	Namespace string
	// Node runs the probe: the pod names it, so no scheduler is involved.
	Node string
	// Image is the operator's image (it holds manila-setup-operator).
	Image string
	// Targets are ADDR:PORT, at most MaxTargets: the NFS servers (port NFSPort).
	Targets []string
	// DialTimeout bounds each target's connection; DefaultDialTimeout when zero.
	DialTimeout time.Duration
	// Timeout bounds how long Run waits for the result; DefaultTimeout when zero. It is also
	// the pod's activeDeadlineSeconds, so that a pod its creator could not delete still ends.
	Timeout time.Duration
}

func (s Spec) dialTimeout() time.Duration {
	if s.DialTimeout > 0 {
		return s.DialTimeout
	}
	return probe.DefaultDialTimeout
}

func (s Spec) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return probe.DefaultTimeout
}

// Validate says which field of s is missing or wrong.
func (s Spec) Validate() error {
	switch {
	case s.Namespace == "":
		return fmt.Errorf("probe spec: namespace: Required value: the namespace of the probe pod")
	case s.Node == "":
		return fmt.Errorf("probe spec: node: Required value: the node to probe from")
	case s.Image == "":
		return fmt.Errorf("probe spec: image: Required value: the operator's image")
	case len(s.Targets) == 0:
		return fmt.Errorf("probe spec: targets: Required value: at least one ADDR:PORT")
	case len(s.Targets) > probe.MaxTargets:
		return fmt.Errorf("probe spec: targets: Too many: %d: must have at most %d items (the result must fit in a termination message)", len(s.Targets), probe.MaxTargets)
	case s.DialTimeout < 0 || s.Timeout < 0:
		return fmt.Errorf("probe spec: timeouts must not be negative (dialTimeout %s, timeout %s)", s.DialTimeout, s.Timeout)
	}
	for i, t := range s.Targets {
		if err := probe.ParseTarget(t); err != nil {
			return fmt.Errorf("probe spec: targets[%d]: Invalid value: %q: %v", i, t, err)
		}
	}
	return nil
}

// Command is the probe's command line in the pod, flags included.
func (s Spec) Command() []string {
	cmd := []string{"manila-setup-operator", "probe", "nfs"}
	for _, t := range s.Targets {
		cmd = append(cmd, "--target", t)
	}
	return append(cmd, "--timeout", s.dialTimeout().String())
}

// Pod is the probe pod for s. It runs on s.Node's host network (the path the kubelet's NFS
// mount takes), tolerates every taint (a new node may still carry some, and any node may need
// checking), mounts no service account token (it calls no API), and meets the restricted Pod
// Security profile in everything but host namespaces.
func Pod(s Spec) *corev1.Pod {
	resources := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:    s.Namespace,
			GenerateName: Name + "-",
			Labels:       map[string]string{NameLabel: Name, ManagedByLabel: ManagedBy},
		},
		Spec: corev1.PodSpec{
			NodeName:      s.Node,
			HostNetwork:   true,
			DNSPolicy:     corev1.DNSDefault, // the node's resolver, as for the kubelet's mount
			RestartPolicy: corev1.RestartPolicyNever,
			// Whole seconds, rounded up; the kubelet ends the pod if its creator did not.
			ActiveDeadlineSeconds:         ref(int64(math.Ceil(s.timeout().Seconds()))),
			TerminationGracePeriodSeconds: ref(int64(1)),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			AutomountServiceAccountToken:  ref(false),
			EnableServiceLinks:            ref(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ref(true),
				RunAsUser:      ref(int64(RunAsUser)),
				RunAsGroup:     ref(int64(RunAsUser)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           s.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         s.Command(),
				// The result is the termination message; a usage error leaves none, and then
				// the log's last lines say why.
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				Resources:                corev1.ResourceRequirements{Requests: resources, Limits: limits},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ref(false),
					ReadOnlyRootFilesystem:   ref(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// ref is a pointer to v, for the API's optional fields.
func ref[T any](v T) *T { return &v }
