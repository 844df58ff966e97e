package attach

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ManilaDriver is the CSI driver of Manila's volumes: a PersistentVolume with spec.csi.driver
// set to it is mounted over the storage network.
const ManilaDriver = "manila.csi.openstack.org"

// Mount is a Manila volume a running pod uses on a node.
type Mount struct {
	Node   string `json:"node"`
	Pod    string `json:"pod"`   // namespace/name
	Claim  string `json:"claim"` // namespace/name
	Volume string `json:"persistentVolume"`
	// Cluster names the cluster the pod runs in when it is not the one manila-setup points at
	// (a NodePool's hosted cluster); "" for that one.
	Cluster string `json:"cluster,omitempty"`
}

func (m Mount) String() string {
	in := ""
	if m.Cluster != "" {
		in = " in " + m.Cluster
	}
	return fmt.Sprintf("pod %s on node %s%s (claim %s, PersistentVolume %s)", m.Pod, m.Node, in, m.Claim, m.Volume)
}

// ManilaMounts finds the pods on nodes that use a Manila volume: a claim bound to a
// PersistentVolume of ManilaDriver, named by the pod directly or as a generic ephemeral volume.
// Pods that have ended are not counted: they mount nothing.
func ManilaMounts(ctx context.Context, kube kubernetes.Interface, nodes []string) ([]Mount, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the PersistentVolumes, to find the Manila volumes in use: %w", err)
	}
	manila := map[string]string{} // namespace/claim: PV
	for _, pv := range pvs.Items {
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != ManilaDriver || pv.Spec.ClaimRef == nil {
			continue
		}
		manila[pv.Spec.ClaimRef.Namespace+"/"+pv.Spec.ClaimRef.Name] = pv.Name
	}
	if len(manila) == 0 {
		return nil, nil
	}
	var out []Mount
	for _, node := range nodes {
		pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return nil, fmt.Errorf("listing the pods of node %s, to find the Manila volumes in use: %w", node, err)
		}
		for _, pod := range pods.Items {
			if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, claim := range claimsOf(&pod) {
				key := pod.Namespace + "/" + claim
				if pv, ok := manila[key]; ok {
					out = append(out, Mount{Node: node, Pod: pod.Namespace + "/" + pod.Name, Claim: key, Volume: pv})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b Mount) int { return strings.Compare(a.Node+a.Pod+a.Claim, b.Node+b.Pod+b.Claim) })
	return out, nil
}

// claimsOf names the claims a pod's volumes use: persistentVolumeClaim, and the claim of a
// generic ephemeral volume (named after the pod and the volume).
func claimsOf(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}

// MountedError refuses to replace machines while pods on them use Manila volumes: the
// replacement drains those nodes and, after a removal, the new machines have no port on the
// storage network the volumes are mounted over.
type MountedError struct {
	Mounts []Mount
	// Done says what was changed before the refusal; "" is nothing.
	Done string
}

func (e *MountedError) Error() string {
	nodes := map[string]bool{}
	lines := make([]string, len(e.Mounts))
	for i, m := range e.Mounts {
		lines[i] = "  " + m.String()
		nodes[m.Node] = true
	}
	return fmt.Sprintf("refusing to replace the machines of %d node(s) while pods on them use Manila volumes: the new machines have no port on the storage network those volumes are mounted over:\n%s\nMove those workloads off these nodes (or delete their claims) first, or run again with --force to replace the machines anyway; %s",
		len(nodes), strings.Join(lines, "\n"), cmp.Or(e.Done, "nothing was changed"))
}
