package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// volumeSnapshotCRD is the CRD of VolumeSnapshots: on OpenShift the platform's
// csi-snapshot-controller-operator installs it.
const volumeSnapshotCRD = "volumesnapshots.snapshot.storage.k8s.io"

// snapshotExplainer says what the driver's and Manila's own words leave out about snapshots:
//   - on a VolumeSnapshot the driver refused because of its share type, which share type, what it
//     lacks, which StorageClasses can, and who can change it (the driver says only "parent share
//     must advertise snapshot_support and create_share_from_snapshot_support capabilities");
//   - on a volume whose claim was deleted while VolumeSnapshots of it exist, that Manila deletes
//     no share with snapshots, and which VolumeSnapshots to delete (Manila says only "Invalid
//     share: %(reason)s", which the provisioner repeats as VolumeFailedDelete).
//
// One Warning Event per VolumeSnapshot, and per volume.
type snapshotExplainer struct {
	crdExists func(name string) bool
	snapshots func() (cache.GenericLister, bool)
	claim     func(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	classes   func(name string) (*storagev1.StorageClass, error)
	allClass  func() ([]*storagev1.StorageClass, error)
	// failedDeletes are the provisioner's VolumeFailedDelete Events of volumes, from the cache
	// (machinery.Informers.VolumeFailedDeletes); volume reads a volume.
	failedDeletes func(ctx context.Context) ([]corev1.Event, error)
	volume        func(ctx context.Context, name string) (*corev1.PersistentVolume, error)
	findings      *machinery.Published[manilaFindings]
	recorder      machinery.Recorder
	// annotatedClass: the VolumeSnapshotClass is the operator's, annotated with the classes that
	// can (driver mode); beside the platform it is the platform's.
	annotatedClass bool
	// told are the VolumeSnapshots and volumes explained (or found to need no word from the
	// operator): each is looked at once, whatever number of updates it gets.
	told map[types.UID]bool
}

const snapshotExplainerName = "SnapshotExplainer"

// newSnapshotExplainer watches VolumeSnapshots (once their CRD is served) and the StorageClasses.
func newSnapshotExplainer(w wiring) *machinery.Controller {
	failedDeletes := w.inf.VolumeFailedDeletes()
	e := &snapshotExplainer{
		crdExists: w.inf.CRDExists,
		snapshots: func() (cache.GenericLister, bool) { return w.inf.DynamicLister(machinery.VolumeSnapshotGVR) },
		claim: func(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
			var pvc corev1.PersistentVolumeClaim
			err := w.kube.Core.Get().Namespace(namespace).Resource("persistentvolumeclaims").Name(name).Do(ctx).Into(&pvc)
			return &pvc, err
		},
		failedDeletes: func(context.Context) ([]corev1.Event, error) {
			var out []corev1.Event
			for _, obj := range failedDeletes.GetStore().List() {
				if ev, ok := obj.(*corev1.Event); ok {
					out = append(out, *ev)
				}
			}
			return out, nil
		},
		volume: func(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
			var pv corev1.PersistentVolume
			err := w.kube.Core.Get().Resource("persistentvolumes").Name(name).Do(ctx).Into(&pv)
			return &pv, err
		},
		classes:  w.l.StorageClasses.Get,
		allClass: func() ([]*storagev1.StorageClass, error) { return w.l.StorageClasses.List(labels.Everything()) },
		findings: w.findings, recorder: w.recorder, told: map[types.UID]bool{}, annotatedClass: w.profile.deploysDriver,
	}
	ctrl := w.loop.Controller(snapshotExplainerName, e.sync, w.inf.CRDs, failedDeletes)
	w.inf.OnDynamic(machinery.VolumeSnapshotGVR, ctrl.EventHandler())
	return ctrl
}

func (e *snapshotExplainer) sync(ctx context.Context, syncCtx *machinery.Controller) error {
	if !e.crdExists(volumeSnapshotCRD) {
		return nil
	}
	lister, synced := e.snapshots()
	if !synced {
		syncCtx.RequeueAfter(machinery.CoalesceWindow)
		return nil
	}
	objs, err := lister.List(labels.Everything())
	if err != nil {
		return err
	}
	seen := make(map[types.UID]bool, len(objs))
	var snapshots []*unstructured.Unstructured
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		snapshots = append(snapshots, u)
		seen[u.GetUID()] = true
		if e.told[u.GetUID()] {
			continue
		}
		refused, _, _ := unstructured.NestedString(u.Object, "status", "error", "message")
		ready, _, _ := unstructured.NestedBool(u.Object, "status", "readyToUse")
		claim, _, _ := unstructured.NestedString(u.Object, "spec", "source", "persistentVolumeClaimName")
		if refused == "" || ready || claim == "" {
			continue
		}
		why, err := e.explain(ctx, u.GetNamespace(), claim)
		if err != nil {
			// Looked at again at the next change or resync.
			klog.V(2).Infof("VolumeSnapshot %s/%s: %v", u.GetNamespace(), u.GetName(), err)
			continue
		}
		e.told[u.GetUID()] = true
		if why == "" {
			continue
		}
		e.recorder.WarningOn(corev1.ObjectReference{APIVersion: "snapshot.storage.k8s.io/v1", Kind: "VolumeSnapshot",
			Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID()}, operator.ReasonShareTypeCannotSnapshot, "%s", why)
	}
	// Only while snapshots exist can one hold a volume back: then the Events the provisioner
	// wrote about volumes it could not delete (from the cache; nearly always none).
	if len(snapshots) > 0 {
		if err := e.explainHeldVolumes(ctx, snapshots, seen); err != nil {
			klog.V(2).Infof("volumes the provisioner could not delete: %v", err)
		}
	}
	for uid := range e.told {
		if !seen[uid] {
			delete(e.told, uid)
		}
	}
	return nil
}

