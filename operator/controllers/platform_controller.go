package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	operatorv1 "github.com/openshift/api/operator/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/health"
	"github.com/manila-setup/manila-setup/operator/platform"
)

// The platform controller asks operator/platform, from the caches and on every resync, which
// kind of cluster this is, because a cluster can change kind while the operator runs: the
// Storage capability can be enabled later, and then the platform's cluster-storage-operator
// starts its own Manila CSI driver operator under the names this operator uses. Every other
// controller writes only while the answer is "driver". Anything else stops the writes and is
// reported (log, Event, and on the operator's own ClusterCSIDriver the DriverMode condition);
// nothing is ever deleted on a mode change, so the volumes in use keep working while the
// platform takes over.
const platformName = "PlatformController"

// ConditionDriverMode says whether the operator deploys the driver here, and why.
const ConditionDriverMode = "DriverMode"

// platformGuard holds the last answer; nil until the first one.
type platformGuard struct {
	mu      sync.Mutex
	current *platform.Detection
}

// allows returns the gate of an operator configured for mode: it may write when the cluster was
// checked and is of that kind (driver: nobody else runs a Manila CSI driver; companion: the
// platform does).
func (g *platformGuard) allows(mode platform.Mode) func() bool {
	return func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.current != nil && g.current.Mode == mode
	}
}

// set records d and returns the previous answer.
func (g *platformGuard) set(d platform.Detection) *platform.Detection {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.current
	g.current = &d
	return prev
}

// detection is the last answer, nil before the first one.
func (g *platformGuard) detection() *platform.Detection {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.current == nil {
		return nil
	}
	d := *g.current
	return &d
}

// platformController decides the gate of the other controllers.
type platformController struct {
	// report says what the detection means for this operator (syncDriverMode or
	// syncCompanionMode, after the mode it was started in).
	report      func(c *platformController, ctx context.Context, ctrl *machinery.Controller, prev *platform.Detection, d platform.Detection) error
	guard       *platformGuard
	cluster     platform.Getter
	recorder    machinery.Recorder
	applyStatus func(ctx context.Context, manager string, st *machinery.Status) error
	// platformDriver is the platform's ClusterCSIDriver (a companion reports its health).
	platformDriver func() *operatorv1.ClusterCSIDriver
	// kickOthers makes every other controller sync at once (the gate opened).
	kickOthers func(except *machinery.Controller)
}

// newPlatformController watches what the platform check reads: the Infrastructure, the
// Deployments, the CRDs, the ClusterVersion and the storage ClusterOperator. It runs ungated:
// it decides the gate of the others.
func newPlatformController(w wiring) *machinery.Controller {
	c := &platformController{
		report: w.profile.reportMode, guard: w.guard, cluster: cacheGetter{inf: w.inf, namespace: w.cfg.Namespace}, recorder: w.recorder,
		applyStatus: w.ops.applyStatus, platformDriver: w.platformDriver, kickOthers: w.kickOthers,
	}
	ctrl := w.loop.Ungated().Controller(platformName, func(ctx context.Context, ctrl *machinery.Controller) error {
		d, err := platform.Detect(ctx, c.cluster)
		if errors.Is(err, machinery.ErrNotCached) {
			// Not an error: a cache that has just been created has not listed yet; the
			// controller looks again within milliseconds.
			return err
		}
		if err != nil {
			return err
		}
		prev := c.guard.set(d)
		return c.report(c, ctx, ctrl, prev, d)
	}, w.inf.Infrastructures, w.inf.Deployments, w.inf.CRDs)
	for _, gvr := range []schema.GroupVersionResource{machinery.ClusterVersionGVR, machinery.ClusterOperatorGVR} {
		w.inf.OnDynamic(gvr, ctrl.EventHandler())
	}
	return ctrl
}

