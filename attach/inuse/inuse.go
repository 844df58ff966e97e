// Package inuse finds the pods that use Manila volumes on given nodes. It is apart from
// package attach because it needs client-go's clientset, which registers every Kubernetes API
// group at start; the operator links attach (the storage network's fitness and capacity) and
// none of that.
package inuse

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach"
)

// ManilaMounts finds the pods on nodes that use a Manila volume: a claim bound to a
// PersistentVolume of ManilaDriver, named by the pod directly or as a generic ephemeral volume.
// Pods that have ended are not counted: they mount nothing.
func ManilaMounts(ctx context.Context, kube kubernetes.Interface, nodes []string) ([]attach.Mount, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the PersistentVolumes, to find the Manila volumes in use: %w", err)
	}
	manila := map[string]string{} // namespace/claim: PV
	for _, pv := range pvs.Items {
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != attach.ManilaDriver || pv.Spec.ClaimRef == nil {
			continue
		}
		manila[pv.Spec.ClaimRef.Namespace+"/"+pv.Spec.ClaimRef.Name] = pv.Name
	}
	if len(manila) == 0 {
		return nil, nil
	}
	var out []attach.Mount
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
					out = append(out, attach.Mount{Node: node, Pod: pod.Namespace + "/" + pod.Name, Claim: key, Volume: pv})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b attach.Mount) int { return strings.Compare(a.Node+a.Pod+a.Claim, b.Node+b.Pod+b.Claim) })
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
