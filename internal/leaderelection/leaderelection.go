// Package leaderelection elects a single leader among several replicas with a
// coordination.k8s.io/v1 Lease.
//
// It exists instead of client-go's tools/leaderelection because that package imports
// tools/leaderelection/resourcelock, which imports client-go's typed clientsets and with
// them k8s.io/client-go/kubernetes/scheme, the scheme of every Kubernetes API group.
// Linking and initialising all of that costs the operator about 10 MiB of resident
// memory. This package depends only on the standard library, k8s.io/api/coordination/v1,
// k8s.io/apimachinery, k8s.io/klog/v2 and k8s.io/utils/ptr; the caller hands it any Lease
// client it already has (see LeaseClient).
//
// The protocol is the one client-go uses, so both can contend for the same Lease:
//
//   - A candidate tries to acquire the Lease every RetryPeriod (plus up to 1.2 times
//     RetryPeriod of random jitter) until it succeeds or its context ends.
//   - A Lease held by another identity is taken over only when its spec has not changed
//     for LeaseDuration, measured on the candidate's own clock from the moment it first
//     saw that spec. The holder's renewTime is never compared with the local clock, so
//     clock skew between nodes does not matter.
//   - Every write is an Update carrying the resourceVersion last read or written, so of
//     two candidates racing for the same Lease only one wins (the other gets a conflict).
//   - The leader renews every RetryPeriod; if no renewal succeeds for RenewDeadline it
//     considers leadership lost. RenewDeadline < LeaseDuration keeps it from believing it
//     still leads once another candidate may have taken over.
package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// JitterFactor is the most by which a wait between acquisition attempts is lengthened, as
// a multiple of RetryPeriod: each wait lasts between RetryPeriod and
// (1+JitterFactor)*RetryPeriod. RenewDeadline must exceed JitterFactor*RetryPeriod.
const JitterFactor = 1.2

// releaseTimeout bounds the Update that gives the Lease up once the caller's context has
// ended.
const releaseTimeout = 5 * time.Second

// LeaseClient is what the elector needs of a namespaced Lease client; client-go's
// CoordinationV1().Leases(ns) and a gentype client both satisfy it.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// Config configures one candidate. Client, Name, Identity, the three durations,
// OnStartedLeading and OnStoppedLeading are required.
type Config struct {
	Client    LeaseClient
	Namespace string // for messages only
	Name      string // the Lease's name
	// Identity names this candidate; it must differ between candidates (e.g. the pod name).
	Identity string
	// LeaseDuration is how long a candidate waits, from the moment it last saw the Lease
	// change, before taking over a Lease held by someone else.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it gives up.
	RenewDeadline time.Duration
	// RetryPeriod is the wait between attempts to acquire or renew.
	RetryPeriod time.Duration
	// ReleaseOnCancel gives the lease up when ctx ends, so a successor takes over at once.
	ReleaseOnCancel  bool
	OnStartedLeading func(ctx context.Context) // run in a goroutine; ctx ends when leadership is lost or ctx ends
	OnStoppedLeading func()                    // called once when Run returns after having led
	// OnNewLeader is optional. It is called, from Run's goroutine, whenever the observed
	// holder changes to another non-empty identity (including this one); it must not block.
	OnNewLeader func(identity string)
}

