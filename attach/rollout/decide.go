package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// MachineView is what the rollout needs to know about one Machine of a set.
type MachineView struct {
	Name     string
	Created  time.Time
	Updated  bool // made as the set's current template says (Machine API: its providerSpec has every network and security group of the template)
	Ready    bool // its Node is Ready (Cluster API: phase Running with a nodeRef)
	Failed   bool // phase Failed (Cluster API: or a failureReason/failureMessage)
	Message  string
	Deleting bool // has a deletionTimestamp
	// DeletingSince is its deletionTimestamp: the machine controller drains its Node and
	// deletes its server before the Machine goes.
	DeletingSince time.Time
	Marked        bool // carries the API's delete-machine annotation
	Phase         string
	// Canary is its CanaryAnnotation: "" (not checked), CanaryPassed, or a failure.
	Canary string
	// Warning is the newest Warning event about a new Machine that is not Ready yet, as
	// "Reason: message" (a port Neutron refused, a server Nova could not make), and Warnings
	// how many Warning events of that reason there are: the Machine API keeps retrying a create
	// that failed, and leaves the Machine Provisioning, so these are how the cloud's refusal
	// reaches the user.
	Warning  string
	Warnings int
}

// RepeatedWarnings is how many Warning events of one reason about a new Machine that is not
// Ready stop the rollout: a create the cloud refused that many times the same way (each a retry
// of the machine controller, some 20 s apart) is not going to go through by itself.
const RepeatedWarnings = 3

// SetView is a MachineSet as the rollout sees it at one instant: what Target.Observe
// returns and decide works from.
type SetView struct {
	Name            string
	ResourceVersion string
	Replicas        int32
	// Original is the replica count to restore: the OriginalReplicasAnnotation when a rollout
	// is under way (HasOriginal), else Replicas.
	Original    int32
	HasOriginal bool
	Machines    []MachineView

	HasAnnotations bool // the set has metadata.annotations (a JSON patch adds to it, or adds it)
	// StorageNetworks are the storage networks recorded as attached to the set (for the canary).
	StorageNetworks []string
	// RemovedNetworks are the networks the set's old Machines have a port on and its template
	// no longer names (a removal being rolled): the canary checks a new Machine has none.
	RemovedNetworks []string
}

type stepKind int

const (
	stepWait   stepKind = iota // nothing to do until the cluster changes
	stepScale                  // set spec.replicas to Replicas, after marking Victims
	stepDone                   // the set is rolled; clean up the annotations
	stepFail                   // stop: Err says why
	stepCanary                 // check Machine, the set's first new one, before going on
)

// step is the one action the rollout takes next for a set.
type step struct {
	Kind     stepKind
	Replicas int32
	Victims  []string // Machines to mark with DeleteMachineAnnotation before scaling down
	Phase    string   // for the progress line
	Waiting  string   // when waiting on one Machine, its name (for the elapsed time)
	Err      string   // stepFail: what went wrong
	Machine  string   // stepFail: the Machine at fault, if one; stepCanary: the one to check
	Canary   bool     // stepFail: Machine failed its canary check
	Replaced int      // old Machines gone with a Ready new one in their place
}

