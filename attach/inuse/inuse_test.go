package inuse

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/manila-setup/manila-setup/attach"
)

func pv(name, driver, ns, claim string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: name}},
		ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: claim}}}
}

func podOn(name, node string, phase corev1.PodPhase, volumes ...corev1.Volume) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps"}, Spec: corev1.PodSpec{NodeName: node, Volumes: volumes}, Status: corev1.PodStatus{Phase: phase}}
}

func claimVolume(claim string) corev1.Volume {
	return corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

// TestManilaMounts: only running pods on the nodes asked about, using a claim bound to a Manila
// PersistentVolume (directly or as a generic ephemeral volume), count.
func TestManilaMounts(t *testing.T) {
	kube := fake.NewClientset(
		pv("pv-manila", attach.ManilaDriver, "apps", "data"),
		pv("pv-eph", attach.ManilaDriver, "apps", "eph-v"),
		pv("pv-cinder", "cinder.csi.openstack.org", "apps", "block"),
		podOn("app", "n1", corev1.PodRunning, claimVolume("data")),
		podOn("eph", "n1", corev1.PodRunning, corev1.Volume{Name: "v", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}),
		podOn("block", "n1", corev1.PodRunning, claimVolume("block")),
		podOn("done", "n1", corev1.PodSucceeded, claimVolume("data")),
		podOn("elsewhere", "n2", corev1.PodRunning, claimVolume("data")),
	)
	// The fake clientset does not filter by field selector: do it as the apiserver does.
	kube.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		node := strings.TrimPrefix(a.(k8stesting.ListAction).GetListRestrictions().Fields.String(), "spec.nodeName=")
		all, err := kube.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), "")
		if err != nil {
			return true, nil, err
		}
		list := all.(*corev1.PodList)
		var keep []corev1.Pod
		for _, p := range list.Items {
			if p.Spec.NodeName == node {
				keep = append(keep, p)
			}
		}
		list.Items = keep
		return true, list, nil
	})
	mounts, err := ManilaMounts(context.Background(), kube, []string{"n1"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range mounts {
		got = append(got, m.String())
	}
	want := "pod apps/app on node n1 (claim apps/data, PersistentVolume pv-manila)|pod apps/eph on node n1 (claim apps/eph-v, PersistentVolume pv-eph)"
	if strings.Join(got, "|") != want {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	err = &attach.MountedError{Mounts: mounts}
	var mounted *attach.MountedError
	if !errors.As(err, &mounted) || !strings.Contains(err.Error(), "1 node(s)") || !strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("refusal: %v", err)
	}
	if none, err := ManilaMounts(context.Background(), kube, nil); err != nil || none != nil {
		t.Errorf("no nodes: %v %v", none, err)
	}
}
