package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/manila-setup/manila-setup/operator"
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
)

// StaticAssets are applied in this order: RBAC first, then the ServiceAccounts (the workloads
// wait for those, so no pod is ever created before its permissions exist), then the rest.
var StaticAssets = []string{
	"rbac/provisioner_role.yaml",
	"rbac/snapshotter_role.yaml",
	"rbac/resizer_role.yaml",
	"rbac/kube_rbac_proxy_role.yaml",
	"rbac/privileged_role.yaml",
	"rbac/controller_role.yaml",
	"rbac/prometheus_role.yaml",
	"rbac/provisioner_binding.yaml",
	"rbac/snapshotter_binding.yaml",
	"rbac/resizer_binding.yaml",
	"rbac/kube_rbac_proxy_binding.yaml",
	"rbac/privileged_binding.yaml",
	"rbac/controller_rolebinding.yaml",
	"rbac/prometheus_rolebinding.yaml",
	"controller_sa.yaml",
	"node_sa.yaml",
	"controller_pdb.yaml",
	"networkpolicy_controller.yaml",
	"service.yaml",
	"cabundle_cm.yaml",
	"runtime_config_cm.yaml",
}

// staticRBACCount is how many of StaticAssets are RBAC (applied before the rest).
const staticRBACCount = 14

// conditionalAssets are applied only when their CRD is installed.
var conditionalAssets = []struct{ file, crd string }{
	{"servicemonitor.yaml", "servicemonitors.monitoring.coreos.com"},
	{"volumesnapshotclass.yaml", "volumesnapshotclasses.snapshot.storage.k8s.io"},
}

// vars are the placeholder values of the driver's manifests.
func (o *Operator) vars(spec *operatorv1.OperatorSpec) map[string]string {
	v := map[string]string{"NAMESPACE": o.cfg.Namespace, "LOG_LEVEL": "2", "CLUSTER_ID": "kubernetes"}
	if spec != nil {
		v["LOG_LEVEL"] = fmt.Sprint(logVerbosity(spec.LogLevel))
	}
	if infra := o.infrastructure(); infra != nil && infra.Status.InfrastructureName != "" {
		v["CLUSTER_ID"] = infra.Status.InfrastructureName
	}
	im := o.cfg.Images
	for k, p := range im.ImageEnv() {
		v[k] = *p
	}
	v["RUNTIME_CONFIG"] = runtimeConfig(o.storage)
	return v
}

// runtimeConfig is the driver's runtime configuration: with the subnet Manila exports on known
// from discovery, NFS mounts use the export location inside it. Empty ("{}") otherwise: the
// driver then picks as it always does.
func runtimeConfig(storage *storageNetworks) string {
	cidr := ""
	if storage != nil {
		cidr = storage.exportSubnet()
	}
	if cidr == "" {
		return "{}"
	}
	b, _ := json.Marshal(map[string]any{"nfs": map[string]string{"matchExportLocationAddress": cidr}})
	return string(b)
}

type staticController struct{ o *Operator }

const staticName = "ManilaDriverStaticResources"

func newStaticController(o *Operator) *controller {
	c := &staticController{o: o}
	ctrl := o.newController(staticName+"Controller", c.sync,
		o.inf.serviceAccounts,
		o.inf.services,
		o.inf.configMaps,
		o.inf.roles,
		o.inf.roleBindings,
		o.inf.pdbs,
		o.inf.networkPolicies,
		o.inf.clusterRoles,
		o.inf.clusterRoleBindings,
		o.inf.crds,
		o.inf.infrastructures,
	)
	// The runtime configuration follows the storage network discovery finds.
	if o.storage != nil {
		o.storage.listen(func() { ctrl.queue.Add(queueKey) })
	}
	return ctrl
}

func (c *staticController) sync(ctx context.Context, syncCtx *controller) error {
	o := c.o
	spec, _, err := o.spec()
	if err != nil || spec == nil || spec.ManagementState == operatorv1.Unmanaged {
		return err
	}
	vars := o.vars(spec)
	if spec.ManagementState == operatorv1.Removed {
		var errs []error
		for i := len(StaticAssets) - 1; i >= 0; i-- {
			obj, err := operator.ReadAsset(StaticAssets[i], vars)
			if err == nil {
				err = o.deleteIfPresent(ctx, obj)
			}
			errs = append(errs, err)
		}
		return o.applyStatus(ctx, staticName, removedStatus(staticName, errors.Join(errs...)))
	}
	if !o.enabled() {
		return nil
	}
	// RBAC first, in parallel; then the rest, in parallel.
	var errs []error
	var mu sync.Mutex
	for _, phase := range [][]string{StaticAssets[:staticRBACCount], StaticAssets[staticRBACCount:]} {
		var wg sync.WaitGroup
		for _, name := range phase {
			wg.Add(1)
			go func() {
				defer wg.Done()
				obj, err := operator.ReadAsset(name, vars)
				if err == nil {
					_, err = o.apply(ctx, obj)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	waiting := false
	for _, ca := range conditionalAssets {
		if !o.crdExists(ca.crd) {
			continue
		}
		u, err := operator.ReadUnstructuredAsset(ca.file, vars)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = o.apply(ctx, u)
		switch {
		case errors.Is(err, errNotCached):
			waiting = true
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", ca.file, err))
		}
	}
	if waiting {
		syncCtx.requeueAfter(500 * time.Millisecond)
	}
	err = errors.Join(errs...)
	return firstErr(o.applyStatus(ctx, staticName, availabilityStatus(staticName, err, "all static resources applied")), err)
}

// availabilityStatus is Available/Degraded for a controller that only applies objects.
func availabilityStatus(prefix string, err error, okMsg string) *operatorStatus {
	if err != nil {
		return newStatus().WithConditions(
			condition(prefix+"Available", operatorv1.ConditionFalse, "ApplyFailed", err.Error()),
			condition(prefix+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", err.Error()),
		)
	}
	return newStatus().WithConditions(
		condition(prefix+"Available", operatorv1.ConditionTrue, "AsExpected", okMsg),
		condition(prefix+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""),
	)
}

// removedStatus reports managementState Removed.
func removedStatus(prefix string, err error) *operatorStatus {
	if err != nil {
		return newStatus().WithConditions(
			condition(prefix+"Available", operatorv1.ConditionFalse, "Removed", "managementState is Removed"),
			condition(prefix+"Degraded", operatorv1.ConditionTrue, "RemovalFailed", err.Error()),
		)
	}
	return newStatus().WithConditions(
		condition(prefix+"Available", operatorv1.ConditionFalse, "Removed", "managementState is Removed: the operands are deleted"),
		condition(prefix+"Degraded", operatorv1.ConditionFalse, "Removed", ""),
	)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
