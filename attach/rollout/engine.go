package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Target is an API whose MachineSets RollSets replaces the Machines of: the Machine API's
// (Rollout) or Cluster API's (package clusterapi). It reads and writes; the decisions are
// RollSets', the same for both, so both keep the same capacity guarantees and resume the same
// way.
type Target interface {
	// API names the sets and Machines in messages.
	API() API
	// Observe reads a set and its Machines (those being deleted included).
	Observe(ctx context.Context, set string) (SetView, error)
	// Mark puts the API's delete-machine annotation on the Machines named: the set's
	// controller deletes such Machines first when it scales down. A Machine gone already is
	// no error.
	Mark(ctx context.Context, machines []string) error
	// Scale sets the set's spec.replicas to replicas if it is still v.Replicas (ScalePatch),
	// recording v.Original first; ScaleError(err) of its answer. A scale-down comes only a
	// MarkSettle after its victims were marked (rollSet).
	Scale(ctx context.Context, v SetView, replicas int32) error
	// Finish removes what the rollout left: the delete mark of the Machines that stay and the
	// OriginalReplicasAnnotation (when v.HasOriginal).
	Finish(ctx context.Context, v SetView) error
	// Facts reads what the canary check needs about a Machine of the set v.
	Facts(ctx context.Context, v SetView, machine string) (Facts, error)
	// MarkCanary sets the CanaryAnnotation of a Machine to value ("" removes it).
	MarkCanary(ctx context.Context, machine, value string) error
}

// API names where a target's sets are and how to continue a rollout, for the messages.
type API struct {
	Namespace string
	// SetKind is how a set is called: "MachineSet", "Cluster API MachineSet".
	SetKind string
	// MachineResource is what `oc describe` takes for a Machine: "machine",
	// "machines.cluster.x-k8s.io".
	MachineResource string
	// Command continues a stopped rollout.
	Command string
}

// RollSets rolls the sets of progress that are Pending, one after the other, through
// target; the others (skipped) are only reported. It returns the final state of every set, and
// stops at the first set that fails. Killed at any point, it continues when called again.
func RollSets(ctx context.Context, target Target, progress []SetProgress, opts Options) ([]SetProgress, error) {
	if err := opts.Complete(); err != nil {
		return progress, err
	}
	r := &sequencer{target: target, opts: opts, progress: progress}
	for i := range r.progress {
		r.report(i)
	}
	for i := range r.progress {
		if r.progress[i].State != Pending {
			continue
		}
		if err := r.rollSet(ctx, i); err != nil {
			return r.progress, err
		}
	}
	return r.progress, nil
}

// OriginalReplicas reads the OriginalReplicasAnnotation of a set whose spec.replicas is
// replicas: the count to restore, and whether a rollout is under way.
func OriginalReplicas(annotations map[string]string, replicas int32) (int32, bool, error) {
	s, ok := annotations[OriginalReplicasAnnotation]
	if !ok {
		return replicas, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("annotation %s: Invalid value: %q: must be a replica count; delete it and set spec.replicas to the count the set should have", OriginalReplicasAnnotation, s)
	}
	return int32(n), true, nil
}

// ScalePatch is the JSON patch that scales a set seen as v to replicas and, on the first
// scale of a rollout, records v.Original in the OriginalReplicasAnnotation.
//
// The precondition is the replica count the decision was made on, not the whole object's
// resourceVersion: the MachineSet controller rewrites the status all the time, and that must
// not make every step start over. If someone else scaled the set meanwhile, the "test" fails
// and the state is read again.
func ScalePatch(v SetView, replicas int32) []byte {
	ops := []jsonPatchOp{
		{Op: "test", Path: "/spec/replicas", Value: v.Replicas},
		{Op: "replace", Path: "/spec/replicas", Value: replicas},
	}
	if !v.HasOriginal {
		if v.HasAnnotations {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + escapePointer(OriginalReplicasAnnotation), Value: strconv.Itoa(int(v.Original))})
		} else {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{OriginalReplicasAnnotation: strconv.Itoa(int(v.Original))}})
		}
	}
	b, _ := json.Marshal(ops)
	return b
}

// ScaleError is the error of a ScalePatch's answer: ErrReplicasChanged when the "test" failed.
func ScaleError(err error) error {
	// A failed "test" comes back as a bare 422 Invalid (the apiserver drops jsonpatch's
	// message). Nothing else in this patch can be invalid; rollSet still gives up if it repeats.
	if apierrors.IsInvalid(err) {
		return fmt.Errorf("%w (%v)", ErrReplicasChanged, err)
	}
	return err
}

