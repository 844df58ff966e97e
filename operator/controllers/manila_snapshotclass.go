package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// snapshotClassCRD is the CRD the driver's VolumeSnapshotClass needs: on OpenShift, the
// platform's csi-snapshot-controller-operator installs it.
const snapshotClassCRD = "volumesnapshotclasses.snapshot.storage.k8s.io"

// snapshotClassInputs is what the VolumeSnapshotClass's owner needs.
type snapshotClassInputs struct {
	// crdExists tells whether a CRD is served; nil: never.
	crdExists func(name string) bool
	vars      func(*operatorv1.OperatorSpec) map[string]string
	apply     func(context.Context, runtime.Object) (runtime.Object, error)
}

// snapshotClassOwner keeps the driver's VolumeSnapshotClass (driver mode, once its CRD is
// served), annotated with the StorageClasses whose share types can take snapshots: what a user
// reads before taking one. It is kept when the driver is removed, as OpenShift's own operator
// keeps it.
type snapshotClassOwner struct{ snapshotClassInputs }

func newSnapshotClassOwner(in snapshotClassInputs) *snapshotClassOwner {
	return &snapshotClassOwner{in}
}

// sync applies the class after the StorageClasses' sync (classes) for the share types found.
func (o *snapshotClassOwner) sync(ctx context.Context, spec *operatorv1.OperatorSpec, found *manilaFindings, classes storageClassesResult, requeue func(time.Duration)) error {
	if o.crdExists == nil || !o.crdExists(snapshotClassCRD) {
		return nil
	}
	if err := o.write(ctx, spec, found, classes, requeue); err != nil {
		return fmt.Errorf("VolumeSnapshotClass %s: %w", operator.VolumeSnapshotClassName, err)
	}
	return nil
}

// write applies the class unless the StorageClasses it names are still to be written.
func (o *snapshotClassOwner) write(ctx context.Context, spec *operatorv1.OperatorSpec, found *manilaFindings, classes storageClassesResult, requeue func(time.Duration)) error {
	vsc, err := operator.ReadUnstructuredAsset("volumesnapshotclass.yaml", o.vars(spec))
	if err != nil {
		return err
	}
	which := operator.SnapshotStorageClasses(found.ShareTypes, classes.classOf)
	if classes.classOf == nil {
		if classes.state == operatorv1.ManagedStorageClass {
			// The classes are not written yet (the Machines are being read): the sync that
			// writes them applies the class.
			return nil
		}
		which = "not known: the StorageClasses are not managed (storageClassState " + string(classes.state) + ")"
	}
	annotations := vsc.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[operator.AnnotationSnapshotStorageClasses] = which
	vsc.SetAnnotations(annotations)
	_, err = o.apply(ctx, vsc)
	if errors.Is(err, machinery.ErrNotCached) {
		// The informer of VolumeSnapshotClasses starts with the CRD and has not listed yet.
		requeue(500 * time.Millisecond)
		return nil
	}
	return err
}
