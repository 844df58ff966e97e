package machinery

import (
	"context"
	"sync"
	"time"
)

// The timers of the controllers. On an idle cluster the operator does nearly nothing but wake
// up, and each wake-up costs more than the little work it does (thread switches, the runtime's
// monitor spinning up again). An execution trace of a steady minute (docs/performance.md) found
// 130 wake-ups from outside the process: half were client-go's delaying queues, which look at
// their waiting list every 10 seconds even when it is empty (11 controllers, 66 a minute), and
// 11 were the controllers' own resync timers. A controller has one queue key, so one timer of
// its own is all its delays need, and one ticker serves every controller's resync.

// delayedAdd calls add once after the earliest delay asked for: a later ask while an earlier one
// is pending adds nothing, an earlier one brings the call forward. It holds one timer, and no
// goroutine while nothing is pending.
type delayedAdd struct {
	add func()

	mu      sync.Mutex
	timer   *time.Timer
	due     time.Time // zero when nothing is pending
	stopped bool
}

func (d *delayedAdd) after(delay time.Duration) {
	if delay <= 0 {
		d.add()
		return
	}
	at := time.Now().Add(delay)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped || (!d.due.IsZero() && !d.due.After(at)) {
		return
	}
	d.due = at
	if d.timer == nil {
		d.timer = time.AfterFunc(delay, d.fire)
		return
	}
	d.timer.Reset(delay)
}

func (d *delayedAdd) fire() {
	d.mu.Lock()
	// A timer brought forward may fire while an ask made meanwhile is still pending: that one
	// stays pending (the timer was reset for it).
	if !d.due.IsZero() && !time.Now().Before(d.due) {
		d.due = time.Time{}
	}
	stopped := d.stopped
	d.mu.Unlock()
	if !stopped {
		d.add()
	}
}

// pending tells whether a call is waiting.
func (d *delayedAdd) pending() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.due.IsZero()
}

func (d *delayedAdd) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
	}
}

// Resyncs asks every controller added to it for a sync once a period, from one ticker: the
// whole operator wakes once a period for its resyncs, not once per controller at scattered
// times. A nil *Resyncs adds nothing and never ticks.
type Resyncs struct {
	period time.Duration

	mu          sync.Mutex
	controllers []*Controller
}

// NewResyncs makes a Resyncs of the given period.
func NewResyncs(period time.Duration) *Resyncs {
	return &Resyncs{period: period}
}

func (r *Resyncs) add(c *Controller) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.controllers = append(r.controllers, c)
}

// Run enqueues every controller each period until ctx ends. Each controller syncs once when it
// starts, so the first tick is one period after Run.
func (r *Resyncs) Run(ctx context.Context) {
	if r == nil || r.period <= 0 {
		return
	}
	t := time.NewTicker(r.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.mu.Lock()
			cs := r.controllers
			r.mu.Unlock()
			for _, c := range cs {
				c.Enqueue()
			}
		}
	}
}