func (c *Config) validate() error {
	var errs []error
	if c.Client == nil {
		errs = append(errs, errors.New("Client is required"))
	}
	if c.Name == "" {
		errs = append(errs, errors.New("Name is required"))
	}
	if c.Identity == "" {
		errs = append(errs, errors.New("Identity is required"))
	}
	if c.LeaseDuration <= 0 {
		errs = append(errs, fmt.Errorf("LeaseDuration must be positive, got %v", c.LeaseDuration))
	}
	if c.RenewDeadline <= 0 {
		errs = append(errs, fmt.Errorf("RenewDeadline must be positive, got %v", c.RenewDeadline))
	}
	if c.RetryPeriod <= 0 {
		errs = append(errs, fmt.Errorf("RetryPeriod must be positive, got %v", c.RetryPeriod))
	}
	if c.LeaseDuration > 0 && c.RenewDeadline > 0 && c.LeaseDuration <= c.RenewDeadline {
		errs = append(errs, fmt.Errorf("LeaseDuration (%v) must be greater than RenewDeadline (%v)", c.LeaseDuration, c.RenewDeadline))
	}
	if c.RenewDeadline > 0 && c.RetryPeriod > 0 && float64(c.RenewDeadline) <= JitterFactor*float64(c.RetryPeriod) {
		errs = append(errs, fmt.Errorf("RenewDeadline (%v) must be greater than %v times RetryPeriod (%v)", c.RenewDeadline, JitterFactor, c.RetryPeriod))
	}
	if c.OnStartedLeading == nil {
		errs = append(errs, errors.New("OnStartedLeading is required"))
	}
	if c.OnStoppedLeading == nil {
		errs = append(errs, errors.New("OnStoppedLeading is required"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid leader election config: %w", errors.Join(errs...))
	}
	return nil
}

// Run blocks until ctx ends or leadership is lost after having been acquired.
//
// Once it holds the Lease it starts OnStartedLeading in a new goroutine with a context
// that ends when leadership is lost or ctx ends, and renews the Lease until then. It then
// cancels that context, gives the Lease up if ReleaseOnCancel is set and it still holds
// it, calls OnStoppedLeading and returns nil; it does not wait for OnStartedLeading to
// return. If ctx ends before the Lease is acquired, Run returns nil without calling
// either callback. The only error is for an invalid Config.
//
// Run keeps all its state in its own goroutine, so any number of Runs, for the same or
// different Leases, may run at once.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	e := &elector{
		cfg:    cfg,
		logger: klog.FromContext(ctx).WithValues("lease", cfg.Namespace+"/"+cfg.Name, "identity", cfg.Identity),
	}
	if !e.acquire(ctx) {
		return nil
	}

	leadCtx, cancelLead := context.WithCancel(ctx)
	defer cancelLead()
	go cfg.OnStartedLeading(leadCtx)

	e.renew(ctx)
	cancelLead()
	if cfg.ReleaseOnCancel {
		e.release()
	}
	cfg.OnStoppedLeading()
	return nil
}

// elector is the state of one Run. Only Run's goroutine touches it.
type elector struct {
	cfg    Config
	logger klog.Logger

	// observed is the Lease spec last read or written, and observedAt the local time at
	// which that spec was first seen. A holder other than this one may be displaced only
	// once observedAt+LeaseDuration has passed.
	observed   *coordinationv1.LeaseSpec
	observedAt time.Time
	// written is the Lease as returned by this elector's last successful write; its
	// resourceVersion lets the leader renew without reading first.
	written *coordinationv1.Lease
	// reported is the holder last passed to OnNewLeader.
	reported string
}

// acquire tries to take the Lease until it succeeds (true) or ctx ends (false).
func (e *elector) acquire(ctx context.Context) bool {
	e.logger.V(2).Info("Attempting to acquire the lease")
	for ctx.Err() == nil {
		if e.tryWithTimeout(ctx) {
			e.logger.Info("Acquired the lease")
			return true
		}
		wait := e.cfg.RetryPeriod + time.Duration(rand.Float64()*JitterFactor*float64(e.cfg.RetryPeriod))
		if !sleep(ctx, wait) {
			break
		}
	}
	return false
}

// tryWithTimeout makes one attempt, bounding its requests by RenewDeadline so a hung
// connection cannot stall the acquisition loop.
func (e *elector) tryWithTimeout(ctx context.Context) bool {
	tryCtx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
	defer cancel()
	return e.tryAcquireOrRenew(tryCtx)
}

// renew keeps the Lease until ctx ends or no renewal has succeeded for RenewDeadline.
func (e *elector) renew(ctx context.Context) {
	lastRenew := e.observedAt
	for {
		if !sleep(ctx, e.cfg.RetryPeriod) {
			e.logger.V(2).Info("Stopping leading: context ended")
			return
		}
		deadline := lastRenew.Add(e.cfg.RenewDeadline)
		tryCtx, cancel := context.WithDeadline(ctx, deadline)
		start := time.Now()
		ok := e.tryAcquireOrRenew(tryCtx)
		cancel()
		switch {
		case ok:
			lastRenew = start
			e.logger.V(5).Info("Renewed the lease")
		case ctx.Err() != nil:
			e.logger.V(2).Info("Stopping leading: context ended")
			return
		case !time.Now().Before(deadline):
			e.logger.Info("Lost the lease: no renewal succeeded within the renew deadline", "renewDeadline", e.cfg.RenewDeadline, "holder", e.observedHolder())
			return
		}
	}
}

