package machinery

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// SyncFunc is a controller's sync: it looks at everything the controller is responsible for.
// c is the controller running it (for RequeueAfter); nil in a unit test of the sync.
type SyncFunc func(ctx context.Context, c *Controller) error

// Controller runs one sync function, in the style of library-go's controllers: after any
// change in the informers it watches, every resync period (Resyncs), and again with backoff
// after an error. There is one queue key: a sync looks at everything it is responsible for.
type Controller struct {
	name      string
	sync      SyncFunc
	informers []cache.SharedIndexInformer
	// gate, when set, must say yes for a sync to run (the platform check); a skipped sync
	// still counts in syncs.
	gate  func() bool
	queue workqueue.TypedInterface[string]
	// limiter spaces the syncs after failures; later holds the one delayed add.
	limiter workqueue.TypedRateLimiter[string]
	later   *delayedAdd
	// syncs counts finished syncs, so that a test can wait for the controller to have looked
	// again rather than for time to pass.
	syncs atomic.Int64
	// events, when set, is where the controller registers its handlers (Loop.Events).
	events *Events
}

const queueKey = "key"

// Loop is what every controller of one operator shares: the resync ticker, the gate of its
// writes (nil: always open), and the informers every controller reacts to.
type Loop struct {
	Resyncs *Resyncs
	Gate    func() bool
	Common  []cache.SharedIndexInformer
	// Events, when set, shares one handler of each informer among the loop's controllers.
	Events *Events
}

// Controller wires a sync function to the loop's common informers and the extra ones given.
func (l Loop) Controller(name string, sync SyncFunc, extra ...cache.SharedIndexInformer) *Controller {
	c := NewController(name, l.Gate, sync, append(append([]cache.SharedIndexInformer(nil), l.Common...), extra...)...)
	c.events = l.Events
	l.Resyncs.add(c)
	return c
}

// Ungated is the loop without its gate, for the controller that decides the gate.
func (l Loop) Ungated() Loop {
	l.Gate = nil
	return l
}

// NewController runs sync after changes in informers and after errors (and every resync once
// added to a Resyncs); gate, when not nil, must say yes for a sync to run.
func NewController(name string, gate func() bool, sync SyncFunc, informers ...cache.SharedIndexInformer) *Controller {
	c := &Controller{
		name:      name,
		sync:      sync,
		informers: informers,
		gate:      gate,
		queue:     workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name}),
		limiter:   workqueue.DefaultTypedControllerRateLimiter[string](),
	}
	c.later = &delayedAdd{add: c.Enqueue}
	return c
}

// Name is the controller's name.
func (c *Controller) Name() string { return c.name }

// Syncs is how many syncs the controller has finished (skipped ones included).
func (c *Controller) Syncs() int64 { return c.syncs.Load() }

// Enqueue asks for a sync.
func (c *Controller) Enqueue() { c.queue.Add(queueKey) }

// RequeueAfter asks for another sync after d (something the sync waits for is not cached yet).
func (c *Controller) RequeueAfter(d time.Duration) { c.later.after(d) }

// requeueAfterFailure asks for another sync after the backoff of one more failure.
func (c *Controller) requeueAfterFailure() { c.later.after(c.limiter.When(queueKey)) }

// CoalesceWindow is how long a sync waits after an event of a Node, Machine or MachineSet, so
// that the events of a scale-up or a rollout (hundreds of Machines, each changed several times
// as its server and Node come up) make one evaluation per window instead of one each: the
// queue holds one key, and an event in a window already scheduled adds nothing.
const CoalesceWindow = 2 * time.Second

// EventHandler enqueues a sync on every event of an informer that changed something the cache
// keeps; the events of Nodes and the Machine API are coalesced (CoalesceWindow).
func (c *Controller) EventHandler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if burstProne(obj) {
			c.RequeueAfter(CoalesceWindow)
			return
		}
		c.Enqueue()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(old, obj any) {
			switch {
			case unchanged(old, obj):
			case statusOnly(old, obj):
				// Most of these are the controllers' own status writes, which every
				// controller would otherwise answer with a sync: one per window.
				c.RequeueAfter(CoalesceWindow)
			default:
				enqueue(obj)
			}
		},
		DeleteFunc: enqueue,
	}
}

