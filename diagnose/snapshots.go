package diagnose

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
)

var (
	volumeSnapshotGVR        = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	volumeSnapshotContentGVR = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
)

// volumeSnapshot is what diagnose reads of a VolumeSnapshot and its content.
type volumeSnapshot struct {
	namespace, name string
	// claim is the claim it is (to be) taken of; class its VolumeSnapshotClass.
	claim, class string
	// statusSet: the snapshot-controller has handled it.
	statusSet   bool
	ready       bool
	errMsg      string
	content     string
	restoreSize *resource.Quantity
	// handle is the Manila snapshot's ID, from the bound content.
	handle string
}

// readSnapshot reads the VolumeSnapshot and, once bound, its content; nil when it does not exist.
func (r *run) readSnapshot(ctx context.Context, ns, name string) (*volumeSnapshot, error) {
	if r.in.Dynamic == nil {
		return nil, fmt.Errorf("VolumeSnapshot %s/%s: no client for snapshot.storage.k8s.io was given", ns, name)
	}
	u, err := r.in.Dynamic.Resource(volumeSnapshotGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, readError("VolumeSnapshot", ns, name, err)
	}
	s := &volumeSnapshot{namespace: ns, name: name}
	s.claim, _, _ = unstructured.NestedString(u.Object, "spec", "source", "persistentVolumeClaimName")
	s.class, _, _ = unstructured.NestedString(u.Object, "spec", "volumeSnapshotClassName")
	status, found, _ := unstructured.NestedMap(u.Object, "status")
	s.statusSet = found && len(status) > 0
	s.ready, _, _ = unstructured.NestedBool(u.Object, "status", "readyToUse")
	s.errMsg, _, _ = unstructured.NestedString(u.Object, "status", "error", "message")
	s.content, _, _ = unstructured.NestedString(u.Object, "status", "boundVolumeSnapshotContentName")
	if rs, ok, _ := unstructured.NestedString(u.Object, "status", "restoreSize"); ok {
		if q, err := resource.ParseQuantity(rs); err == nil {
			s.restoreSize = &q
		}
	}
	if s.content != "" {
		c, err := r.in.Dynamic.Resource(volumeSnapshotContentGVR).Get(ctx, s.content, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, readError("VolumeSnapshotContent", "", s.content, err)
		}
		if err == nil {
			s.handle, _, _ = unstructured.NestedString(c.Object, "status", "snapshotHandle")
		}
	}
	return s, nil
}

// judgeSnapshot is the check of the VolumeSnapshot itself: taken, refused (the driver's or the
// controller's words), or not handled yet.
func judgeSnapshot(s *volumeSnapshot, warning string) Check {
	c := Check{Name: "snapshot", Subject: "VolumeSnapshot " + s.namespace + "/" + s.name}
	switch {
	case s.ready:
		c.Status = Passed
		c.Evidence = fmt.Sprintf("readyToUse, content %s", s.content)
		if s.restoreSize != nil {
			c.Evidence += ", restoreSize " + s.restoreSize.String()
		}
	case s.errMsg != "":
		c.Status, c.Evidence = Failed, "not taken: "+s.errMsg
		c.Fix = "kubectl describe volumesnapshot -n " + s.namespace + " " + s.name + "  (the checks below say whether the share type is the cause)"
	case !s.statusSet:
		c.Status = Failed
		c.Evidence = "it has no status: no snapshot-controller has handled it (on OpenShift the platform runs one, the csi-snapshot-controller ClusterOperator)"
		c.Fix = "kubectl get clusteroperator csi-snapshot-controller; kubectl get pods -A -l app=snapshot-controller"
	default:
		c.Status, c.Evidence = NotChecked, "not ready yet, with no error: the driver's csi-snapshotter is taking it"
	}
	if warning != "" && !s.ready {
		c.Evidence += "; newest warning: " + warning
	}
	return c
}

