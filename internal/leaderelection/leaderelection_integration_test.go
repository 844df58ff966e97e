//go:build integration

package leaderelection

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/test/testenv"
)

const (
	testLeaseDuration = 3 * time.Second
	testRenewDeadline = 2 * time.Second
	testRetryPeriod   = 500 * time.Millisecond
	leaseName         = "test-leader"
	// eventTimeout is a generous bound for waiting on an event that must happen.
	eventTimeout = 30 * time.Second
)

// candidate is one running Run with its callbacks recorded.
type candidate struct {
	id      string
	cancel  context.CancelFunc
	started chan struct{}        // closed by OnStartedLeading
	leadCtx chan context.Context // receives OnStartedLeading's ctx
	stopped chan struct{}        // closed by OnStoppedLeading
	leaders chan string          // OnNewLeader's arguments
	done    chan error           // Run's result

	mu            sync.Mutex
	stoppedCalls  int
	startedCalled bool
}

func startCandidate(t *testing.T, client kubernetes.Interface, ns, id string, releaseOnCancel bool) *candidate {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{
		id:      id,
		cancel:  cancel,
		started: make(chan struct{}),
		leadCtx: make(chan context.Context, 1),
		stopped: make(chan struct{}),
		leaders: make(chan string, 100),
		done:    make(chan error, 1),
	}
	cfg := Config{
		Client:          client.CoordinationV1().Leases(ns),
		Namespace:       ns,
		Name:            leaseName,
		Identity:        id,
		LeaseDuration:   testLeaseDuration,
		RenewDeadline:   testRenewDeadline,
		RetryPeriod:     testRetryPeriod,
		ReleaseOnCancel: releaseOnCancel,
		OnStartedLeading: func(ctx context.Context) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.startedCalled {
				t.Errorf("%s: OnStartedLeading called twice", id)
				return
			}
			c.startedCalled = true
			c.leadCtx <- ctx
			close(c.started)
		},
		OnStoppedLeading: func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.stoppedCalls++
			if c.stoppedCalls > 1 {
				t.Errorf("%s: OnStoppedLeading called %d times", id, c.stoppedCalls)
				return
			}
			close(c.stopped)
		},
		OnNewLeader: func(identity string) {
			select {
			case c.leaders <- identity:
			default:
			}
		},
	}
	go func() { c.done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-c.done:
		case <-time.After(eventTimeout):
			t.Errorf("%s: Run did not return after its context was cancelled", id)
		}
	})
	return c
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (c *candidate) leading() bool {
	select {
	case <-c.started:
		return true
	default:
		return false
	}
}

// waitLeadCtx returns the context OnStartedLeading received; the candidate must have
// started leading.
func (c *candidate) waitLeadCtx(t *testing.T) context.Context {
	t.Helper()
	select {
	case ctx := <-c.leadCtx:
		c.leadCtx <- ctx
		return ctx
	case <-time.After(eventTimeout):
		t.Fatalf("%s never started leading", c.id)
		return nil
	}
}

// waitStopped waits until Run has returned nil, OnStoppedLeading was called and the
// leading context is done.
func (c *candidate) waitStopped(t *testing.T) {
	t.Helper()
	leadCtx := c.waitLeadCtx(t)
	waitFor(t, leadCtx.Done(), c.id+": leading context cancelled")
	waitFor(t, c.stopped, c.id+": OnStoppedLeading called")
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("%s: Run returned %v, want nil", c.id, err)
		}
		c.done <- err // for the cleanup
	case <-time.After(eventTimeout):
		t.Fatalf("%s: Run did not return", c.id)
	}
}

// waitLeader waits until the candidate has observed identity as the holder.
func (c *candidate) waitLeader(t *testing.T, identity string) {
	t.Helper()
	timeout := time.After(eventTimeout)
	for {
		select {
		case got := <-c.leaders:
			if got == identity {
				return
			}
		case <-timeout:
			t.Fatalf("%s never observed %s as the leader", c.id, identity)
		}
	}
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(eventTimeout):
		t.Fatalf("timed out waiting for: %s", what)
	}
}

func newNamespace(t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	_, err := client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

func getLease(t *testing.T, client kubernetes.Interface, ns string) *coordinationv1.Lease {
	t.Helper()
	lease, err := client.CoordinationV1().Leases(ns).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the lease: %v", err)
	}
	return lease
}

