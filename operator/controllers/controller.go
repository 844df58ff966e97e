package controllers

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// controller runs one sync function, in the style of library-go's controllers: after any
// change in the informers it watches, every resync period, and again with backoff after an
// error. There is one queue key: a sync looks at everything it is responsible for.
type controller struct {
	name      string
	sync      func(ctx context.Context, c *controller) error
	informers []cache.SharedIndexInformer
	resync    time.Duration
	// gate, when set, must say yes for a sync to run (see platformGuard); a skipped sync
	// still counts in syncs.
	gate  func() bool
	queue workqueue.TypedRateLimitingInterface[string]
	// syncs counts finished syncs, so that a test can wait for the controller to have looked
	// again rather than for time to pass.
	syncs atomic.Int64
}

const queueKey = "key"

// newController wires a sync function to the informers every controller reacts to (the
// ClusterCSIDriver, the CSIDriver) and the extra ones given.
func (o *Operator) newController(name string, sync func(context.Context, *controller) error, extra ...cache.SharedIndexInformer) *controller {
	return &controller{
		name:      name,
		sync:      sync,
		informers: append(o.commonInformers(), extra...),
		resync:    o.cfg.Resync,
		gate:      o.guard.allows(o.cfg.Mode),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name}),
	}
}

// commonInformers are the informers every controller reacts to: the operator's own object and,
// in companion mode, the platform's ClusterCSIDriver too; the CSIDriver.
func (o *Operator) commonInformers() []cache.SharedIndexInformer {
	if o.inf.self == o.inf.clusterCSIDriver {
		return []cache.SharedIndexInformer{o.inf.self, o.inf.csiDrivers}
	}
	return []cache.SharedIndexInformer{o.inf.self, o.inf.clusterCSIDriver, o.inf.csiDrivers}
}

// requeueAfter asks for another sync after d (something the sync waits for is not cached yet).
func (c *controller) requeueAfter(d time.Duration) { c.queue.AddAfter(queueKey, d) }

// Run syncs until ctx ends. The informers must be started by the caller.
func (c *controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	enqueue := func(any) { c.queue.Add(queueKey) }
	synced := make([]cache.InformerSynced, 0, len(c.informers))
	for _, inf := range c.informers {
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue,
		})
		if err != nil {
			klog.Errorf("%s: %v", c.name, err)
			return
		}
		synced = append(synced, reg.HasSynced)
	}
	if !cache.WaitForNamedCacheSync(c.name, ctx.Done(), synced...) {
		return
	}
	go wait.UntilWithContext(ctx, func(context.Context) { c.queue.Add(queueKey) }, c.resync)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.processNext(ctx) {
	}
}

func (c *controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if c.gate != nil && !c.gate() {
		c.syncs.Add(1)
		c.queue.Forget(key)
		return true
	}
	syncCtx := ctx
	if c.gate != nil {
		syncCtx = context.WithValue(ctx, gateKey{}, c.gate)
	}
	err := c.sync(syncCtx, c)
	c.syncs.Add(1)
	if errors.Is(err, errSteppedAside) {
		err = nil // the gate closed during the sync: nothing more to do until it opens
	}
	if err != nil {
		if ctx.Err() == nil {
			klog.Errorf("%s: %v", c.name, err)
		}
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// gateKey carries a controller's gate to the writes of its sync, which check it again right
// before each request: a sync that began before the platform took over (or the cluster changed
// mode) writes nothing after, however long its calls to the cloud took.
type gateKey struct{}

// errSteppedAside is what a write returns when its sync's gate has closed meanwhile.
var errSteppedAside = errors.New("not written: the cluster changed mode during the sync, the operator stepped aside")

// writeAllowed is nil unless ctx carries a gate that is now closed.
func writeAllowed(ctx context.Context) error {
	if gate, ok := ctx.Value(gateKey{}).(func() bool); ok && !gate() {
		return errSteppedAside
	}
	return nil
}