// checkSnapshotTarget checks a VolumeSnapshot: itself, whether the share type of its claim can
// take snapshots, and the Manila snapshot behind it.
func (r *run) checkSnapshotTarget(ctx context.Context, ns, name string) error {
	s, err := r.readSnapshot(ctx, ns, name)
	if err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("VolumeSnapshot %s/%s does not exist", ns, name)
	}
	r.add(judgeSnapshot(s, r.newestWarning(ctx, "VolumeSnapshot", ns, name)))
	if s.class != "" && s.class != operator.VolumeSnapshotClassName {
		r.add(Check{Name: "snapshot class", Subject: "VolumeSnapshotClass " + s.class, Status: NotChecked,
			Evidence: fmt.Sprintf("not %s, the Manila driver's: another driver's snapshot, or a class of your own", operator.VolumeSnapshotClassName)})
	}
	if s.claim != "" {
		if err := r.checkSnapshotShareType(ctx, ns, s.claim); err != nil {
			return err
		}
	}
	if s.handle != "" {
		r.checkManilaSnapshot(ctx, s.handle)
	}
	return nil
}

// checkSnapshotShareType checks that the share type of the claim's volume can take snapshots:
// the driver refuses any other (both snapshot_support and create_share_from_snapshot_support).
func (r *run) checkSnapshotShareType(ctx context.Context, ns, claimName string) error {
	c := Check{Name: "share type", Subject: "PersistentVolumeClaim " + ns + "/" + claimName}
	pvc, err := r.in.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.Status, c.Evidence = NotChecked, "the claim the snapshot is taken of does not exist (any more)"
		r.add(c)
		return nil
	}
	if err != nil {
		return readError("PersistentVolumeClaim", ns, claimName, err)
	}
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		c.Status, c.Evidence = NotChecked, "the claim names no StorageClass"
		r.add(c)
		return nil
	}
	className := *pvc.Spec.StorageClassName
	sc, err := r.in.Kube.StorageV1().StorageClasses().Get(ctx, className, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		c.Status, c.Evidence = NotChecked, fmt.Sprintf("StorageClass %s of the claim no longer exists", className)
		r.add(c)
		return nil
	}
	if err != nil {
		return readError("StorageClass", "", className, err)
	}
	if sc.Provisioner != operator.DriverName {
		c.Status, c.Evidence = NotChecked, fmt.Sprintf("StorageClass %s is %s's, not the Manila driver's", className, sc.Provisioner)
		r.add(c)
		return nil
	}
	shareType := sc.Parameters["type"]
	c.Subject = fmt.Sprintf("share type %q of StorageClass %s", shareType, className)
	verdict, from := sc.Annotations[operator.AnnotationSnapshots], "the StorageClass's annotation "+operator.AnnotationSnapshots
	f := r.facts(ctx)
	if st, ok := f.shareTypeInfo[shareType]; ok {
		verdict, from = operator.ShareType{Name: shareType, SnapshotSupport: st.SnapshotSupport, CreateShareFromSnapshotSupport: st.CreateShareFromSnapshotSupport}.SnapshotVerdict(), "Manila's extra specs"
	}
	switch {
	case verdict == operator.SnapshotsSupported:
		c.Status, c.Evidence = Passed, "it has snapshot_support and create_share_from_snapshot_support (from "+from+")"
	case verdict == "":
		c.Status, c.Evidence = NotChecked, "not known: the class has no "+operator.AnnotationSnapshots+" annotation and Manila was not asked"
		if f.err != nil {
			c.Evidence += " (" + noCloud + ")"
		}
	default:
		c.Status, c.Evidence = Failed, strings.TrimPrefix(verdict, "not supported: ")+" (from "+from+")"
		c.Fix = fmt.Sprintf("snapshot claims of the StorageClasses named by: kubectl get volumesnapshotclass %s -o jsonpath='{.metadata.annotations.manila\\.csi\\.openstack\\.org/storage-classes}'; "+
			"or, as a cloud administrator, where the back end supports it: openstack%s share type set --extra-specs snapshot_support=True create_share_from_snapshot_support=True %s",
			operator.VolumeSnapshotClassName, osCloud(r.in.CloudName), shareType)
	}
	r.add(c)
	return nil
}

