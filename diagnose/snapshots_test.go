package diagnose

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/operator"
)

func snapshotObject(name, claim string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": name, "namespace": "app"},
		"spec":     map[string]any{"volumeSnapshotClassName": operator.VolumeSnapshotClassName, "source": map[string]any{"persistentVolumeClaimName": claim}},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func snapshotInputs(kubeObjects ...runtime.Object) Inputs {
	scheme := runtime.NewScheme()
	gvk := map[schema.GroupVersionResource]string{volumeSnapshotGVR: "VolumeSnapshotList", volumeSnapshotContentGVR: "VolumeSnapshotContentList"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, gvk,
		snapshotObject("daily", "data", map[string]any{"readyToUse": true, "restoreSize": "1Gi", "boundVolumeSnapshotContentName": "snapcontent-1"}),
		snapshotObject("refused", "fast", map[string]any{"readyToUse": false, "error": map[string]any{"message": "rpc error: parent share must advertise snapshot_support"}}),
		snapshotObject("orphan", "data", nil),
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
			"metadata": map[string]any{"name": "snapcontent-1"}, "status": map[string]any{"snapshotHandle": "manila-snap-1"}}},
	)
	return Inputs{Kube: fake.NewClientset(kubeObjects...), Dynamic: dyn}
}

func claim(name, class, size string, source *corev1.TypedLocalObjectReference) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class), DataSource: source,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
}

func checksOf(r *Report) string {
	var got []string
	for _, c := range r.Checks {
		got = append(got, c.Name+"="+string(c.Status))
	}
	return strings.Join(got, " ")
}

func TestDiagnoseSnapshots(t *testing.T) {
	fast := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-fast",
		Annotations: map[string]string{operator.AnnotationSnapshots: operator.ShareType{Name: "fast"}.SnapshotVerdict()}},
		Provisioner: operator.DriverName, Parameters: map[string]string{"type": "fast"}}
	gold := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-gold",
		Annotations: map[string]string{operator.AnnotationSnapshots: operator.SnapshotsSupported}},
		Provisioner: operator.DriverName, Parameters: map[string]string{"type": "gold"}}
	bound := claim("data", "csi-manila-gold", "1Gi", nil)
	bound.Status.Phase = corev1.ClaimBound
	in := snapshotInputs(fast, gold, bound, claim("fast", "csi-manila-fast", "1Gi", nil),
		claim("clone", "csi-manila-gold", "1Gi", &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "data"}),
		claim("small", "csi-manila-gold", "512Mi", &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "daily"}),
		claim("restore", "csi-manila-gold", "2Gi", &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "daily"}),
		claim("from-refused", "csi-manila-gold", "1Gi", &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "refused"}),
	)
	ctx := context.Background()
	for _, c := range []struct {
		target   Target
		checks   string
		evidence []string
	}{
		// Taken; the share type can; the Manila snapshot is not looked at without the cloud.
		{Target{Kind: "volumesnapshot", Namespace: "app", Name: "daily"}, "snapshot=passed share type=passed Manila snapshot=not checked",
			[]string{"readyToUse, content snapcontent-1, restoreSize 1Gi", "from the StorageClass's annotation", noCloud}},
		// Refused for its share type: said, with the way out.
		{Target{Kind: "volumesnapshot", Namespace: "app", Name: "refused"}, "snapshot=failed share type=failed",
			[]string{"not taken: rpc error", `share type "fast" lacks snapshot_support=True`, "snapshot_support=True create_share_from_snapshot_support=True fast"}},
		// Nobody handled it: no snapshot-controller.
		{Target{Kind: "volumesnapshot", Namespace: "app", Name: "orphan"}, "snapshot=failed share type=passed",
			[]string{"no snapshot-controller has handled it"}},
		{Target{Kind: "pvc", Namespace: "app", Name: "clone"}, "claim=failed data source=failed class=passed node=not checked",
			[]string{"a clone of claim data: the Manila CSI driver cannot clone volumes", "take a VolumeSnapshot of claim data"}},
		{Target{Kind: "pvc", Namespace: "app", Name: "small"}, "claim=failed data source=failed class=passed node=not checked",
			[]string{"the claim asks for 512Mi, less than the restoreSize 1Gi of VolumeSnapshot daily", "requests.storage of 1Gi or more"}},
		{Target{Kind: "pvc", Namespace: "app", Name: "restore"}, "claim=failed data source=passed class=passed node=not checked",
			[]string{"VolumeSnapshot daily is ready, restoreSize 1Gi, no more than the claim asks (2Gi)"}},
		{Target{Kind: "pvc", Namespace: "app", Name: "from-refused"}, "claim=failed data source=failed class=passed node=not checked",
			[]string{"VolumeSnapshot refused is not ready: not taken: rpc error", "manila-setup diagnose volumesnapshot/refused -n app"}},
	} {
		r, err := Run(ctx, in, c.target)
		if err != nil {
			t.Fatalf("%s: %v", c.target, err)
		}
		if got := checksOf(r); got != c.checks {
			t.Errorf("%s: checks %q, want %q: %+v", c.target, got, c.checks, r.Checks)
		}
		all := ""
		for _, ch := range r.Checks {
			all += ch.Evidence + " | " + ch.Fix + " | "
		}
		for _, want := range c.evidence {
			if !strings.Contains(all, want) {
				t.Errorf("%s: the checks do not say %q: %s", c.target, want, all)
			}
		}
	}
	if _, err := Run(ctx, in, Target{Kind: "volumesnapshot", Namespace: "app", Name: "none"}); err == nil || err.Error() != "VolumeSnapshot app/none does not exist" {
		t.Errorf("a snapshot that does not exist: %v", err)
	}
}
