package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/tlsprofile"
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
	"operator_metrics_service.yaml",
	"cabundle_cm.yaml",
	"runtime_config_cm.yaml",
}

// staticRBACCount is how many of StaticAssets are RBAC (applied before the rest).
const staticRBACCount = 14

// conditionalAssets are applied only when their CRD is installed.
var conditionalAssets = []struct {
	file, crd string
	// monitoring: deleted with the driver (managementState Removed).
	monitoring bool
}{
	{"servicemonitor.yaml", "servicemonitors.monitoring.coreos.com", true},
	{"operator_servicemonitor.yaml", "servicemonitors.monitoring.coreos.com", true},
	{"prometheusrule.yaml", "prometheusrules.monitoring.coreos.com", true},
}

// assetVars are what the placeholders of the driver's manifests are filled with.
type assetVars struct {
	namespace      string
	images         operator.Images
	infrastructure func() *configv1.Infrastructure
	storage        *storageNetworks
	// tls is the cluster's TLS security profile (tlsProfileOf), for the kube-rbac-proxy
	// sidecars; nil is Intermediate.
	tls func() (tlsprofile.Profile, error)
}

// of are the placeholder values of the driver's manifests.
func (a assetVars) of(spec *operatorv1.OperatorSpec) map[string]string {
	v := map[string]string{"NAMESPACE": a.namespace, "LOG_LEVEL": "2", "CLUSTER_ID": "kubernetes", "OPERATOR_NAME": operator.OperatorName}
	if spec != nil {
		v["LOG_LEVEL"] = fmt.Sprint(logVerbosity(spec.LogLevel))
	}
	if infra := a.infrastructure(); infra != nil && infra.Status.InfrastructureName != "" {
		v["CLUSTER_ID"] = infra.Status.InfrastructureName
	}
	im := a.images
	for k, p := range im.ImageEnv() {
		v[k] = *p
	}
	v["RUNTIME_CONFIG"] = runtimeConfig(a.storage)
	tls := tlsprofile.Intermediate()
	if a.tls != nil {
		// Intermediate when the cluster's cannot be applied; the workload controller says why.
		tls, _ = a.tls()
	}
	// Empty under TLS 1.3: the workload controller then drops the flag (withTLSProfile).
	v["TLS_MIN_VERSION"], v["TLS_CIPHER_SUITES"] = string(tls.MinVersion), strings.Join(tls.CipherSuites, ",")
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

// staticController applies the driver's static resources (RBAC, ServiceAccounts, the Service,
// ConfigMaps, ...), and those whose CRD is installed (crdExists).
type staticController struct {
	operands
	vars      func(*operatorv1.OperatorSpec) map[string]string
	crdExists func(name string) bool
}

const staticName = "ManilaDriverStaticResources"

// newStaticController watches the kinds of the static resources (informers), and follows the
// storage network discovery finds (the runtime configuration names its export subnet).
func newStaticController(w wiring) *machinery.Controller {
	c := &staticController{operands: w.ops, vars: w.vars, crdExists: w.inf.CRDExists}
	i := w.inf
	ctrl := w.loop.Controller(staticName+"Controller", c.sync, i.ServiceAccounts, i.Services, i.ConfigMaps, i.Roles, i.RoleBindings,
		i.PDBs, i.NetworkPolicies, i.ClusterRoles, i.ClusterRoleBindings, i.CRDs, i.Infrastructures)
	w.storage.listen(ctrl.Enqueue)
	return ctrl
}

func (c *staticController) sync(ctx context.Context, syncCtx *machinery.Controller) error {
	spec := c.spec()
	if spec == nil || spec.ManagementState == operatorv1.Unmanaged {
		return nil
	}
	vars := c.vars(spec)
	if spec.ManagementState == operatorv1.Removed {
		var errs []error
		for i := len(StaticAssets) - 1; i >= 0; i-- {
			obj, err := operator.ReadAsset(StaticAssets[i], vars)
			if err == nil {
				err = c.deleteIfPresent(ctx, obj)
			}
			errs = append(errs, err)
		}
		// The monitoring goes with the driver: a ServiceMonitor left without its Service would
		// raise ManilaOperatorDown for a driver removed on purpose.
		for _, ca := range conditionalAssets {
			if !ca.monitoring || !c.crdExists(ca.crd) {
				continue
			}
			u, err := operator.ReadUnstructuredAsset(ca.file, vars)
			if err == nil {
				err = c.deleteIfPresent(ctx, u)
			}
			errs = append(errs, err)
		}
		return c.applyStatus(ctx, staticName, machinery.RemovedStatus(staticName, errors.Join(errs...)))
	}
	if !c.enabled() {
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
					_, err = c.apply(ctx, obj)
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
		if !c.crdExists(ca.crd) {
			continue
		}
		u, err := operator.ReadUnstructuredAsset(ca.file, vars)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_, err = c.apply(ctx, u)
		switch {
		case errors.Is(err, machinery.ErrNotCached):
			waiting = true
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", ca.file, err))
		}
	}
	if waiting {
		syncCtx.RequeueAfter(500 * time.Millisecond)
	}
	err := errors.Join(errs...)
	return firstErr(c.applyStatus(ctx, staticName, machinery.AvailabilityStatus(staticName, err, "all static resources applied")), err)
}