// decide returns the next action for a set. It depends only on the cluster's state (and now),
// so a rollout that was killed resumes by calling it again: whatever it was doing, the state
// it left leads to the same decisions.
//
// The invariants: at most Original+surge Machines exist (the MachineSet controller's view),
// and an action never takes the Ready count below Original-unavailable. With canary, no old
// Machine is removed once a new one exists (or one old Machine is gone) until a new Machine has
// passed its check (MachineView.Canary): the first Ready one is checked, and one that failed
// stops the rollout.
func decide(v SetView, surge, unavailable int32, timeout time.Duration, now time.Time, canary bool) step {
	R := v.Original
	var live, old, fresh []MachineView
	ready := 0
	for _, m := range v.Machines {
		if m.Deleting {
			continue
		}
		live = append(live, m)
		if m.Ready {
			ready++
		}
		if m.Updated {
			fresh = append(fresh, m)
		} else {
			old = append(old, m)
		}
	}
	// A Machine counts as replaced once its old one is gone and a new one is Ready in its place.
	replaced := 0
	for _, m := range fresh {
		if m.Ready {
			replaced++
		}
	}
	replaced = ReplacedCount(replaced, len(old), int(R))
	st := step{Replaced: replaced}

	if !v.HasOriginal && len(old) == 0 {
		// Nothing to replace and no rollout under way: not our business whether all is Ready.
		st.Kind, st.Phase = stepDone, "up to date"
		return st
	}

	// A new Machine that fails stops everything: the cause (quota, a wrong network ID, an
	// image) will fail the next one too.
	for _, m := range fresh {
		switch {
		case m.Failed:
			st.Kind, st.Machine = stepFail, m.Name
			st.Err = fmt.Sprintf("new Machine %s failed: %s", m.Name, orDefault(m.Message, "phase Failed, no error message"))
			return st
		case !m.Ready && m.Warnings >= RepeatedWarnings:
			st.Kind, st.Machine = stepFail, m.Name
			st.Err = fmt.Sprintf("new Machine %s could not be made: the machine controller tried %d times and was refused each time (phase %s): %s", m.Name, m.Warnings, orDefault(m.Phase, "unset"), m.Warning)
			return st
		case !m.Ready && timeout > 0 && now.Sub(m.Created) > timeout:
			st.Kind, st.Machine = stepFail, m.Name
			st.Err = fmt.Sprintf("new Machine %s has no Ready Node %s after it was created (phase %s)", m.Name, timeout, orDefault(m.Phase, "unset"))
			if m.Warning != "" {
				st.Err += "; the last warning about it: " + m.Warning
			}
			return st
		}
	}

	// The canary gate holds every removal until a new Machine has passed; the one removal it
	// lets through is the first with --max-surge 0, when no new Machine can exist before it.
	gated := false
	if canary && !slices.ContainsFunc(fresh, func(m MachineView) bool { return m.Canary == CanaryPassed }) {
		for _, m := range fresh {
			if strings.HasPrefix(m.Canary, CanaryFailedPrefix) {
				st.Kind, st.Machine, st.Canary = stepFail, m.Name, true
				st.Err = fmt.Sprintf("new Machine %s, the first of the set, failed its check: %s", m.Name, strings.TrimPrefix(m.Canary, CanaryFailedPrefix))
				return st
			}
		}
		if m := firstReady(fresh); m != nil {
			st.Kind, st.Machine = stepCanary, m.Name
			st.Phase = fmt.Sprintf("checking new Machine %s before replacing the others", m.Name)
			return st
		}
		gated = len(fresh) > 0 || len(old) < int(R)
	}

	minReady := int(R - unavailable)
	if len(old) == 0 {
		switch {
		case v.Replicas > R && gated:
			return waitForNew(st, fresh, now, "waiting for a new Machine to check before scaling back")
		case v.Replicas > R:
			surplus := len(live) - int(R)
			victims := pickVictims(live, surplus, false)
			if ready-countReady(victims) < minReady {
				return waitForNew(st, fresh, now, "waiting for the new Machines to be Ready before scaling back")
			}
			st.Kind, st.Replicas, st.Victims = stepScale, R, names(victims)
			st.Phase = fmt.Sprintf("scaling back to %d replicas", R)
			return st
		case v.Replicas < R:
			st.Kind, st.Replicas = stepScale, R
			st.Phase = fmt.Sprintf("scaling back up to %d replicas", R)
			return st
		case len(live) != int(R) || ready < int(R):
			return waitForNew(st, fresh, now, fmt.Sprintf("waiting for %d Ready Machines (%d now)", R, ready))
		}
		// Done once the old Machines are gone too: until then their Nodes still run pods,
		// and the operator still counts them (they mount from the machine network).
		if m := oldestDeleting(v.Machines); m != nil {
			if timeout > 0 && now.Sub(m.DeletingSince) > timeout {
				st.Kind, st.Machine = stepFail, m.Name
				st.Err = fmt.Sprintf("old Machine %s is still being deleted %s after it was asked to go (its Node drained, its server deleted): a PodDisruptionBudget may hold its drain", m.Name, timeout)
				return st
			}
			st.Kind, st.Waiting = stepWait, m.Name
			st.Phase = fmt.Sprintf("all %d replaced; waiting for old Machine %s to be drained and deleted", R, m.Name)
			return st
		}
		st.Kind, st.Phase = stepDone, fmt.Sprintf("done: %d of %d replaced", replaced, R)
		return st
	}

	// Let the MachineSet controller catch up with the last scale-down first: surging while the
	// marked Machine still counts would make the controller keep it.
	if len(live) > int(v.Replicas) {
		st.Kind, st.Phase = stepWait, fmt.Sprintf("waiting for the MachineSet controller to delete %d Machine(s)", len(live)-int(v.Replicas))
		return st
	}
	if target := R + surge; v.Replicas < target {
		st.Kind, st.Replicas = stepScale, target
		st.Phase = fmt.Sprintf("surging to %d replicas", target)
		return st
	}
	if len(live) < int(v.Replicas) {
		return waitForNew(st, fresh, now, fmt.Sprintf("waiting for the MachineSet controller to create %d Machine(s)", int(v.Replicas)-len(live)))
	}
	if gated {
		return waitForNew(st, fresh, now, "waiting for a new Machine to check before removing an old one")
	}
	victim := pickVictims(old, 1, true)
	if ready-countReady(victim) >= minReady {
		st.Kind, st.Replicas, st.Victims = stepScale, v.Replicas-1, names(victim)
		st.Phase = "removing old Machine " + victim[0].Name
		return st
	}
	return waitForNew(st, fresh, now, "waiting for a new Machine to be Ready")
}

