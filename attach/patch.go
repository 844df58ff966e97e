package attach

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/util/retry"
)

// Target is one kind of object whose machines get the storage network: what Patch needs of it.
// O is the kind's own view of one object (a typed MachineSet, an unstructured NodePool, ...).
// Each kind implements it in a package of its own; Patch does the rest, the same for all.
type Target[O any] interface {
	// Select reads the objects the command selected, in the order they are reported, each with
	// why it is left alone, if it is. A selection that names what does not exist is a
	// *SelectionError, before anything is written.
	Select(ctx context.Context) ([]Selected[O], error)
	// Ref names o in messages.
	Ref(o O) Ref
	// Plan says what attaching a to o does: the Result (ActionPatched when something is to be
	// written), the change Write writes and, on demand, the diff. It writes nothing.
	Plan(ctx context.Context, o O, a Attachment, now time.Time, by string) (Plan, error)
	// Write writes a plan of o, with o's resourceVersion as precondition: a conflict makes
	// Patch read o again (Get) and plan anew.
	Write(ctx context.Context, o O, p Plan) error
	// Get reads o again.
	Get(ctx context.Context, o O) (O, error)
}

// Selected is one object a command looks at; Skip, when set, says why it is left alone.
type Selected[O any] struct {
	Object O
	Skip   string
	// Result, when set, is the result to report of a skipped object (with its Role, say).
	Result *Result
}

// skipped is the result of an object left alone; Selected.Result, when set, says more of it.
func skipped[O any](ref Ref, s Selected[O]) Result {
	r := Result{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name}
	if s.Result != nil {
		r = *s.Result
	}
	r.Action, r.Reason = ActionSkipped, s.Skip
	return r
}

// Plan is what patching one object does, as Target.Plan computes it.
type Plan struct {
	Result Result
	// Change is the target's own: what Write writes (a JSON patch, a template and a patch).
	Change any
	// Diff computes the diff shown on a dry run; nil: none.
	Diff func() string
}

// Options are what every kind's patch takes.
type Options struct {
	Attachment Attachment
	// DryRun computes and returns the diffs without writing anything.
	DryRun bool
	// Checker, when set, looks the IDs up in Neutron before anything is written.
	Checker IDChecker
	// NetworksOnly: the kind takes no security groups (they are reported, not checked).
	NetworksOnly bool
	// By is recorded in the Annotation, e.g. "manila-setup v0.3.0".
	By string
	// Now is the clock of the Annotation; nil means time.Now.
	Now func() time.Time
	// Concurrency is how many writes may be in flight at once; zero: DefaultConcurrency.
	Concurrency int
	// Remove, when set, makes Patch and PatchFile remove what the objects' records say
	// manila-setup attached (Removal) instead of attaching Attachment: the kind must be a
	// Remover (FileRemover for files). The IDs are not looked up in Neutron: what is removed
	// may be gone from the cloud already.
	Remove *Removal
	// Capacity, when set, counts the machines the attachment reaches (of a Target that is a
	// Counter) against the free addresses of the networks it attaches, before anything is
	// written: more machines than addresses is a *CapacityError, unless it forces.
	Capacity *CapacityCheck

	checked bool // by Check
}

// DefaultConcurrency bounds the writes in flight: enough to hide the round trips, few enough
// not to load the apiserver (client-go's rate limit applies on top).
const DefaultConcurrency = 8

// Check validates the attachment and, with a Checker, looks the IDs up in Neutron. It returns
// the options as checked: the clock set, and marked so that Patch and PatchFile do not check
// them again (a use case that patches several kinds checks once).
func (opts Options) Check(ctx context.Context) (Options, error) {
	if opts.checked {
		return opts, nil
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Remove != nil {
		if errs := opts.Remove.Validate(); len(errs) > 0 {
			return opts, errs.ToAggregate()
		}
		opts.checked = true
		return opts, nil
	}
	if errs := opts.Attachment.Validate(); len(errs) > 0 {
		return opts, errs.ToAggregate()
	}
	ids := opts.Attachment
	if opts.NetworksOnly {
		ids.SecurityGroups = nil
	}
	if err := CheckIDs(ctx, opts.Checker, ids); err != nil {
		return opts, err
	}
	opts.checked = true
	return opts, nil
}

// Patch attaches opts.Attachment to the objects target selects: one read of the selection,
// then one write per object that lacks something, a few in flight at once, each planned anew
// when a concurrent writer made it conflict. It returns a result per object it looked at, in
// selection order, also when it fails part way (the results then say what was already done).
func Patch[O any](ctx context.Context, target Target[O], opts Options) ([]Result, error) {
	opts, err := opts.Check(ctx)
	if err != nil {
		return nil, err
	}
	objects, err := target.Select(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkCapacity(ctx, target, objects, opts); err != nil {
		return nil, err
	}
	workers := opts.Concurrency
	if workers <= 0 {
		workers = DefaultConcurrency
	}

	// After a failure no new write starts, but those in flight finish, so that the results say
	// exactly what was written.
	results := make([]Result, len(objects))
	done := make([]bool, len(objects))
	errs := make([]error, len(objects))
	var (
		mu     sync.Mutex
		failed bool
		g      errgroup.Group // no context: a failure must not cancel the writes in flight
	)
	g.SetLimit(workers)
	for i, s := range objects {
		mu.Lock()
		stop := failed
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		if s.Skip != "" {
			results[i], done[i] = skipped(target.Ref(s.Object), s), true
			continue
		}
		g.Go(func() error {
			res, err := patchOne(ctx, target, s.Object, opts)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[i], failed = err, true
				return nil
			}
			results[i], done[i] = res, true
			return nil
		})
	}
	_ = g.Wait() // every error is in errs, by object
	finished := make([]Result, 0, len(objects))
	for i := range objects {
		if done[i] {
			finished = append(finished, results[i])
		}
	}
	// Of several failures (the same RBAC refusal for every object, say), report the first.
	for i, err := range errs {
		if err != nil {
			return finished, writeError(target.Ref(objects[i].Object), err, retry.DefaultRetry.Steps, finished)
		}
	}
	if err := ctx.Err(); err != nil {
		return finished, fmt.Errorf("interrupted (%w): %s", err, alreadyDone(finished))
	}
	return finished, nil
}

// patchOne plans and writes one object, reading it again and starting over when a concurrent
// writer makes the write conflict.
func patchOne[O any](ctx context.Context, target Target[O], o O, opts Options) (Result, error) {
	var res Result
	attempt, retries := 0, 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempt++; attempt > 1 {
			retries++
			fresh, err := target.Get(ctx, o)
			if err != nil {
				return err
			}
			o = fresh
		}
		plan, err := planOf(ctx, target, o, opts)
		if err != nil {
			return err
		}
		res = plan.Result
		res.ConflictRetries = retries
		switch {
		case res.Action != ActionPatched:
			return nil
		case opts.DryRun:
			res.Action = ActionWouldPatch
			if plan.Diff != nil {
				res.Diff = plan.Diff()
			}
			return nil
		}
		return target.Write(ctx, o, plan)
	})
	return res, err
}