// syncDriverMode reports, on the operator's ClusterCSIDriver, whether it deploys the driver here.
func (c *platformController) syncDriverMode(ctx context.Context, ctrl *machinery.Controller, prev *platform.Detection, d platform.Detection) error {
	if prev == nil || prev.Mode != d.Mode {
		klog.Infof("mode %s (%s): %s", d.Mode, d.Reason, d.Message)
		switch {
		case prev != nil && d.Mode == platform.ModeCompanion:
			c.recorder.Warningf("PlatformTookOver", "%s. The operator stopped writing and deleted nothing; the driver it deployed keeps serving until the platform's replaces it. It writes nothing while the platform runs its own.", d.Message)
		case prev != nil:
			c.recorder.Warningf("ModeChanged", "mode %s, was %s: %s", d.Mode, prev.Mode, d.Message)
		case d.Mode != platform.ModeDriver:
			c.recorder.Warningf("NotDeploying", "mode %s: %s", d.Mode, d.Message)
		}
		if d.Mode == platform.ModeDriver {
			// The others skipped their syncs until now: let them run at once rather than at
			// their next resync.
			c.kickOthers(ctrl)
		}
	}
	switch d.Mode {
	case platform.ModeDriver:
		return c.applyStatus(ctx, platformName, machinery.NewStatus().WithConditions(
			machinery.Condition(ConditionDriverMode, operatorv1.ConditionTrue, d.Reason, d.Message)))
	case platform.ModeNone:
		// The ClusterCSIDriver, if there is one, is ours (on a cluster not on OpenStack there
		// is no platform Manila operator to own it).
		return c.applyStatus(ctx, platformName, machinery.NewStatus().WithConditions(
			machinery.Condition(ConditionDriverMode, operatorv1.ConditionFalse, d.Reason, d.Message)))
	}
	// Companion: the ClusterCSIDriver is the platform's; not one write to it.
	return nil
}

// syncCompanionMode reports, on the ManilaCompanion, whether the cluster is still one where the
// platform runs the driver, and how the platform's driver is as its ClusterCSIDriver says. A
// companion never becomes the driver by itself: when the platform's operator goes away it says
// so and what to do, and keeps its StorageClasses.
func (c *platformController) syncCompanionMode(ctx context.Context, ctrl *machinery.Controller, prev *platform.Detection, d platform.Detection) error {
	if prev == nil || prev.Mode != d.Mode {
		klog.Infof("mode %s (%s): %s", d.Mode, d.Reason, d.Message)
		switch {
		case d.Mode == platform.ModeCompanion && prev != nil:
			c.recorder.Eventf("PlatformDriverBack", "%s", d.Message)
		case d.Mode != platform.ModeCompanion:
			c.recorder.Warningf("NoPlatformDriver", "mode %s, this operator runs as a companion: %s. It changes nothing by itself; to have manila-setup deploy the driver, run manila-setup operator install --mode driver", d.Mode, d.Message)
		}
		if d.Mode == platform.ModeCompanion {
			c.kickOthers(ctrl)
		}
	}
	if d.Mode != platform.ModeCompanion {
		return c.applyStatus(ctx, platformName, machinery.NewStatus().WithConditions(
			machinery.Condition(ConditionDriverMode, operatorv1.ConditionFalse, ReasonNoPlatformDriver,
				fmt.Sprintf("the cluster is of mode %s (%s): the platform runs no Manila CSI driver operator to accompany. "+
					"This operator runs as a companion and deploys no driver; its StorageClasses stay. To have manila-setup deploy "+
					"the driver, run manila-setup operator install --mode driver", d.Mode, d.Reason)),
			machinery.Condition(operator.ConditionPlatformDriverAvailable, operatorv1.ConditionFalse, ReasonNoPlatformDriver,
				"the platform runs no Manila CSI driver operator")))
	}
	return c.applyStatus(ctx, platformName, machinery.NewStatus().WithConditions(
		machinery.Condition(ConditionDriverMode, operatorv1.ConditionFalse, d.Reason,
			"companion: "+d.Message+". This operator keeps StorageClasses "+operator.CompanionStorageClassPrefix+"<share type> restricted to the machine network and reports the storage network"),
		c.platformDriverCondition()))
}