// ErrReplicasChanged says that spec.replicas changed between reading and scaling.
var ErrReplicasChanged = errors.New("spec.replicas changed since it was read")

// sequencer drives the sets of one RollSets call.
type sequencer struct {
	target   Target
	opts     Options
	progress []SetProgress
}

func (r *sequencer) report(i int) {
	if r.opts.Progress != nil {
		r.opts.Progress(r.progress[i])
	}
}

// setPhase updates set i's progress line and reports it.
func (r *sequencer) setPhase(i int, state, phase string, replaced, total int) {
	p := &r.progress[i]
	if p.Phase != phase {
		p.Since = r.opts.Now()
	}
	p.State, p.Phase, p.Replaced, p.Total = state, phase, replaced, total
	r.report(i)
}

// rollSet drives one set to the end: observe, decide, act, until done or failed.
func (r *sequencer) rollSet(ctx context.Context, i int) error {
	name := r.progress[i].Name
	api := r.target.API()
	lastPhase, lastChange := "", r.opts.Now()
	refused := 0 // scales refused in a row because the set changed under us
	marks := 0   // marks in a row whose victims did not show marked at the next look
	hiccups := 0 // reads failed in a row for a reason that usually passes
	resume := r.opts.Resume && r.opts.Canary != nil
	for {
		v, err := r.target.Observe(ctx, name)
		if err != nil {
			if transient(err) && hiccups < 5 && ctx.Err() == nil {
				hiccups++
				r.setPhase(i, Running, fmt.Sprintf("reading the cluster failed (%v), trying again", err), r.progress[i].Replaced, r.progress[i].Total)
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(r.opts.PollInterval):
				}
				continue
			}
			r.setPhase(i, Failed, err.Error(), r.progress[i].Replaced, r.progress[i].Total)
			return err
		}
		hiccups = 0
		if resume {
			// --resume: the user fixed what a canary failed on; check that Machine again.
			resume = false
			again, err := r.clearFailedCanaries(ctx, v)
			if err != nil {
				r.setPhase(i, Failed, err.Error(), r.progress[i].Replaced, r.progress[i].Total)
				return err
			}
			if again {
				continue // read the set again, without the marks
			}
		}
		now := r.opts.Now()
		st := decide(v, r.opts.MaxSurge, r.opts.MaxUnavailable, r.opts.Timeout, now, r.opts.Canary != nil)
		total := int(v.Original)

		// A phase that does not change for Timeout means something we do not see is stuck
		// (e.g. no MachineSet controller runs): stop rather than wait forever.
		if st.Phase != lastPhase {
			lastPhase, lastChange = st.Phase, now
		} else if st.Kind == stepWait && now.Sub(lastChange) > r.opts.Timeout {
			st.Kind, st.Err = stepFail, fmt.Sprintf("no progress for %s while %s", r.opts.Timeout, st.Phase)
			st.Machine = st.Waiting
		}

		switch st.Kind {
		case stepDone:
			if err := r.target.Finish(ctx, v); err != nil {
				r.setPhase(i, Failed, err.Error(), st.Replaced, total)
				return err
			}
			state := Done
			if !v.HasOriginal {
				state = UpToDate
			}
			r.setPhase(i, state, st.Phase, st.Replaced, total)
			return nil
		case stepCanary:
			r.setPhase(i, Running, st.Phase, st.Replaced, total)
			verdict, err := r.check(ctx, v, st.Machine)
			if err != nil {
				err = fmt.Errorf("rollout of %s %s/%s: checking new Machine %s: %w", api.SetKind, api.Namespace, name, st.Machine, err)
				r.setPhase(i, Failed, err.Error(), st.Replaced, total)
				return err
			}
			if len(verdict.Problems) > 0 {
				reason := fmt.Sprintf("new Machine %s, the first of the set, failed its check: %s", st.Machine, strings.Join(verdict.Problems, "; "))
				r.setPhase(i, Failed, reason, st.Replaced, total)
				return &Error{MachineSet: name, Machine: st.Machine, Canary: true, Reason: reason, Replaced: st.Replaced, Total: total, API: api}
			}
			r.setPhase(i, Running, fmt.Sprintf("new Machine %s passed its check (%s)", st.Machine, strings.Join(verdict.Checked, "; ")), st.Replaced, total)
		case stepFail:
			err := &Error{MachineSet: name, Machine: st.Machine, Canary: st.Canary, Reason: st.Err, Replaced: st.Replaced, Total: total, API: api}
			r.setPhase(i, Failed, st.Err, st.Replaced, total)
			return err
		case stepScale:
			r.setPhase(i, Running, st.Phase, st.Replaced, total)
			if unmarked := unmarkedVictims(v, st.Victims); len(unmarked) > 0 {
				if marks >= maxMarks {
					// The mark does not hold (something takes it off, or the reads never
					// show it): scaling down now could take any Machine, so stop.
					reason := fmt.Sprintf("marked Machine %s for deletion %d times and it still shows no mark: something removes the delete-machine annotation (another controller or an admission webhook; `oc get %s -n %s %s -o yaml` shows its managedFields)",
						strings.Join(unmarked, ", "), marks, api.MachineResource, api.Namespace, unmarked[0])
					r.setPhase(i, Failed, reason, st.Replaced, total)
					return &Error{MachineSet: name, Reason: reason, Replaced: st.Replaced, Total: total, API: api}
				}
				marks++
				// Marked first, scaled down a moment later, never both at once: the set's
				// controller reads the Machines from its own cache, and a scale-down that
				// reaches it before the mark lets it delete any Machine of the set, a new
				// one with pods on it included. The next look finds the victims marked
				// (decide picks marked Machines first) and scales.
				if err := r.target.Mark(ctx, unmarked); err != nil {
					err = fmt.Errorf("rollout of %s %s/%s: %s: %w", api.SetKind, api.Namespace, name, st.Phase, err)
					r.setPhase(i, Failed, err.Error(), st.Replaced, total)
					return err
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(max(MarkSettle, r.opts.PollInterval)):
				}
				continue
			}
			if err := r.target.Scale(ctx, v, st.Replicas); err != nil {
				if (errors.Is(err, ErrReplicasChanged) || apierrors.IsConflict(err)) && refused < 5 {
					refused++
					continue // the set changed under us: look again
				}
				err = fmt.Errorf("rollout of %s %s/%s: %s: %w", api.SetKind, api.Namespace, name, st.Phase, err)
				r.setPhase(i, Failed, err.Error(), st.Replaced, total)
				return err
			}
			refused, marks = 0, 0
		case stepWait:
			refused, marks = 0, 0
			r.setPhase(i, Running, st.Phase, st.Replaced, total)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.opts.PollInterval):
			}
		}
	}
}

