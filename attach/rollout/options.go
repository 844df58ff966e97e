// Package rollout replaces the Machines of a set that lack what its template now says, one set
// after the other, without dropping below capacity. The decisions (decide) and their sequencing
// (RollSets) are the same for every kind of set; a Target reads and writes one API (the Machine
// API's MachineSets, Cluster API's MachineSets), so every kind keeps the same capacity
// guarantees and resumes the same way.
package rollout

import (
	"errors"
	"fmt"
	"time"
)

// OriginalReplicasAnnotation on a set holds its replica count from before a rollout surged it.
// Its presence means a rollout is under way; it is removed when the rollout ends.
const OriginalReplicasAnnotation = "manila-setup.io/rollout-original-replicas"

// Defaults of Options.
const (
	DefaultMaxSurge     = 1
	DefaultTimeout      = 30 * time.Minute
	DefaultPollInterval = 2 * time.Second
)

// Options say how fast a rollout may go.
type Options struct {
	// MaxSurge is how many Machines a set may have above its replica count; MaxUnavailable how
	// many of its replicas may be missing (not Ready). Not both zero.
	MaxSurge, MaxUnavailable int32
	// Timeout is how long a new Machine may take to become a Ready Node, counted from its
	// creation (so it holds across a resumed rollout), and how long the rollout may wait on
	// anything else without progress. Zero: DefaultTimeout.
	Timeout time.Duration
	// PollInterval is how often the state is read. Zero: DefaultPollInterval.
	PollInterval time.Duration
	// Canary, when set, checks the first new Machine of each set before any old Machine of
	// that set is removed; nil skips the check.
	Canary Checker
	// Resume checks again a new Machine whose canary check failed (the user fixed the cause on
	// the running machine); without it such a Machine keeps the rollout stopped.
	Resume bool
	// Progress, when set, receives the state of a set whenever it changes, and every poll.
	Progress func(SetProgress)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// States of a set.
const (
	Pending  = "pending"
	Running  = "rolling"
	Done     = "done"
	UpToDate = "up-to-date"
	Skipped  = "skipped"
	Failed   = "failed"
)

// SetProgress is the state of one set's rollout: one progress line.
type SetProgress struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Replaced int    `json:"replaced"`
	Total    int    `json:"total"`
	Phase    string `json:"phase"`
	// ClusterAPI says the set was skipped because Cluster API is authoritative for it: its
	// machines follow the Cluster API MachineSet of the same name, which is rolled instead.
	ClusterAPI bool `json:"clusterAPI,omitempty"`
	// Since is when Phase began, for the elapsed time on a terminal.
	Since time.Time `json:"-"`
}

// Error says why a rollout stopped at a set, and what was left as it was.
type Error struct {
	MachineSet string
	Machine    string // the Machine at fault, if one
	Reason     string
	// Canary says that Machine is the set's first new Machine and failed its canary check.
	Canary   bool
	Replaced int
	Total    int
	// API names where the set is and how to continue.
	API API
}

func (e *Error) Error() string {
	api := e.API
	msg := fmt.Sprintf("rollout of %s %s/%s stopped: %s. %d of %d Machines were replaced; the old Machines left were not touched, and no other MachineSet was changed.",
		api.SetKind, api.Namespace, e.MachineSet, e.Reason, e.Replaced, e.Total)
	switch {
	case e.Canary:
		msg += canaryGuidance(api, e.Machine)
	case e.Machine != "":
		msg += fmt.Sprintf(" Find the cause with `oc describe %s -n %s %s`, fix it, delete that Machine (`oc delete %s -n %s %s`) and run `%s` again: it continues where it stopped.",
			api.MachineResource, api.Namespace, e.Machine, api.MachineResource, api.Namespace, e.Machine, api.Command)
	default:
		msg += fmt.Sprintf(" Run `%s` again to continue where it stopped.", api.Command)
	}
	return msg
}

// Complete checks the options and fills in the defaults.
func (opts *Options) Complete() error {
	if opts.MaxSurge < 0 || opts.MaxUnavailable < 0 {
		return fmt.Errorf("--max-surge and --max-unavailable cannot be negative (got %d and %d)", opts.MaxSurge, opts.MaxUnavailable)
	}
	if opts.MaxSurge == 0 && opts.MaxUnavailable == 0 {
		return errors.New("--max-surge and --max-unavailable cannot both be 0: no Machine could ever be replaced")
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return nil
}
