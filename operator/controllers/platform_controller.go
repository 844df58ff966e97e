package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/manila-setup/manila-setup/operator/platform"
	operatorv1 "github.com/openshift/api/operator/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
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

// driver tells whether the operator may write: the cluster was checked and nobody else runs
// a Manila CSI driver.
func (g *platformGuard) driver() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.current != nil && g.current.Mode == platform.ModeDriver
}

// set records d and returns the previous answer.
func (g *platformGuard) set(d platform.Detection) *platform.Detection {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.current
	g.current = &d
	return prev
}

// Detection is the operator's current answer to "which kind of cluster is this", nil before
// the first check.
func (o *Operator) Detection() *platform.Detection {
	o.guard.mu.Lock()
	defer o.guard.mu.Unlock()
	if o.guard.current == nil {
		return nil
	}
	d := *o.guard.current
	return &d
}

func newPlatformController(o *Operator) *controller {
	ctrl := o.newController(platformName, nil, o.inf.infrastructures, o.inf.deployments, o.inf.crds)
	ctrl.gate = nil // it decides the gate of the others
	ctrl.sync = func(ctx context.Context, c *controller) error { return o.syncPlatform(ctx, c) }
	enqueue := func(any) { ctrl.queue.Add(queueKey) }
	for _, gvr := range []schema.GroupVersionResource{clusterVersionGVR, clusterOperatorGVR} {
		o.onDynamic(gvr, cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue,
		})
	}
	return ctrl
}

func (o *Operator) syncPlatform(ctx context.Context, c *controller) error {
	d, err := platform.Detect(ctx, cacheGetter{o})
	if errors.Is(err, errNotCached) {
		// Not an error: a cache that has just been created has not listed yet.
		c.requeueAfter(time.Second)
		return nil
	}
	if err != nil {
		return err
	}
	prev := o.guard.set(d)
	if prev == nil || prev.Mode != d.Mode {
		klog.Infof("mode %s (%s): %s", d.Mode, d.Reason, d.Message)
		switch {
		case prev != nil && d.Mode == platform.ModeCompanion:
			o.recorder.Warningf("PlatformTookOver", "%s. The operator stopped writing and deleted nothing; the driver it deployed keeps serving until the platform's replaces it. It writes nothing while the platform runs its own.", d.Message)
		case prev != nil:
			o.recorder.Warningf("ModeChanged", "mode %s, was %s: %s", d.Mode, prev.Mode, d.Message)
		case d.Mode != platform.ModeDriver:
			o.recorder.Warningf("NotDeploying", "mode %s: %s", d.Mode, d.Message)
		}
		if d.Mode == platform.ModeDriver {
			// The others skipped their syncs until now: let them run at once rather than at
			// their next resync.
			for _, other := range o.controllers {
				if other != c {
					other.queue.Add(queueKey)
				}
			}
		}
	}
	switch d.Mode {
	case platform.ModeDriver:
		return o.applyStatus(ctx, platformName, newStatus().WithConditions(
			condition(ConditionDriverMode, operatorv1.ConditionTrue, d.Reason, d.Message)))
	case platform.ModeNone:
		// The ClusterCSIDriver, if there is one, is ours (on a cluster not on OpenStack there
		// is no platform Manila operator to own it).
		return o.applyStatus(ctx, platformName, newStatus().WithConditions(
			condition(ConditionDriverMode, operatorv1.ConditionFalse, d.Reason, d.Message)))
	}
	// Companion: the ClusterCSIDriver is the platform's; not one write to it.
	return nil
}

// cacheGetter answers operator/platform from the operator's informer caches, so that the check
// on every resync makes no request. Resources whose CRD is missing are NotFound, as the API
// would say.
type cacheGetter struct{ o *Operator }

func (g cacheGetter) Get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	o := g.o
	var obj runtime.Object
	var err error
	switch gvr.Resource {
	case "infrastructures":
		obj, err = o.lister.infrastructures.Get(name)
	case "clustercsidrivers":
		obj, err = o.lister.clusterCSIDrivers.Get(name)
	case "deployments":
		// Cached are the Deployments the operator writes (its operands, by label), not its own:
		// the platform's operator is seen through the ClusterCSIDriver's writers and the
		// storage ClusterOperator instead; a platform writer on an operand counts too.
		if namespace != o.cfg.Namespace {
			return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
		}
		var item any
		var exists bool
		item, exists, err = o.inf.deployments.GetIndexer().GetByKey(namespace + "/" + name)
		if err == nil && !exists {
			err = apierrors.NewNotFound(gvr.GroupResource(), name)
		}
		if err == nil {
			obj = item.(runtime.Object)
		}
	case "clusterversions", "clusteroperators":
		if !o.crdExists(gvr.Resource + "." + gvr.Group) {
			return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
		}
		lister, synced := o.dynamicLister(gvr)
		if !synced {
			return nil, errNotCached
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