// MarkSettle is how long a rollout waits between marking a Machine for deletion and scaling its
// set down: longer than the set controller's cache takes to see the mark on a loaded cluster.
const MarkSettle = 2 * time.Second

// maxMarks is how many times in a row a rollout marks the same victims before it gives up on a
// mark that never shows.
const maxMarks = 5

// unmarkedVictims are the victims that v does not show marked yet.
func unmarkedVictims(v SetView, victims []string) []string {
	marked := map[string]bool{}
	for _, m := range v.Machines {
		marked[m.Name] = m.Marked
	}
	var out []string
	for _, name := range victims {
		if !marked[name] {
			out = append(out, name)
		}
	}
	return out
}

// check runs the canary check of a Machine of the set v and records its verdict on the Machine,
// so that a rollout run again neither checks it twice nor goes past a failure.
func (r *sequencer) check(ctx context.Context, v SetView, machine string) (Verdict, error) {
	facts, err := r.target.Facts(ctx, v, machine)
	if err != nil {
		return Verdict{}, err
	}
	verdict, err := r.opts.Canary.Check(ctx, facts)
	if err != nil {
		return Verdict{}, err
	}
	mark := CanaryPassed
	if len(verdict.Problems) > 0 {
		mark = failedCanary(verdict.Problems)
	}
	if err := r.target.MarkCanary(ctx, machine, mark); err != nil {
		return Verdict{}, fmt.Errorf("recording the check on Machine %s: %w", machine, err)
	}
	return verdict, nil
}

// clearFailedCanaries removes the failed canary mark of the set's live Machines, so that they
// are checked again; it reports whether it removed one.
func (r *sequencer) clearFailedCanaries(ctx context.Context, v SetView) (bool, error) {
	cleared := false
	for _, m := range v.Machines {
		if m.Deleting || !strings.HasPrefix(m.Canary, CanaryFailedPrefix) {
			continue
		}
		if err := r.target.MarkCanary(ctx, m.Name, ""); err != nil {
			return cleared, fmt.Errorf("--resume: clearing the check of Machine %s: %w", m.Name, err)
		}
		cleared = true
	}
	return cleared, nil
}

// transient reports whether a failed read is worth trying again: the apiserver was busy,
// restarting or slow, not refusing.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	// No answer at all: the connection failed (refused, reset, timed out).
	var urlErr *url.Error
	return errors.As(err, &urlErr)
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// escapePointer escapes a key for use in a JSON pointer (RFC 6901).
func escapePointer(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}
