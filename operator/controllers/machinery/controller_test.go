package machinery

import (
	"context"
	"testing"
	"time"
)

// TestDeferredSyncsAgainWhenDue: a sync whose status write was held back (Deferred) runs again
// when the write is due, not at once as the backoff of a failure would have it.
func TestDeferredSyncsAgainWhenDue(t *testing.T) {
	const after = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var at []time.Time
	c := NewController("deferral", nil, func(context.Context, *Controller) error {
		at = append(at, time.Now())
		if len(at) == 1 {
			return &Deferred{After: after}
		}
		return nil
	})
	defer c.shutDown()
	c.Enqueue()
	c.processNext(ctx)
	if n := c.queue.Len(); n != 0 || !c.later.pending() {
		t.Fatalf("%d keys queued right after the Deferred sync (a sync pending: %v), want none until it is due, and one pending", n, c.later.pending())
	}
	go func() {
		<-ctx.Done()
		c.shutDown()
	}()
	if !c.processNext(ctx) || len(at) != 2 {
		t.Fatal("no second sync after a Deferred")
	}
	if gap := at[1].Sub(at[0]); gap < after {
		t.Errorf("second sync %s after the Deferred one, want at least %s", gap, after)
	}
}

// TestNotCachedLooksAgainSoon: a sync that waits for a cache made a moment ago runs again within
// milliseconds, not at the next resync, and is no failure.
func TestNotCachedLooksAgainSoon(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	c := NewController("not-cached", nil, func(context.Context, *Controller) error {
		calls++
		if calls < 3 {
			return ErrNotCached
		}
		return nil
	})
	defer c.shutDown()
	go func() {
		<-ctx.Done()
		c.shutDown()
	}()
	start := time.Now()
	c.Enqueue()
	for calls < 3 && c.processNext(ctx) {
	}
	if calls != 3 {
		t.Fatalf("%d syncs, want 3", calls)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("three syncs took %s while the cache was not listed, want them long before the resync", took)
	}
	if n := c.limiter.NumRequeues(queueKey); n != 0 {
		t.Errorf("%d requeues remembered after the sync that found the cache, want 0", n)
	}
}
