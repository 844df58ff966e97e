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
	c := NewController("deferral", time.Hour, nil, func(context.Context, *Controller) error {
		at = append(at, time.Now())
		if len(at) == 1 {
			return &Deferred{After: after}
		}
		return nil
	})
	defer c.queue.ShutDown()
	c.Enqueue()
	c.processNext(ctx)
	if n := c.queue.Len(); n != 0 {
		t.Fatalf("%d keys queued right after the Deferred sync, want none until it is due", n)
	}
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	if !c.processNext(ctx) || len(at) != 2 {
		t.Fatal("no second sync after a Deferred")
	}
	if gap := at[1].Sub(at[0]); gap < after {
		t.Errorf("second sync %s after the Deferred one, want at least %s", gap, after)
	}
}