func holder(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

func transitions(l *coordinationv1.Lease) int32 { return ptr.Deref(l.Spec.LeaseTransitions, -1) }

func describe(l *coordinationv1.Lease) string {
	return fmt.Sprintf("holder=%q duration=%v transitions=%v acquire=%v renew=%v rv=%s",
		holder(l), ptr.Deref(l.Spec.LeaseDurationSeconds, -1), transitions(l),
		l.Spec.AcquireTime, l.Spec.RenewTime, l.ResourceVersion)
}

// waitForRenewals waits until the lease's renewTime has changed n times and checks after
// each change that holder, acquireTime and leaseTransitions stayed as they were.
func waitForRenewals(t *testing.T, client kubernetes.Interface, ns string, want *coordinationv1.Lease, n int) {
	t.Helper()
	last := want.Spec.RenewTime.Time
	deadline := time.Now().Add(eventTimeout)
	for seen := 0; seen < n; {
		if time.Now().After(deadline) {
			t.Fatalf("saw only %d of %d renewals", seen, n)
		}
		time.Sleep(testRetryPeriod / 2)
		l := getLease(t, client, ns)
		if l.Spec.RenewTime.Time.Equal(last) {
			continue
		}
		seen++
		last = l.Spec.RenewTime.Time
		if holder(l) != holder(want) {
			t.Fatalf("holder changed on renewal: %s", describe(l))
		}
		if !l.Spec.AcquireTime.Time.Equal(want.Spec.AcquireTime.Time) {
			t.Errorf("acquireTime changed on renewal: was %v, now %s", want.Spec.AcquireTime, describe(l))
		}
		if transitions(l) != transitions(want) {
			t.Errorf("leaseTransitions changed on renewal: was %d, now %s", transitions(want), describe(l))
		}
		if !l.Spec.RenewTime.Time.After(l.Spec.AcquireTime.Time) {
			t.Errorf("renewTime not after acquireTime after a renewal: %s", describe(l))
		}
	}
}

func TestLeaderElection(t *testing.T) {
	s := testenv.NewAPIServer(t)

	t.Run("OneOfTwoLeads", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, s.Client, "le-one-of-two")
		a := startCandidate(t, s.Client, ns, "a", false)
		b := startCandidate(t, s.Client, ns, "b", false)

		var leader, follower *candidate
		select {
		case <-a.started:
			leader, follower = a, b
		case <-b.started:
			leader, follower = b, a
		case <-time.After(eventTimeout):
			t.Fatal("no candidate started leading")
		}
		t.Logf("%s leads", leader.id)

		// Over two lease durations the leader keeps renewing and the follower never leads.
		select {
		case <-follower.started:
			t.Fatalf("%s started leading too", follower.id)
		case <-time.After(2 * testLeaseDuration):
		}
		if err := leader.waitLeadCtx(t).Err(); err != nil {
			t.Fatalf("the leader's context ended: %v", err)
		}
		follower.waitLeader(t, leader.id)

		l := getLease(t, s.Client, ns)
		if holder(l) != leader.id {
			t.Fatalf("lease holder is %q, want %q (%s)", holder(l), leader.id, describe(l))
		}
		if got := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); got != 3 {
			t.Errorf("leaseDurationSeconds = %d, want 3", got)
		}
		if leader.leading() == follower.leading() {
			t.Fatalf("leading: %s=%v %s=%v", leader.id, leader.leading(), follower.id, follower.leading())
		}
	})

	t.Run("ReleaseOnCancel", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, s.Client, "le-release")
		a := startCandidate(t, s.Client, ns, "a", true)
		waitFor(t, a.started, "a leads")
		b := startCandidate(t, s.Client, ns, "b", true)
		b.waitLeader(t, "a") // b has seen a's lease, so without a release it would wait LeaseDuration

		before := getLease(t, s.Client, ns)
		w, err := s.Client.CoordinationV1().Leases(ns).Watch(context.Background(), metav1.ListOptions{
			FieldSelector:   "metadata.name=" + leaseName,
			ResourceVersion: before.ResourceVersion,
		})
		if err != nil {
			t.Fatalf("watching the lease: %v", err)
		}
		defer w.Stop()

		cancelled := time.Now()
		a.cancel()
		a.waitStopped(t)
		waitFor(t, b.started, "b takes over")
		t.Logf("b took over %v after a's context was cancelled (lease duration %v)", time.Since(cancelled).Round(time.Millisecond), testLeaseDuration)

		// The watch shows a's release, then b's acquisition.
		released := false
		timeout := time.After(eventTimeout)
	events:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatal("watch closed early")
				}
				if ev.Type != watch.Modified {
					continue
				}
				l := ev.Object.(*coordinationv1.Lease)
				t.Logf("lease modified: %s", describe(l))
				switch holder(l) {
				case "":
					released = true
					if d := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); d != 1 {
						t.Errorf("released lease has leaseDurationSeconds %d, want 1", d)
					}
					if transitions(l) != transitions(before) {
						t.Errorf("release changed leaseTransitions from %d to %d", transitions(before), transitions(l))
					}
				case "b":
					break events
				}
			case <-timeout:
				t.Fatal("never saw b acquire the lease in the watch")
			}
		}
		if !released {
			t.Fatal("a did not release the lease before b acquired it")
		}
		after := getLease(t, s.Client, ns)
		if holder(after) != "b" || transitions(after) != transitions(before)+1 {
			t.Fatalf("after takeover: %s, want holder b and transitions %d", describe(after), transitions(before)+1)
		}
	})

	t.Run("IntruderTakesLease", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, s.Client, "le-intruder")
		leases := s.Client.CoordinationV1().Leases(ns)
		a := startCandidate(t, s.Client, ns, "a", true)
		waitFor(t, a.started, "a leads")

		// The intruder overwrites the lease every 500 ms until a has stopped leading (a fixed
		// span could end before a, slowed by a loaded machine, has given up).
		intruderCtx, stopIntruder := context.WithCancel(context.Background())
		defer stopIntruder()
		var wg sync.WaitGroup
		wg.Go(func() {
			end := time.Now().Add(eventTimeout)
			for time.Now().Before(end) && intruderCtx.Err() == nil && !closed(a.stopped) {
				l, err := leases.Get(intruderCtx, leaseName, metav1.GetOptions{})
				if err == nil {
					now := metav1.NowMicro()
					l.Spec.HolderIdentity = ptr.To("intruder")
					l.Spec.RenewTime = &now
					l.Spec.LeaseDurationSeconds = ptr.To[int32](3)
					_, err = leases.Update(intruderCtx, l, metav1.UpdateOptions{})
				}
				if err != nil && !apierrors.IsConflict(err) && intruderCtx.Err() == nil {
					t.Errorf("intruder: %v", err)
				}
				select {
				case <-intruderCtx.Done():
				case <-time.After(500 * time.Millisecond):
				}
			}
		})

		a.waitStopped(t) // Run returns by itself: a's own ctx was never cancelled
		a.waitLeader(t, "intruder")
		wg.Wait()
		// a lost the lease to the intruder, so it must not have released it.
		if l := getLease(t, s.Client, ns); holder(l) != "intruder" {
			t.Fatalf("after a lost the lease: %s, want holder intruder", describe(l))
		}
	})

	t.Run("TransitionsAndAcquireTime", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, s.Client, "le-transitions")
		a := startCandidate(t, s.Client, ns, "a", true)
		waitFor(t, a.started, "a leads")
		first := getLease(t, s.Client, ns)
		if holder(first) != "a" || transitions(first) != 0 || first.Spec.AcquireTime == nil || first.Spec.RenewTime == nil {
			t.Fatalf("new lease: %s, want holder a, transitions 0, acquire and renew times", describe(first))
		}
		waitForRenewals(t, s.Client, ns, first, 3)

		// Takeover after a release.
		b := startCandidate(t, s.Client, ns, "b", false)
		b.waitLeader(t, "a")
		a.cancel()
		a.waitStopped(t)
		waitFor(t, b.started, "b takes over after a's release")
		second := getLease(t, s.Client, ns)
		if holder(second) != "b" || transitions(second) != 1 {
			t.Fatalf("after the first takeover: %s, want holder b, transitions 1", describe(second))
		}
		if !second.Spec.AcquireTime.Time.After(first.Spec.AcquireTime.Time) {
			t.Errorf("acquireTime not renewed on takeover: was %v, now %s", first.Spec.AcquireTime, describe(second))
		}
		waitForRenewals(t, s.Client, ns, second, 2)

		// Takeover after expiry: b does not release.
		c := startCandidate(t, s.Client, ns, "c", false)
		c.waitLeader(t, "b")
		b.cancel()
		b.waitStopped(t)
		if l := getLease(t, s.Client, ns); holder(l) != "b" {
			t.Fatalf("b released the lease without ReleaseOnCancel: %s", describe(l))
		}
		waitFor(t, c.started, "c takes over after b's lease expired")
		third := getLease(t, s.Client, ns)
		if holder(third) != "c" || transitions(third) != 2 {
			t.Fatalf("after the second takeover: %s, want holder c, transitions 2", describe(third))
		}
		waitForRenewals(t, s.Client, ns, third, 2)
	})
}