// waitForNew is a wait step that names the new Machine being waited for, if there is one.
func waitForNew(st step, fresh []MachineView, now time.Time, otherwise string) step {
	st.Kind, st.Phase = stepWait, otherwise
	var waiting *MachineView
	for i := range fresh {
		if !fresh[i].Ready && (waiting == nil || fresh[i].Created.Before(waiting.Created)) {
			waiting = &fresh[i]
		}
	}
	if waiting != nil {
		st.Waiting = waiting.Name
		st.Phase = fmt.Sprintf("waiting for new Machine %s to become a Ready Node (%s)", waiting.Name, orDefault(waiting.Phase, "no phase yet"))
		if waiting.Warning != "" {
			st.Phase = fmt.Sprintf("waiting for new Machine %s to become a Ready Node (%s; warned %d time(s): %s)", waiting.Name, orDefault(waiting.Phase, "no phase yet"), waiting.Warnings, waiting.Warning)
		}
	}
	return st
}

// oldestDeleting is the Machine deleted first of those still there, nil if none.
func oldestDeleting(machines []MachineView) *MachineView {
	var first *MachineView
	for i := range machines {
		if machines[i].Deleting && (first == nil || machines[i].DeletingSince.Before(first.DeletingSince)) {
			first = &machines[i]
		}
	}
	return first
}

// firstReady is the oldest Ready new Machine, nil if none.
func firstReady(fresh []MachineView) *MachineView {
	var first *MachineView
	for i := range fresh {
		if fresh[i].Ready && (first == nil || fresh[i].Created.Before(first.Created)) {
			first = &fresh[i]
		}
	}
	return first
}

// pickVictims chooses n Machines to delete: those already marked (a run that was killed
// between marking and scaling down), then failed ones, then those without a Ready Node, then
// the oldest (oldFirst) or the newest.
func pickVictims(ms []MachineView, n int, oldFirst bool) []MachineView {
	if n <= 0 {
		return nil
	}
	rank := func(m MachineView) int {
		switch {
		case m.Marked:
			return 0
		case m.Failed:
			return 1
		case !m.Ready:
			return 2
		}
		return 3
	}
	sorted := slices.Clone(ms)
	slices.SortStableFunc(sorted, func(a, b MachineView) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		c := a.Created.Compare(b.Created)
		if !oldFirst {
			c = -c
		}
		if c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return sorted[:min(n, len(sorted))]
}

func countReady(ms []MachineView) int {
	n := 0
	for _, m := range ms {
		if m.Ready {
			n++
		}
	}
	return n
}

func names(ms []MachineView) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ReplacedCount is the one count of replaced Machines, the rollout's and the lists': Machines on
// the template that run, at most one per old Machine gone, of wanted.
func ReplacedCount(freshRunning, old, wanted int) int {
	return max(0, min(freshRunning, wanted-old))
}
