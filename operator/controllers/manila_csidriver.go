package controllers

import (
	"context"
	"fmt"

	operatorv1 "github.com/openshift/api/operator/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manila-setup/manila-setup/operator"
)

// csiDriverInputs is what the CSIDriver's owner needs.
type csiDriverInputs struct {
	// exists tells whether the CSIDriver object is in the cluster (and not being deleted).
	exists          func() bool
	vars            func(*operatorv1.OperatorSpec) map[string]string
	apply           func(context.Context, runtime.Object) (runtime.Object, error)
	deleteIfPresent func(context.Context, runtime.Object) error
}

// csiDriverOwner keeps the CSIDriver object manila.csi.openstack.org, in driver mode only (in
// companion mode the driver is the platform's). The Manila controller applies it each time
// Manila answers with share types, so the first such answer installs the driver, which the other
// controllers wait for; it is deleted only for managementState Removed, never because Manila
// went away or failed: pods must still be able to unmount.
type csiDriverOwner struct{ csiDriverInputs }

func newCSIDriverOwner(in csiDriverInputs) *csiDriverOwner { return &csiDriverOwner{in} }

// installed tells whether the driver is installed. It is read from the cluster, so it survives
// restarts of the operator.
func (d *csiDriverOwner) installed() bool { return d.exists() }

// sync writes the CSIDriver object as the asset has it.
func (d *csiDriverOwner) sync(ctx context.Context, spec *operatorv1.OperatorSpec) error {
	obj, err := operator.ReadAsset("csidriver.yaml", d.vars(spec))
	if err == nil {
		_, err = d.apply(ctx, obj)
	}
	if err != nil {
		return fmt.Errorf("CSIDriver %s: %w", operator.DriverName, err)
	}
	return nil
}

// remove deletes the CSIDriver object, for managementState Removed.
func (d *csiDriverOwner) remove(ctx context.Context) error {
	return d.deleteIfPresent(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: operator.DriverName}})
}
