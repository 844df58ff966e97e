//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shareaccessrules"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/snapshots"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/diagnose"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
)

var (
	volumeSnapshotGVR        = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	volumeSnapshotContentGVR = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
	volumeSnapshotClassGVR   = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
)

// snapshotsAndRestores is what a user does with snapshots, through the driver's own pods on the
// real node, the platform's snapshot-controller and the loopback Manila: it snapshots the Bound
// claim pvc (volume pv), restores the snapshot into a new claim that a pod mounts, is told why a
// restore smaller than the snapshot, a clone, and a snapshot of a share type that cannot take
// one are refused, deletes a snapshot (its Manila snapshot goes), and leaves one for `operator
// uninstall`, which must leave it alone. The Manila snapshots and shares it leaves are deleted
// at the end, so that they weigh on no later test.
func snapshotsAndRestores(t *testing.T, ctx context.Context, sim *testenv.SimCluster, node *testenv.RealNode, pvc *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume) {
	kc := sim.Client
	dyn, err := dynamic.NewForConfig(sim.Config)
	if err != nil {
		t.Fatal(err)
	}
	manila := manilaClient(t, ctx, testenv.CloudDemo)
	ns := pvc.Namespace
	t.Cleanup(func() { deleteLeftSnapshots(t, manila, pv.Spec.CSI.VolumeHandle) })
	start := time.Now()

	// The operator's VolumeSnapshotClass says which StorageClasses can take snapshots: here the
	// share type default can (snapshot_support and create_share_from_snapshot_support), cephfs-fast
	// cannot.
	vsc := waitObject(t, ctx, dyn.Resource(volumeSnapshotClassGVR), "", operator.VolumeSnapshotClassName)
	if got := vsc.GetAnnotations()[operator.AnnotationSnapshotStorageClasses]; got != "csi-manila-default" {
		t.Errorf("VolumeSnapshotClass %s: annotation %s = %q, want csi-manila-default (the one class whose share type can snapshot and restore)",
			vsc.GetName(), operator.AnnotationSnapshotStorageClasses, got)
	}
	for class, want := range map[string]string{"csi-manila-default": operator.SnapshotsSupported, "csi-manila-cephfs-fast": "not supported"} {
		sc, err := kc.StorageV1().StorageClasses().Get(ctx, class, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := sc.Annotations[operator.AnnotationSnapshots]; !strings.HasPrefix(got, want) {
			t.Errorf("StorageClass %s: annotation %s = %q, want it to start %q", class, operator.AnnotationSnapshots, got, want)
		}
	}

	// What the claim holds before its snapshot, written through a real NFS mount with the
	// node's address (its kernel's stand-in: this machine's kernel has no NFS client).
	kernel := nodeKernel(t, ctx, node)
	kernel.MustRun(t, ctx, "mkdir -p /mnt/claim && mount.nfs "+preferredExport(t, ctx, manila, pv.Spec.CSI.VolumeHandle)+
		" /mnt/claim -o vers=4.1 && echo before-snapshot >/mnt/claim/marker")

	// 1. A snapshot of the Bound claim: readyToUse, a Manila snapshot of the claim's share,
	// available, of its size.
	snap, manilaSnap := takeSnapshot(t, ctx, kc, dyn, manila, ns, "shared-snap", pvc.Name)
	kernel.MustRun(t, ctx, "echo after-snapshot >/mnt/claim/marker && echo later >/mnt/claim/later && umount /mnt/claim")
	if manilaSnap.ShareID != pv.Spec.CSI.VolumeHandle || manilaSnap.Size != 1 {
		t.Errorf("Manila snapshot %s: of share %s, %d GiB; want of the claim's share %s, 1 GiB", manilaSnap.ID, manilaSnap.ShareID, manilaSnap.Size, pv.Spec.CSI.VolumeHandle)
	}
	if rs, _, _ := unstructured.NestedString(snap.Object, "status", "restoreSize"); !restoreSizeIs(rs, "1Gi") {
		t.Errorf("VolumeSnapshot %s: restoreSize %q, want the share's 1Gi", snap.GetName(), rs)
	}
	t.Logf("VolumeSnapshot shared-snap ready, Manila snapshot %s available, after %s", manilaSnap.ID, time.Since(start).Round(time.Second))

	// 2. Restored into a new claim: Bound, a new share made from that snapshot, with access rules
	// that admit the node's address, and a pod of it mounts it on the node.
	restored := fromSnapshot(rwxClaim(ns, "restored", "csi-manila-default", "1Gi"), "shared-snap")
	if _, err := kc.CoreV1().PersistentVolumeClaims(ns).Create(ctx, restored, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	restoredPV := waitBound(t, ctx, kc, restored, 3*time.Minute, func() error { return nil })
	share, err := shares.Get(ctx, manila, restoredPV.Spec.CSI.VolumeHandle).Extract()
	if err != nil {
		t.Fatalf("the restored volume's share %s: %v", restoredPV.Spec.CSI.VolumeHandle, err)
	}
	if share.SnapshotID != manilaSnap.ID || share.ID == pv.Spec.CSI.VolumeHandle || share.Status != "available" || share.ShareTypeName != "default" {
		t.Errorf("restored share %s: snapshot_id %q, status %s, type %s; want a new share made from snapshot %s, available, of type default",
			share.ID, share.SnapshotID, share.Status, share.ShareTypeName, manilaSnap.ID)
	}
	admitsAll(t, "access rules of the restored share "+share.ID, activeRules(t, ctx, manila, share.ID), []netip.Addr{netip.MustParseAddr(node.IP)})
	mountReachesTheKernel(t, ctx, kc, node, "restored-app", restored, restoredPV)
	// The restore holds what the claim held when the snapshot was taken, and nothing after.
	if out := kernel.MustRun(t, ctx, "mkdir -p /mnt/restored && mount.nfs "+preferredExport(t, ctx, manila, share.ID)+
		" /mnt/restored -o vers=4.1 && cat /mnt/restored/marker && ls /mnt/restored && umount /mnt/restored"); out != "before-snapshot\nmarker\n" {
		t.Errorf("the restored claim's share, mounted with the node's address, holds %q; want only the marker written before the snapshot", out)
	} else {
		t.Logf("restore mounted from the node's address %s: it holds the marker written before the snapshot, not what came after", node.IP)
	}
	t.Logf("claim restored Bound to share %s (from snapshot %s), mounted on the node, after %s", share.ID, manilaSnap.ID, time.Since(start).Round(time.Second))

	// 3. What cannot be done is refused, with a reason the user can read on the claim.
	tooSmall := fromSnapshot(rwxClaim(ns, "too-small", "csi-manila-default", "512Mi"), "shared-snap")
	clone := rwxClaim(ns, "clone", "csi-manila-default", "1Gi")
	clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: pvc.Name}
	for _, c := range []struct {
		claim *corev1.PersistentVolumeClaim
		want  string
		// diagnose says why, in its check of the claim's data source.
		diagnosed string
	}{
		{tooSmall, "is less than the size", "less than the restoreSize 1Gi of VolumeSnapshot shared-snap"},
		{clone, "does not support clone", "the Manila CSI driver cannot clone volumes"},
	} {
		if _, err := kc.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c.claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		msg := waitEvent(t, ctx, kc, ns, c.claim.Name, "ProvisioningFailed", c.want)
		t.Logf("claim %s refused: %s", c.claim.Name, msg)
		if got, err := kc.CoreV1().PersistentVolumeClaims(ns).Get(ctx, c.claim.Name, metav1.GetOptions{}); err != nil || got.Status.Phase != corev1.ClaimPending {
			t.Errorf("claim %s: %v, phase %v; want it Pending", c.claim.Name, err, got.Status.Phase)
		}
		if check := diagnosed(t, ctx, sim, "pvc/"+c.claim.Name, ns, "data source"); check.Status != diagnose.Failed || !strings.Contains(check.Evidence, c.diagnosed) {
			t.Errorf("diagnose pvc/%s: data source check %+v, want failed saying %q", c.claim.Name, check, c.diagnosed)
		}
		if err := kc.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, c.claim.Name, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}

	// 4. A snapshot of a claim whose share type cannot take one: the driver refuses it, and the
	// operator says why on the VolumeSnapshot, naming the share type and what it lacks.
	fast, err := kc.CoreV1().PersistentVolumeClaims(ns).Create(ctx, rwxClaim(ns, "fast", "csi-manila-cephfs-fast", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitBound(t, ctx, kc, fast, 3*time.Minute, func() error { return nil })
	if _, err := dyn.Resource(volumeSnapshotGVR).Namespace(ns).Create(ctx, volumeSnapshot(ns, "fast-snap", fast.Name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := waitEvent(t, ctx, kc, ns, "fast-snap", operator.ReasonShareTypeCannotSnapshot, `"cephfs-fast"`)
	t.Logf("VolumeSnapshot fast-snap explained: %s", msg)
	for _, want := range []string{"snapshot_support", "create_share_from_snapshot_support", "csi-manila-default"} {
		if !strings.Contains(msg, want) {
			t.Errorf("event %s on fast-snap: %q does not name %s", operator.ReasonShareTypeCannotSnapshot, msg, want)
		}
	}
	if check := diagnosed(t, ctx, sim, "volumesnapshot/fast-snap", ns, "share type"); check.Status != diagnose.Failed ||
		!strings.Contains(check.Evidence, `share type "cephfs-fast" lacks`) || !strings.Contains(check.Evidence, "from Manila's extra specs") {
		t.Errorf("diagnose volumesnapshot/fast-snap: share type check %+v, want failed, from Manila's extra specs", check)
	}
	if err := dyn.Resource(volumeSnapshotGVR).Namespace(ns).Delete(ctx, "fast-snap", metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}

	// diagnose follows a snapshot that was taken down to its Manila snapshot.
	if check := diagnosed(t, ctx, sim, "volumesnapshot/shared-snap", ns, "Manila snapshot"); check.Status != diagnose.Passed || !strings.Contains(check.Evidence, "available, 1 GiB, of share "+pv.Spec.CSI.VolumeHandle) {
		t.Errorf("diagnose volumesnapshot/shared-snap: Manila snapshot check %+v, want passed: available, of the claim's share", check)
	}

	// 5. Deleting a VolumeSnapshot (Delete policy) deletes its Manila snapshot.
	if err := dyn.Resource(volumeSnapshotGVR).Namespace(ns).Delete(ctx, "shared-snap", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	content, _, _ := unstructured.NestedString(snap.Object, "status", "boundVolumeSnapshotContentName")
	if err := waitGone(ctx, 3*time.Minute, func() error { return nil }, func(ctx context.Context) error {
		_, err := dyn.Resource(volumeSnapshotContentGVR).Get(ctx, content, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Errorf("VolumeSnapshotContent %s of the deleted VolumeSnapshot: %v", content, err)
	}
	if err := waitGone(ctx, 2*time.Minute, func() error { return nil }, func(ctx context.Context) error {
		_, err := snapshots.Get(ctx, manila, manilaSnap.ID).Extract()
		return err
	}); err != nil {
		t.Errorf("Manila snapshot %s of the deleted VolumeSnapshot: %v", manilaSnap.ID, err)
	}
	t.Logf("VolumeSnapshot shared-snap deleted, its content and Manila snapshot gone, after %s", time.Since(start).Round(time.Second))

	// 6. A claim deleted while its share has a snapshot: Manila deletes no share that has
	// snapshots, so the volume stays Released, the provisioner saying so, until the snapshot is
	// deleted; then the volume and its share go.
	takeSnapshot(t, ctx, kc, dyn, manila, ns, "restored-snap", restored.Name)
	if err := kc.CoreV1().Pods(ns).Delete(ctx, "restored-app", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := kc.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, restored.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	failed := waitEvent(t, ctx, kc, "", restoredPV.Name, "VolumeFailedDelete", share.ID)
	t.Logf("volume %s of the deleted claim kept while its share has a snapshot: %s", restoredPV.Name, failed)
	if s, err := shares.Get(ctx, manila, share.ID).Extract(); err != nil || s.Status != "available" {
		t.Errorf("share %s while its snapshot exists: %v (%+v), want it still available", share.ID, err, s)
	}
	// Manila's words are "Invalid share: %(reason)s"; the operator says why, at its next resync.
	held := waitEvent(t, ctx, kc, "", restoredPV.Name, operator.ReasonShareHasSnapshots, "VolumeSnapshots restored-snap of namespace "+ns)
	t.Logf("the operator on volume %s: %s", restoredPV.Name, held)
	if err := dyn.Resource(volumeSnapshotGVR).Namespace(ns).Delete(ctx, "restored-snap", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitGone(ctx, 3*time.Minute, func() error { return nil }, func(ctx context.Context) error {
		_, err := kc.CoreV1().PersistentVolumes().Get(ctx, restoredPV.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Errorf("volume %s once its share's snapshot was deleted: %v\nevents:\n%s", restoredPV.Name, err, events(ctx, kc, "", restoredPV.Name))
	}
	if err := shareGone(ctx, manila, share.ID, 2*time.Minute, func() error { return nil }); err != nil {
		t.Error(err)
	}
	t.Logf("snapshot restored-snap deleted: volume %s and share %s gone, after %s", restoredPV.Name, share.ID, time.Since(start).Round(time.Second))

	// 7. `operator uninstall --force` (volumes exist) leaves the users' snapshots alone: the
	// VolumeSnapshot, its content, the Manila snapshot, and the VolumeSnapshotClass they name.
	keptSnap, kept := takeSnapshot(t, ctx, kc, dyn, manila, ns, "kept", pvc.Name)
	// must-gather holds the snapshot and its content, for whoever reads why one was not taken.
	gathered := filepath.Join(t.TempDir(), "must-gather")
	if out, err := exec.CommandContext(ctx, buildCLI(t), "must-gather", "--dest-dir", gathered, "--kubeconfig", sim.Kubeconfig).CombinedOutput(); err != nil {
		t.Fatalf("must-gather: %v\n%s", err, out)
	}
	keptContent, _, _ := unstructured.NestedString(keptSnap.Object, "status", "boundVolumeSnapshotContentName")
	for _, rel := range []string{"namespaces/" + ns + "/volumesnapshots/kept.yaml", "cluster-scoped/volumesnapshotcontents/" + keptContent + ".yaml"} {
		if _, err := os.Stat(filepath.Join(gathered, rel)); err != nil {
			t.Errorf("must-gather: %v", err)
		}
	}
	out, err := exec.CommandContext(ctx, buildCLI(t), "operator", "uninstall", "--force", "--kubeconfig", sim.Kubeconfig).CombinedOutput()
	if err != nil {
		t.Fatalf("operator uninstall --force: %v\n%s", err, out)
	}
	for _, want := range []string{"volumesnapshotclass/" + operator.VolumeSnapshotClassName + ": kept: VolumeSnapshotContent(s) ", "VolumeSnapshotContents that lose their driver (--force)"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("operator uninstall --force does not say %q:\n%s", want, out)
		}
	}
	if got, err := dyn.Resource(volumeSnapshotGVR).Namespace(ns).Get(ctx, "kept", metav1.GetOptions{}); err != nil || got.GetDeletionTimestamp() != nil {
		t.Errorf("VolumeSnapshot kept after uninstall: %v (deleting: %v)", err, got != nil && got.GetDeletionTimestamp() != nil)
	}
	if _, err := dyn.Resource(volumeSnapshotClassGVR).Get(ctx, operator.VolumeSnapshotClassName, metav1.GetOptions{}); err != nil {
		t.Errorf("VolumeSnapshotClass %s after uninstall, while a snapshot names it: %v\n%s", operator.VolumeSnapshotClassName, err, out)
	}
	if s, err := snapshots.Get(ctx, manila, kept.ID).Extract(); err != nil || s.Status != "available" {
		t.Errorf("Manila snapshot %s of VolumeSnapshot kept after uninstall: %v (%+v)", kept.ID, err, s)
	}
	t.Logf("operator uninstall --force left VolumeSnapshot kept and Manila snapshot %s alone, after %s", kept.ID, time.Since(start).Round(time.Second))
}

// volumeSnapshot is what a user writes: a snapshot of claim in the operator's class.
func volumeSnapshot(ns, name, claim string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"volumeSnapshotClassName": operator.VolumeSnapshotClassName,
			"source":                  map[string]any{"persistentVolumeClaimName": claim},
		},
	}}
}

// fromSnapshot makes claim a restore of the VolumeSnapshot snap.
func fromSnapshot(claim *corev1.PersistentVolumeClaim, snap string) *corev1.PersistentVolumeClaim {
	claim.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: snap}
	return claim
}

// takeSnapshot snapshots claim, waits until the VolumeSnapshot is readyToUse and returns it
// with its Manila snapshot, which must be available.
func takeSnapshot(t *testing.T, ctx context.Context, kc kubernetes.Interface, dyn dynamic.Interface, manila *gophercloud.ServiceClient, ns, name, claim string) (*unstructured.Unstructured, *snapshots.Snapshot) {
	t.Helper()
	vs := dyn.Resource(volumeSnapshotGVR).Namespace(ns)
	if _, err := vs.Create(ctx, volumeSnapshot(ns, name, claim), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var snap *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if snap, err = vs.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		ready, _, _ := unstructured.NestedBool(snap.Object, "status", "readyToUse")
		return ready, nil
	})
	if err != nil {
		status, _, _ := unstructured.NestedMap(snap.Object, "status")
		t.Fatalf("VolumeSnapshot %s/%s not readyToUse: %v\nstatus: %v\nevents:\n%s", ns, name, err, status, events(ctx, kc, ns, name))
	}
	contentName, _, _ := unstructured.NestedString(snap.Object, "status", "boundVolumeSnapshotContentName")
	content, err := dyn.Resource(volumeSnapshotContentGVR).Get(ctx, contentName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("VolumeSnapshotContent %q of VolumeSnapshot %s: %v", contentName, name, err)
	}
	handle, _, _ := unstructured.NestedString(content.Object, "status", "snapshotHandle")
	if policy, _, _ := unstructured.NestedString(content.Object, "spec", "deletionPolicy"); policy != "Delete" {
		t.Errorf("VolumeSnapshotContent %s: deletionPolicy %q, want the class's Delete", contentName, policy)
	}
	s, err := snapshots.Get(ctx, manila, handle).Extract()
	if err != nil {
		t.Fatalf("Manila snapshot %q of VolumeSnapshot %s: %v", handle, name, err)
	}
	if s.Status != "available" {
		t.Errorf("Manila snapshot %s of VolumeSnapshot %s: status %s, want available", s.ID, name, s.Status)
	}
	return snap, s
}

// activeRules waits until the share's access rules are all applied and returns them as an
// nfs-shareClient value (comma-separated), failing the test for a rule that is not active.
func activeRules(t *testing.T, ctx context.Context, manila *gophercloud.ServiceClient, shareID string) string {
	t.Helper()
	var rules []shareaccessrules.ShareAccess
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if rules, err = shareaccessrules.List(ctx, manila, shareID).Extract(); err != nil {
			return false, err
		}
		for _, r := range rules {
			if r.State != "active" {
				return false, nil
			}
		}
		return len(rules) > 0, nil
	})
	if err != nil {
		t.Fatalf("access rules of share %s: %v (%+v)", shareID, err, rules)
	}
	to := make([]string, 0, len(rules))
	for _, r := range rules {
		to = append(to, r.AccessTo)
	}
	return strings.Join(to, ",")
}

// waitEvent waits for an event of reason on the object name whose message holds want, and
// returns the message.
func waitEvent(t *testing.T, ctx context.Context, kc kubernetes.Interface, ns, name, reason, want string) string {
	t.Helper()
	var msg string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if strings.Contains(e.Message, want) {
				msg = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no event %s on %s/%s saying %q: %v\nevents:\n%s", reason, ns, name, want, err, events(ctx, kc, ns, name))
	}
	return msg
}

// waitObject waits until the object exists and returns it.
func waitObject(t *testing.T, ctx context.Context, r dynamic.NamespaceableResourceInterface, ns, name string) *unstructured.Unstructured {
	t.Helper()
	var obj *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		obj, err = r.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("%s %s: %v", r, name, err)
	}
	return obj
}

// deleteLeftSnapshots deletes, in Manila, the shares made from snapshots of share and those
// snapshots, so that what a test left (uninstall leaves it all) weighs on no later test.
func deleteLeftSnapshots(t *testing.T, manila *gophercloud.ServiceClient, share string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pages, err := snapshots.ListDetail(manila, snapshots.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Logf("cleanup: listing Manila snapshots: %v", err)
		return
	}
	all, err := snapshots.ExtractSnapshots(pages)
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	for _, s := range all {
		if s.ShareID != share {
			continue
		}
		if err := snapshots.Delete(ctx, manila, s.ID).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
			t.Logf("cleanup: deleting Manila snapshot %s: %v", s.ID, err)
		}
	}
}

// restoreSizeIs tells whether a VolumeSnapshot's restoreSize is the quantity want.
func restoreSizeIs(got, want string) bool {
	q, err := resource.ParseQuantity(got)
	return err == nil && q.Cmp(resource.MustParse(want)) == 0
}

// diagnosed runs `manila-setup diagnose TARGET -o json` as a user does, with the cloud, and
// returns its check named name (failing the test when there is none).
func diagnosed(t *testing.T, ctx context.Context, sim *testenv.SimCluster, target, ns, name string) diagnose.Check {
	t.Helper()
	out, err := exec.CommandContext(ctx, buildCLI(t), "diagnose", target, "-n", ns, "--kubeconfig", sim.Kubeconfig,
		"--os-cloud", testenv.CloudDemo, "-o", "json").Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("diagnose %s: %v", target, err)
	}
	var r diagnose.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("diagnose %s -o json: %v\n%s", target, err, out)
	}
	for _, c := range r.Checks {
		if c.Name == name {
			t.Logf("diagnose %s: %s %s: %s", target, c.Name, c.Status, c.Evidence)
			return c
		}
	}
	t.Fatalf("diagnose %s has no check %q: %+v", target, name, r.Checks)
	return diagnose.Check{}
}