// tryAcquireOrRenew makes one attempt to acquire or renew the Lease and reports whether
// this elector holds it afterwards.
func (e *elector) tryAcquireOrRenew(ctx context.Context) bool {
	now := time.Now()
	nowMicro := metav1.NewMicroTime(now)
	durationSeconds := ptr.To(leaseSeconds(e.cfg.LeaseDuration))

	// Fast path: the leader, whose view of the Lease is still valid, writes over its own
	// last write. A conflict means someone else wrote in between; then read and decide.
	if e.leading() && e.written != nil && now.Before(e.observedAt.Add(e.cfg.LeaseDuration)) {
		lease := e.written.DeepCopy()
		lease.Spec.HolderIdentity = ptr.To(e.cfg.Identity)
		lease.Spec.RenewTime = &nowMicro
		lease.Spec.LeaseDurationSeconds = durationSeconds
		updated, err := e.cfg.Client.Update(ctx, lease, metav1.UpdateOptions{})
		if err == nil {
			e.recordWrite(updated, now)
			return true
		}
		e.logger.V(4).Info("Fast renewal failed, reading the lease", "err", err)
	}

	current, err := e.cfg.Client.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: e.cfg.Name, Namespace: e.cfg.Namespace},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(e.cfg.Identity),
				LeaseDurationSeconds: durationSeconds,
				AcquireTime:          &nowMicro,
				RenewTime:            &nowMicro,
				LeaseTransitions:     ptr.To[int32](0),
			},
		}
		created, err := e.cfg.Client.Create(ctx, lease, metav1.CreateOptions{})
		if err != nil {
			e.logAttemptError("Creating the lease failed", err)
			return false
		}
		e.recordWrite(created, now)
		return true
	}
	if err != nil {
		e.logAttemptError("Reading the lease failed", err)
		return false
	}

	if e.observed == nil || !equality.Semantic.DeepEqual(*e.observed, current.Spec) {
		e.observe(current.Spec, now)
	}
	holder := ptr.Deref(current.Spec.HolderIdentity, "")
	if holder != "" && holder != e.cfg.Identity && now.Before(e.observedAt.Add(e.cfg.LeaseDuration)) {
		e.logger.V(4).Info("The lease is held by another candidate", "holder", holder)
		return false
	}

	lease := current.DeepCopy()
	lease.Spec.HolderIdentity = ptr.To(e.cfg.Identity)
	lease.Spec.RenewTime = &nowMicro
	lease.Spec.LeaseDurationSeconds = durationSeconds
	if holder != e.cfg.Identity || lease.Spec.AcquireTime == nil {
		lease.Spec.AcquireTime = &nowMicro
	}
	if holder != e.cfg.Identity {
		lease.Spec.LeaseTransitions = ptr.To(ptr.Deref(current.Spec.LeaseTransitions, 0) + 1)
	}
	updated, err := e.cfg.Client.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		e.logAttemptError("Updating the lease failed", err)
		return false
	}
	e.recordWrite(updated, now)
	return true
}

// release gives the Lease up, if this elector still believes it holds it, so that a
// successor need not wait for it to expire. The write carries the resourceVersion of this
// elector's last write, so it fails harmlessly if anyone has written since.
func (e *elector) release() {
	if !e.leading() || e.written == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	now := time.Now()
	nowMicro := metav1.NewMicroTime(now)
	lease := e.written.DeepCopy()
	lease.Spec.HolderIdentity = ptr.To("")
	lease.Spec.LeaseDurationSeconds = ptr.To[int32](1)
	lease.Spec.RenewTime = &nowMicro
	lease.Spec.AcquireTime = &nowMicro
	updated, err := e.cfg.Client.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		e.logger.Error(err, "Releasing the lease failed; a successor will take over once it expires")
		return
	}
	e.recordWrite(updated, now)
	e.logger.Info("Released the lease")
}

func (e *elector) leading() bool {
	return e.observedHolder() == e.cfg.Identity
}

func (e *elector) observedHolder() string {
	if e.observed == nil {
		return ""
	}
	return ptr.Deref(e.observed.HolderIdentity, "")
}

func (e *elector) recordWrite(lease *coordinationv1.Lease, at time.Time) {
	e.written = lease
	e.observe(lease.Spec, at)
}

func (e *elector) observe(spec coordinationv1.LeaseSpec, at time.Time) {
	e.observed = spec.DeepCopy()
	e.observedAt = at
	holder := ptr.Deref(spec.HolderIdentity, "")
	if holder == "" || holder == e.reported {
		return
	}
	e.reported = holder
	e.logger.V(2).Info("New leader observed", "holder", holder)
	if e.cfg.OnNewLeader != nil {
		e.cfg.OnNewLeader(holder)
	}
}

// logAttemptError logs a failed request. A conflict or an existing Lease only means
// another candidate wrote first, and a context error that the attempt ran out of time
// (which renew reports itself) or that Run is ending; these are logged quietly.
func (e *elector) logAttemptError(msg string, err error) {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		e.logger.V(4).Info(msg, "err", err)
		return
	}
	e.logger.Error(err, msg)
}

// leaseSeconds converts d to whole seconds for leaseDurationSeconds, rounding up so the
// Lease never claims less than the elector waits.
func leaseSeconds(d time.Duration) int32 {
	s := math.Ceil(d.Seconds())
	if s > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(max(s, 1))
}

// sleep waits for d and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