// ReasonNoPlatformDriver: a companion whose platform runs no Manila CSI driver operator (any more).
const ReasonNoPlatformDriver = "NoPlatformDriver"

// platformDriverCondition is the platform's driver as its ClusterCSIDriver reports it, judged
// the way `manila-setup operator status` judges it (operator/health). The message names what is
// wrong and nothing that changes by itself (no times), so that it is written on changes only.
func (c *platformController) platformDriverCondition() operatorv1.OperatorCondition {
	d := c.platformDriver()
	if d == nil {
		return machinery.Condition(operator.ConditionPlatformDriverAvailable, operatorv1.ConditionFalse, "NotFound",
			"the platform's ClusterCSIDriver "+operator.DriverName+" does not exist (yet)")
	}
	var conds []health.Condition
	var bad []string
	for _, cond := range d.Status.Conditions {
		hc := health.Condition{Type: cond.Type, Status: string(cond.Status), Reason: cond.Reason, Message: cond.Message}
		conds = append(conds, hc)
		if !health.Informative(cond.Type) && health.Judge(hc) == health.Bad {
			bad = append(bad, fmt.Sprintf("%s=%s (%s)", cond.Type, cond.Status, cond.Reason))
		}
	}
	switch {
	case len(conds) == 0:
		return machinery.Condition(operator.ConditionPlatformDriverAvailable, operatorv1.ConditionUnknown, "NoConditions",
			"the platform's ClusterCSIDriver "+operator.DriverName+" reports no conditions yet")
	case len(bad) > 0:
		sort.Strings(bad)
		return machinery.Condition(operator.ConditionPlatformDriverAvailable, operatorv1.ConditionFalse, "PlatformDriverUnhealthy",
			"the platform's ClusterCSIDriver "+operator.DriverName+" reports "+strings.Join(bad, ", "))
	}
	return machinery.Condition(operator.ConditionPlatformDriverAvailable, operatorv1.ConditionTrue, "AsExpected",
		fmt.Sprintf("the platform's ClusterCSIDriver %s reports its driver available and nothing degraded (%d conditions)", operator.DriverName, len(conds)))
}

// cacheGetter answers operator/platform from the operator's informer caches, so that the check
// on every resync makes no request. Resources whose CRD is missing are NotFound, as the API
// would say.
type cacheGetter struct {
	inf       *machinery.Informers
	namespace string
}

func (g cacheGetter) Get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	l := g.inf.Listers()
	var obj runtime.Object
	var err error
	switch gvr.Resource {
	case "infrastructures":
		obj, err = l.Infrastructures.Get(name)
	case "clustercsidrivers":
		obj, err = l.ClusterCSIDrivers.Get(name)
	case "deployments":
		// Cached are the Deployments the operator writes (its operands, by label), not its own:
		// the platform's operator is seen through the ClusterCSIDriver's writers and the
		// storage ClusterOperator instead; a platform writer on an operand counts too.
		if namespace != g.namespace {
			return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
		}
		var item any
		var exists bool
		item, exists, err = g.inf.Deployments.GetIndexer().GetByKey(namespace + "/" + name)
		if err == nil && !exists {
			err = apierrors.NewNotFound(gvr.GroupResource(), name)
		}
		if err == nil {
			obj = item.(runtime.Object)
		}
	case "clusterversions", "clusteroperators":
		if !g.inf.CRDExists(gvr.Resource + "." + gvr.Group) {
			return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
		}
		lister, synced := g.inf.DynamicLister(gvr)
		if !synced {
			return nil, machinery.ErrNotCached
		}
		obj, err = lister.Get(name)
	default:
		return nil, fmt.Errorf("the operator does not cache %s", gvr.Resource)
	}
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