// explainHeldVolumes says, on each volume of the driver the provisioner failed to delete whose
// claim has VolumeSnapshots, that Manila deletes no share with snapshots, naming them. The
// volumes looked at are added to seen.
func (e *snapshotExplainer) explainHeldVolumes(ctx context.Context, snapshots []*unstructured.Unstructured, seen map[types.UID]bool) error {
	evs, err := e.failedDeletes(ctx)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		uid := ev.InvolvedObject.UID
		if uid == "" {
			continue
		}
		seen[uid] = true
		if e.told[uid] {
			continue
		}
		pv, err := e.volume(ctx, ev.InvolvedObject.Name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		e.told[uid] = true
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != operator.DriverName || pv.Spec.ClaimRef == nil {
			continue
		}
		ns, claim := pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name
		var of []string
		for _, u := range snapshots {
			if source, _, _ := unstructured.NestedString(u.Object, "spec", "source", "persistentVolumeClaimName"); u.GetNamespace() == ns && source == claim {
				of = append(of, u.GetName())
			}
		}
		if len(of) == 0 {
			continue
		}
		slices.Sort(of)
		e.recorder.WarningOn(corev1.ObjectReference{APIVersion: "v1", Kind: "PersistentVolume", Name: pv.Name, UID: pv.UID},
			operator.ReasonShareHasSnapshots,
			"PersistentVolume %s (share %s, of deleted claim %s/%s) is not deleted: Manila deletes no share that has snapshots, and VolumeSnapshots %s of namespace %s are of it. "+
				"Delete them (after restoring what you need from them) and the provisioner deletes the volume and its share at its next retry",
			pv.Name, pv.Spec.CSI.VolumeHandle, ns, claim, strings.Join(of, ", "), ns)
	}
	return nil
}

// explain is why the driver cannot snapshot the claim's volume when the reason is its share type,
// or "" when it is not (another driver's claim, or a share type that can).
func (e *snapshotExplainer) explain(ctx context.Context, namespace, claimName string) (string, error) {
	claim, err := e.claim(ctx, namespace, claimName)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if claim.Spec.StorageClassName == nil {
		return "", nil
	}
	sc, err := e.classes(*claim.Spec.StorageClassName)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil || sc.Provisioner != operator.DriverName {
		return "", err
	}
	verdict, shareType := e.verdict(sc)
	if verdict == "" || verdict == operator.SnapshotsSupported {
		return "", nil
	}
	msg := fmt.Sprintf("the Manila CSI driver cannot snapshot claim %s/%s (StorageClass %s): %s. ",
		namespace, claimName, sc.Name, strings.TrimPrefix(verdict, "not supported: "))
	switch can := e.snapshotClasses(); {
	case len(can) > 0 && e.annotatedClass:
		msg += fmt.Sprintf("Volumes of StorageClass %s can be snapshotted (annotation %s of VolumeSnapshotClass %s). ",
			strings.Join(can, ", "), operator.AnnotationSnapshotStorageClasses, operator.VolumeSnapshotClassName)
	case len(can) > 0:
		msg += fmt.Sprintf("Volumes of StorageClass %s can be snapshotted. ", strings.Join(can, ", "))
	default:
		msg += "No StorageClass of the driver has a share type that can. "
	}
	return msg + fmt.Sprintf("A cloud administrator can set both extra specs on share type %q if its back end supports them", shareType), nil
}

// verdict is the class's AnnotationSnapshots as of Manila's latest answer (a class of the
// platform's has no annotation): the share type it serves, looked up in what Manila last said,
// else the annotation.
func (e *snapshotExplainer) verdict(sc *storagev1.StorageClass) (verdict, shareType string) {
	shareType = sc.Parameters["type"]
	if f := e.findings.Load(); f != nil && f.Err == nil {
		if i := slices.IndexFunc(f.ShareTypes, func(t operator.ShareType) bool { return t.Name == shareType }); i >= 0 {
			return f.ShareTypes[i].SnapshotVerdict(), shareType
		}
	}
	return sc.Annotations[operator.AnnotationSnapshots], shareType
}

// snapshotClasses are the driver's StorageClasses whose share types can take snapshots, sorted.
func (e *snapshotExplainer) snapshotClasses() []string {
	all, err := e.allClass()
	if err != nil {
		return nil
	}
	var names []string
	for _, sc := range all {
		if sc.Provisioner != operator.DriverName {
			continue
		}
		if v, _ := e.verdict(sc); v == operator.SnapshotsSupported {
			names = append(names, sc.Name)
		}
	}
	slices.Sort(names)
	return names
}
