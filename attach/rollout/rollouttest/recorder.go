// Package rollouttest holds what the rollout tests of every kind of machine share.
package rollouttest

import (
	"context"
	"slices"
	"sync"

	"github.com/manila-setup/manila-setup/attach/rollout"
)

// Recorder is a rollout.Checker that passes every Machine and records the facts it was given.
type Recorder struct {
	mu    sync.Mutex
	facts []rollout.Facts
}

// Check records f and passes.
func (r *Recorder) Check(_ context.Context, f rollout.Facts) (rollout.Verdict, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.facts = append(r.facts, f)
	return rollout.Verdict{Checked: []string{"recorded"}}, nil
}

// Facts are the facts of every check so far, in order.
func (r *Recorder) Facts() []rollout.Facts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.facts)
}
