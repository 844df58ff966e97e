package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// refusedSnapshot is a VolumeSnapshot of claim as the snapshot-controller leaves one the driver
// refused (errMsg set, not ready); errMsg "" is one on its way.
func refusedSnapshot(uid, ns, name, claim, errMsg string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": uid},
		"spec":     map[string]any{"source": map[string]any{"persistentVolumeClaimName": claim}},
		"status":   map[string]any{"readyToUse": false},
	}}
	if errMsg != "" {
		_ = unstructured.SetNestedField(u.Object, errMsg, "status", "error", "message")
	}
	return u
}

func TestSnapshotExplainer(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	lister := cache.NewGenericLister(indexer, schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"})
	claims := map[string]string{"app/fast": "csi-manila-fast", "app/gold": "csi-manila-gold", "app/rbd": "standard-csi"}
	classes := map[string]*storagev1.StorageClass{
		"csi-manila-fast": {ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-fast"}, Provisioner: operator.DriverName, Parameters: map[string]string{"type": "fast"}},
		"csi-manila-gold": {ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-gold"}, Provisioner: operator.DriverName, Parameters: map[string]string{"type": "gold"}},
		// The platform's class: no annotation; the verdict comes from Manila's share types.
		"standard-csi": {ObjectMeta: metav1.ObjectMeta{Name: "standard-csi"}, Provisioner: "cinder.csi.openstack.org"},
	}
	gets := 0
	events := &eventLog{}
	findings := &machinery.Published[manilaFindings]{}
	findings.Publish(&manilaFindings{ShareTypes: []operator.ShareType{
		{Name: "fast", SnapshotSupport: true},
		{Name: "gold", SnapshotSupport: true, CreateShareFromSnapshotSupport: true},
	}})
	e := &snapshotExplainer{
		crdExists: func(name string) bool { return name == volumeSnapshotCRD },
		snapshots: func() (cache.GenericLister, bool) { return lister, true },
		claim: func(_ context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
			gets++
			class, ok := claims[ns+"/"+name]
			if !ok {
				return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
			}
			return &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class)}}, nil
		},
		classes: func(name string) (*storagev1.StorageClass, error) {
			if sc, ok := classes[name]; ok {
				return sc, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "storageclasses"}, name)
		},
		allClass: func() ([]*storagev1.StorageClass, error) {
			return []*storagev1.StorageClass{classes["csi-manila-fast"], classes["csi-manila-gold"], classes["standard-csi"]}, nil
		},
		// Before any volume is held back: no VolumeFailedDelete yet.
		failedDeletes: func(context.Context) ([]corev1.Event, error) { return nil, nil },
		volume: func(_ context.Context, name string) (*corev1.PersistentVolume, error) {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
		},
		findings: findings, recorder: events, told: map[types.UID]bool{}, annotatedClass: true,
	}
	for _, s := range []*unstructured.Unstructured{
		refusedSnapshot("1", "app", "fast-snap", "fast", "rpc error: parent share must advertise snapshot_support and create_share_from_snapshot_support capabilities"),
		refusedSnapshot("2", "app", "fast-pending", "fast", ""),
		refusedSnapshot("3", "app", "gold-snap", "gold", "rpc error: deadline exceeded"),
		refusedSnapshot("4", "app", "rbd-snap", "rbd", "another driver's error"),
		refusedSnapshot("5", "app", "gone-snap", "gone", "claim not found"),
	} {
		if err := indexer.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	ctrl := machinery.NewController("test", nil, e.sync)
	if err := e.sync(context.Background(), ctrl); err != nil {
		t.Fatal(err)
	}
	// Only the refused snapshot of a share type that cannot is explained: not one on its way,
	// not one the driver refused for another reason, not another driver's, not a missing claim's.
	if len(events.events) != 1 {
		t.Fatalf("events %q, want one", events.events)
	}
	msg := events.events[0]
	for _, want := range []string{"Warning " + operator.ReasonShareTypeCannotSnapshot, "claim app/fast (StorageClass csi-manila-fast)",
		`share type "fast" lacks create_share_from_snapshot_support=True`, "Volumes of StorageClass csi-manila-gold can be snapshotted",
		operator.VolumeSnapshotClassName} {
		if !strings.Contains(msg, want) {
			t.Errorf("event %q does not say %q", msg, want)
		}
	}
	if strings.Contains(msg, "standard-csi") {
		t.Errorf("event %q names another driver's class", msg)
	}
	// Each is looked at once: the next sync asks for no claim and says nothing again.
	before := gets
	if err := e.sync(context.Background(), ctrl); err != nil {
		t.Fatal(err)
	}
	if gets != before || len(events.events) != 1 {
		t.Errorf("second sync: %d claim reads, %d events; want none new", gets-before, len(events.events)-1)
	}
	// The one on its way is refused later: it is explained then.
	if err := indexer.Update(refusedSnapshot("2", "app", "fast-pending", "fast", "rpc error: parent share must advertise ...")); err != nil {
		t.Fatal(err)
	}
	if err := e.sync(context.Background(), ctrl); err != nil {
		t.Fatal(err)
	}
	if len(events.events) != 2 {
		t.Errorf("events %q, want the pending snapshot explained once refused", events.events)
	}
	// A deleted snapshot is forgotten.
	if err := indexer.Delete(refusedSnapshot("1", "app", "fast-snap", "fast", "")); err != nil {
		t.Fatal(err)
	}
	if err := e.sync(context.Background(), ctrl); err != nil {
		t.Fatal(err)
	}
	if e.told["1"] {
		t.Error("the deleted snapshot is still remembered")
	}
	// The claim gold was deleted while gold-snap is of it: its volume is held back, and said so
	// once; another driver's volume the provisioner could not delete is not the operator's.
	volumes := map[string]*corev1.PersistentVolume{
		"pv-gold": {ObjectMeta: metav1.ObjectMeta{Name: "pv-gold", UID: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
			ClaimRef:               &corev1.ObjectReference{Namespace: "app", Name: "gold"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: operator.DriverName, VolumeHandle: "share-gold"}}}},
		"pv-rbd": {ObjectMeta: metav1.ObjectMeta{Name: "pv-rbd", UID: "pv-2"}, Spec: corev1.PersistentVolumeSpec{
			ClaimRef:               &corev1.ObjectReference{Namespace: "app", Name: "rbd"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "cinder.csi.openstack.org", VolumeHandle: "vol"}}}},
	}
	e.failedDeletes = func(context.Context) ([]corev1.Event, error) {
		return []corev1.Event{
			{InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolume", Name: "pv-gold", UID: "pv-1"}, Reason: "VolumeFailedDelete"},
			{InvolvedObject: corev1.ObjectReference{Kind: "PersistentVolume", Name: "pv-rbd", UID: "pv-2"}, Reason: "VolumeFailedDelete"},
		}, nil
	}
	e.volume = func(_ context.Context, name string) (*corev1.PersistentVolume, error) { return volumes[name], nil }
	for range 2 {
		if err := e.sync(context.Background(), ctrl); err != nil {
			t.Fatal(err)
		}
	}
	if len(events.events) != 3 || !strings.HasPrefix(events.events[2], "Warning "+operator.ReasonShareHasSnapshots+" PersistentVolume pv-gold (share share-gold, of deleted claim app/gold)") ||
		!strings.Contains(events.events[2], "VolumeSnapshots gold-snap of namespace app are of it") {
		t.Errorf("events %q, want a third, once, on pv-gold naming gold-snap", events.events)
	}

	// A claim that cannot be read is tried again at the next sync.
	e.claim = func(context.Context, string, string) (*corev1.PersistentVolumeClaim, error) {
		return nil, errors.New("connection refused")
	}
	if err := indexer.Add(refusedSnapshot("6", "app", "later", "fast", "refused")); err != nil {
		t.Fatal(err)
	}
	if err := e.sync(context.Background(), ctrl); err != nil || e.told["6"] {
		t.Errorf("sync: %v; told %v, want it left for the next sync", err, e.told["6"])
	}
}

