package diagnose

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/manila-setup/manila-setup/operator"
)

// Run's chain on objects alone (no cloud): a bound claim whose class was deleted since still
// has its share followed, the class is not held against it, and what needs the cloud says so.
func TestRunWithoutCloud(t *testing.T) {
	class := "gone"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "app"},
		Spec:   corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: "pv-1"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
		Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: operator.DriverName, VolumeHandle: "share-1", VolumeAttributes: map[string]string{"shareID": "share-1"}}},
		ClaimRef: &corev1.ObjectReference{Namespace: "app", Name: "data"}}}
	kube := fake.NewClientset(pvc, pv)
	r, err := Run(context.Background(), Inputs{Kube: kube}, Target{Kind: "pvc", Namespace: "app", Name: "data"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range r.Checks {
		got = append(got, c.Name+"="+string(c.Status))
	}
	want := "claim=passed class=not checked share=not checked node=not checked"
	if strings.Join(got, " ") != want {
		t.Errorf("checks %q, want %q: %+v", strings.Join(got, " "), want, r.Checks)
	}
	if r.Count(Failed) != 0 || !strings.Contains(r.Checks[1].Evidence, "no longer exists: the claim is bound") || r.Checks[2].Evidence != noCloud {
		t.Errorf("%+v", r.Checks)
	}
	if _, err := Run(context.Background(), Inputs{Kube: kube}, Target{Kind: "pod", Namespace: "app", Name: "web"}); err == nil ||
		err.Error() != "Pod app/web not found" {
		t.Errorf("a pod that does not exist: %v", err)
	}
}