// checkManilaSnapshot checks the Manila snapshot behind a bound content.
func (r *run) checkManilaSnapshot(ctx context.Context, id string) {
	c := Check{Name: "Manila snapshot", Subject: "share snapshot " + id}
	f := r.facts(ctx)
	if f.err != nil {
		c.Status, c.Evidence = NotChecked, f.err.Error()
		r.add(c)
		return
	}
	s, err := f.client.Snapshot(ctx, id)
	switch {
	case openstack.KindOf(err) == openstack.KindNotFound:
		c.Status, c.Evidence = Failed, "Manila has no such snapshot: it was deleted outside the cluster, or the project cannot see it"
		c.Fix = "delete the VolumeSnapshot (its content points at nothing); take a new one"
	case err != nil:
		c.Status, c.Evidence = NotChecked, err.Error()
	case s.Status == "available":
		c.Status, c.Evidence = Passed, fmt.Sprintf("available, %d GiB, of share %s", s.Size, s.ShareID)
	case s.Status == "error" || s.Status == "error_deleting":
		c.Status, c.Evidence = Failed, fmt.Sprintf("status %s, of share %s: the back end failed it", s.Status, s.ShareID)
		c.Fix = fmt.Sprintf("openstack%s share snapshot show %s  (a cloud administrator reads the back end's reason in manila-share's log)", osCloud(r.in.CloudName), id)
	default:
		c.Status, c.Evidence = NotChecked, fmt.Sprintf("status %s, of share %s: Manila is at work", s.Status, s.ShareID)
	}
	r.add(c)
}

// checkDataSource checks what a claim is to be made from: a VolumeSnapshot (taken, and no larger
// than the claim asks) or another claim (a clone, which the driver cannot make).
func (r *run) checkDataSource(ctx context.Context, pvc *corev1.PersistentVolumeClaim) error {
	src := pvc.Spec.DataSource
	if src == nil || pvc.Status.Phase == corev1.ClaimBound {
		return nil
	}
	c := Check{Name: "data source", Subject: "PersistentVolumeClaim " + pvc.Namespace + "/" + pvc.Name}
	switch {
	case src.Kind == "PersistentVolumeClaim" && (src.APIGroup == nil || *src.APIGroup == ""):
		c.Status = Failed
		c.Evidence = fmt.Sprintf("a clone of claim %s: the Manila CSI driver cannot clone volumes (it does not offer CLONE_VOLUME)", src.Name)
		c.Fix = fmt.Sprintf("take a VolumeSnapshot of claim %s (volumeSnapshotClassName %s) and make the claim from it (dataSource kind VolumeSnapshot)",
			src.Name, operator.VolumeSnapshotClassName)
	case src.Kind == "VolumeSnapshot":
		s, err := r.readSnapshot(ctx, pvc.Namespace, src.Name)
		if err != nil {
			return err
		}
		request := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
		switch {
		case s == nil:
			c.Status, c.Evidence = Failed, fmt.Sprintf("VolumeSnapshot %s does not exist", src.Name)
			c.Fix = "kubectl get volumesnapshot -n " + pvc.Namespace
		case !s.ready:
			sub := judgeSnapshot(s, "")
			c.Status, c.Evidence, c.Fix = Failed, fmt.Sprintf("VolumeSnapshot %s is not ready: %s", src.Name, sub.Evidence),
				fmt.Sprintf("manila-setup diagnose volumesnapshot/%s -n %s", src.Name, pvc.Namespace)
		case s.restoreSize != nil && request.Cmp(*s.restoreSize) < 0:
			c.Status = Failed
			c.Evidence = fmt.Sprintf("the claim asks for %s, less than the restoreSize %s of VolumeSnapshot %s: a restore is never smaller than its snapshot",
				request.String(), s.restoreSize.String(), src.Name)
			c.Fix = fmt.Sprintf("recreate the claim with resources.requests.storage of %s or more", s.restoreSize.String())
		default:
			c.Status, c.Evidence = Passed, fmt.Sprintf("VolumeSnapshot %s is ready", src.Name)
			if s.restoreSize != nil {
				c.Evidence += fmt.Sprintf(", restoreSize %s, no more than the claim asks (%s)", s.restoreSize.String(), request.String())
			}
		}
	default:
		c.Status, c.Evidence = NotChecked, fmt.Sprintf("a data source of kind %s: not one the Manila driver makes volumes from", src.Kind)
	}
	r.add(c)
	return nil
}

// snapshotKinds are the names diagnose takes for a VolumeSnapshot target.
var snapshotKinds = []string{"volumesnapshot", "volumesnapshots", "vs"}

func isSnapshotKind(kind string) bool { return slices.Contains(snapshotKinds, kind) }