// BenchmarkSnapshotExplainerSync is the explainer's steady state at every resync: 1000
// VolumeSnapshots, all ready, none held back (the Events list answers nothing).
func BenchmarkSnapshotExplainerSync(b *testing.B) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i := range 1000 {
		s := refusedSnapshot(fmt.Sprint("uid-", i), fmt.Sprint("ns-", i%50), fmt.Sprint("snap-", i), fmt.Sprint("claim-", i), "")
		_ = unstructured.SetNestedField(s.Object, true, "status", "readyToUse")
		if err := indexer.Add(s); err != nil {
			b.Fatal(err)
		}
	}
	lister := cache.NewGenericLister(indexer, schema.GroupResource{Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"})
	e := &snapshotExplainer{
		crdExists:     func(string) bool { return true },
		snapshots:     func() (cache.GenericLister, bool) { return lister, true },
		failedDeletes: func(context.Context) ([]corev1.Event, error) { return nil, nil },
		findings:      &machinery.Published[manilaFindings]{}, recorder: &eventLog{}, told: map[types.UID]bool{},
	}
	ctrl := machinery.NewController("bench", nil, e.sync)
	b.ReportAllocs()
	for b.Loop() {
		if err := e.sync(context.Background(), ctrl); err != nil {
			b.Fatal(err)
		}
	}
}
