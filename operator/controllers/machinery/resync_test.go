package machinery

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestDelayedAddKeepsTheEarliest: of the delays asked for while one is pending, the earliest
// decides when the one call comes; nothing comes after stop.
func TestDelayedAddKeepsTheEarliest(t *testing.T) {
	var calls atomic.Int32
	called := make(chan time.Time, 10)
	d := &delayedAdd{add: func() { calls.Add(1); called <- time.Now() }}
	start := time.Now()
	d.after(time.Hour)
	d.after(50 * time.Millisecond) // brings the call forward
	d.after(time.Hour)             // later than the pending one: nothing
	if !d.pending() {
		t.Fatal("nothing pending after three asks")
	}
	select {
	case at := <-called:
		if gap := at.Sub(start); gap < 50*time.Millisecond || gap > 30*time.Second {
			t.Fatalf("called %s after the asks, want 50 ms or a little more", gap)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no call within 30 s of an ask for 50 ms")
	}
	time.Sleep(100 * time.Millisecond)
	if n := calls.Load(); n != 1 || d.pending() {
		t.Fatalf("%d calls (still pending: %v), want one and nothing pending", n, d.pending())
	}
	d.after(0)
	if n := calls.Load(); n != 2 {
		t.Fatalf("an ask with no delay: %d calls in all, want 2", n)
	}
	d.after(10 * time.Millisecond)
	d.stop()
	time.Sleep(100 * time.Millisecond)
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls after stop, want still 2", n)
	}
}

// TestResyncsEnqueueEveryController: each tick asks every controller added for a sync.
func TestResyncsEnqueueEveryController(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := NewResyncs(20 * time.Millisecond)
	a := Loop{Resyncs: r}.Controller("a", nil)
	b := Loop{Resyncs: r}.Controller("b", nil)
	defer a.shutDown()
	defer b.shutDown()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for (a.queue.Len() == 0 || b.queue.Len() == 0) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if a.queue.Len() != 1 || b.queue.Len() != 1 {
		t.Fatalf("queued after the ticks: a %d, b %d; want the one key each", a.queue.Len(), b.queue.Len())
	}
	var none *Resyncs
	none.add(a)
	none.Run(context.Background()) // returns at once
}