// Run syncs until ctx ends. The informers must be started by the caller.
func (c *Controller) Run(ctx context.Context) {
	defer c.shutDown()
	synced := make([]cache.InformerSynced, 0, len(c.informers))
	for _, inf := range c.informers {
		hasSynced, err := c.events.register(inf, c.EventHandler())
		if err != nil {
			klog.Errorf("%s: %v", c.name, err)
			return
		}
		synced = append(synced, hasSynced)
	}
	if !cache.WaitForNamedCacheSync(c.name, ctx.Done(), synced...) {
		return
	}
	c.Enqueue()
	go func() {
		<-ctx.Done()
		c.shutDown()
	}()
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if c.gate != nil && !c.gate() {
		c.syncs.Add(1)
		c.limiter.Forget(key)
		return true
	}
	syncCtx := ctx
	if c.gate != nil {
		syncCtx = WithGate(ctx, c.gate)
	}
	err := c.sync(syncCtx, c)
	c.syncs.Add(1)
	if errors.Is(err, ErrSteppedAside) {
		err = nil // the gate closed during the sync: nothing more to do until it opens
	}
	if errors.Is(err, ErrNotCached) {
		// A cache made a moment ago has not listed yet: look again soon (5 ms, then twice as
		// long each time), without calling it a failure. The first look of a cache on a quiet
		// cluster takes tens of milliseconds, and every controller waits for this one's verdict.
		c.requeueAfterFailure()
		return true
	}
	var deferred *Deferred
	if errors.As(err, &deferred) {
		// Only messages changed, shortly after the last write: write them when due, without
		// the backoff of a failure.
		c.limiter.Forget(key)
		c.RequeueAfter(deferred.After)
		return true
	}
	if err != nil {
		if ctx.Err() == nil {
			klog.Errorf("%s: %v", c.name, err)
		}
		c.requeueAfterFailure()
		return true
	}
	c.limiter.Forget(key)
	return true
}

// shutDown ends the queue and drops a delayed add.
func (c *Controller) shutDown() {
	c.later.stop()
	c.queue.ShutDown()
}

// gateKey carries a controller's gate to the writes of its sync, which check it again right
// before each request: a sync that began before the platform took over (or the cluster changed
// mode) writes nothing after, however long its calls to the cloud took.
type gateKey struct{}

// WithGate carries gate to the writes made with ctx.
func WithGate(ctx context.Context, gate func() bool) context.Context {
	return context.WithValue(ctx, gateKey{}, gate)
}

// ErrSteppedAside is what a write returns when its sync's gate has closed meanwhile.
var ErrSteppedAside = errors.New("not written: the cluster changed mode during the sync, the operator stepped aside")

// WriteAllowed is nil unless ctx carries a gate that is now closed.
func WriteAllowed(ctx context.Context) error {
	if gate, ok := ctx.Value(gateKey{}).(func() bool); ok && !gate() {
		return ErrSteppedAside
	}
	return nil
}

// Events shares one event handler of each informer among the controllers of an operator.
// Each handler an informer has costs a listener with a ring buffer of its own (16 KiB to start)
// and two goroutines; with every controller handling most informers, that was about 70
// listeners and 2 MiB of the operator's heap, for the same events delivered to each.
type Events struct {
	mu      sync.Mutex
	fanouts map[cache.SharedIndexInformer]*fanout
}

// NewEvents makes an empty Events.
func NewEvents() *Events {
	return &Events{fanouts: map[cache.SharedIndexInformer]*fanout{}}
}

// register adds h to the handlers of inf's events and returns when they have all seen inf's
// initial list (a handler that joins later needs none of it: a controller syncs when it starts).
// A nil Events registers h on inf directly.
func (e *Events) register(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) (cache.InformerSynced, error) {
	if e == nil {
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return nil, err
		}
		return reg.HasSynced, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	f, ok := e.fanouts[inf]
	if !ok {
		f = &fanout{}
		reg, err := inf.AddEventHandler(f)
		if err != nil {
			return nil, err
		}
		f.synced = reg.HasSynced
		e.fanouts[inf] = f
	}
	f.add(h)
	return f.synced, nil
}

// fanout hands each event of one informer to every handler registered.
type fanout struct {
	mu       sync.RWMutex
	handlers []cache.ResourceEventHandler
	synced   cache.InformerSynced
}

func (f *fanout) add(h cache.ResourceEventHandler) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers = append(f.handlers, h)
}

func (f *fanout) each(do func(cache.ResourceEventHandler)) {
	f.mu.RLock()
	hs := f.handlers
	f.mu.RUnlock()
	for _, h := range hs {
		do(h)
	}
}

func (f *fanout) OnAdd(obj any, initial bool) {
	f.each(func(h cache.ResourceEventHandler) { h.OnAdd(obj, initial) })
}

func (f *fanout) OnUpdate(oldObj, newObj any) {
	f.each(func(h cache.ResourceEventHandler) { h.OnUpdate(oldObj, newObj) })
}

func (f *fanout) OnDelete(obj any) {
	f.each(func(h cache.ResourceEventHandler) { h.OnDelete(obj) })
}
