package rollout

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// world is a model of a MachineSet, its Machines and a MachineSet controller that reacts late
// and in any order, to check decide against every interleaving a seed produces.
type world struct {
	rng         *rand.Rand
	now         time.Time
	replicas    int32
	original    int32
	hasOriginal bool
	machines    []*MachineView
	next        int
	log         []string
	// canary: decide checks the first new Machine; badCanary: that check fails.
	canary, badCanary bool
}

func newWorld(seed uint64, replicas int) *world {
	w := &world{rng: rand.New(rand.NewPCG(seed, 7)), now: time.Unix(1_700_000_000, 0), replicas: int32(replicas)}
	for i := 0; i < replicas; i++ {
		w.add(false, true)
	}
	return w
}

func (w *world) add(updated, ready bool) {
	w.next++
	w.now = w.now.Add(time.Second)
	w.machines = append(w.machines, &MachineView{Name: fmt.Sprintf("m%02d", w.next), Created: w.now, Updated: updated, Ready: ready})
}

func (w *world) view() SetView {
	v := SetView{Name: "set", ResourceVersion: "1", Replicas: w.replicas, Original: w.replicas, HasOriginal: w.hasOriginal}
	if w.hasOriginal {
		v.Original = w.original
	}
	for _, m := range w.machines {
		v.Machines = append(v.Machines, *m)
	}
	return v
}

func (w *world) live() (live, ready int) {
	for _, m := range w.machines {
		if !m.Deleting {
			live++
			if m.Ready {
				ready++
			}
		}
	}
	return
}

// controllerEvent does one thing the MachineSet controller or a machine could do; false if
// nothing can happen.
func (w *world) controllerEvent() bool {
	live, _ := w.live()
	var events []func()
	if live < int(w.replicas) {
		events = append(events, func() { w.add(true, false); w.log = append(w.log, "create") })
	}
	if live > int(w.replicas) {
		events = append(events, func() {
			var cands []MachineView
			for _, m := range w.machines {
				if !m.Deleting {
					cands = append(cands, *m)
				}
			}
			victim := pickVictims(cands, 1, false)[0] // marked first, like the real controller
			for _, m := range w.machines {
				if m.Name == victim.Name {
					m.Deleting, m.DeletingSince, m.Ready = true, w.now, false
				}
			}
			w.log = append(w.log, "delete "+victim.Name)
		})
	}
	for _, m := range w.machines {
		switch {
		case m.Deleting:
			events = append(events, func() {
				w.machines = slices.DeleteFunc(w.machines, func(x *MachineView) bool { return x == m })
				w.log = append(w.log, "gone "+m.Name)
			})
		case !m.Ready && !m.Failed:
			events = append(events, func() { m.Ready = true; w.log = append(w.log, "ready "+m.Name) })
		}
	}
	if len(events) == 0 {
		return false
	}
	events[w.rng.IntN(len(events))]()
	return true
}

// rollerEvent runs one decide-and-act round; killMidway drops the scale after the marks, as
// a kill -9 between the two requests would. It returns the step taken.
func (w *world) rollerEvent(surge, unavailable int32, killMidway bool) step {
	st := decide(w.view(), surge, unavailable, time.Hour, w.now, w.canary)
	switch st.Kind {
	case stepCanary:
		for _, m := range w.machines {
			if m.Name == st.Machine {
				m.Canary = CanaryPassed
				if w.badCanary {
					m.Canary = failedCanary([]string{"node IP on the storage network"})
				}
			}
		}
		w.log = append(w.log, "canary "+st.Machine+": "+w.machines[slices.IndexFunc(w.machines, func(m *MachineView) bool { return m.Name == st.Machine })].Canary)
	case stepScale:
		for _, name := range st.Victims {
			for _, m := range w.machines {
				if m.Name == name {
					m.Marked = true
				}
			}
		}
		if killMidway && len(st.Victims) > 0 {
			w.log = append(w.log, "killed after marking "+strings.Join(st.Victims, ","))
			return st
		}
		if !w.hasOriginal {
			w.original, w.hasOriginal = w.replicas, true
		}
		w.replicas = st.Replicas
		w.log = append(w.log, fmt.Sprintf("scale %d (%s)", st.Replicas, st.Phase))
	case stepDone:
		w.hasOriginal = false
		w.log = append(w.log, "done")
	}
	return st
}

// TestDecideKeepsItsBoundsInEveryInterleaving drives decide against the model with random
// controller timing, random kills between marking and scaling, and checks after every event
// that the Ready count never drops below replicas-maxUnavailable, that there are never more
// than replicas+maxSurge Machines, and that every run ends with every Machine replaced and the
// original replica count back.
func TestDecideKeepsItsBoundsInEveryInterleaving(t *testing.T) {
	for _, c := range []struct{ replicas, surge, unavailable int }{
		{3, 1, 0}, {3, 2, 0}, {3, 0, 1}, {3, 1, 1}, {1, 1, 0}, {5, 3, 2}, {2, 0, 2}, {4, 1, 0},
	} {
		for seed := uint64(0); seed < 300; seed++ {
			name := fmt.Sprintf("replicas%d-surge%d-unavailable%d-seed%d", c.replicas, c.surge, c.unavailable, seed)
			w := newWorld(seed, c.replicas)
			R := c.replicas
			done := false
			minReady, maxLive := R, R
			for i := 0; i < 2000 && !done; i++ {
				if w.rng.IntN(3) == 0 {
					w.controllerEvent()
				} else {
					st := w.rollerEvent(int32(c.surge), int32(c.unavailable), w.rng.IntN(8) == 0)
					if st.Kind == stepFail {
						t.Fatalf("%s: failed: %s\n%s", name, st.Err, strings.Join(w.log, "\n"))
					}
					done = st.Kind == stepDone
				}
				live, ready := w.live()
				minReady, maxLive = min(minReady, ready), max(maxLive, live)
				if ready < R-c.unavailable || live > R+c.surge {
					t.Fatalf("%s: %d Ready (min %d), %d live (max %d)\n%s", name, ready, R-c.unavailable, live, R+c.surge, strings.Join(w.log, "\n"))
				}
			}
			if !done {
				t.Fatalf("%s: not done after 2000 events\n%s", name, strings.Join(w.log, "\n"))
			}
			live, ready := w.live()
			for _, m := range w.machines {
				if !m.Updated && !m.Deleting {
					t.Fatalf("%s: done with old Machine %s left\n%s", name, m.Name, strings.Join(w.log, "\n"))
				}
			}
			if w.replicas != int32(R) || live != R || ready != R || w.hasOriginal {
				t.Fatalf("%s: ended with replicas %d, %d live, %d ready, annotation %v\n%s", name, w.replicas, live, ready, w.hasOriginal, strings.Join(w.log, "\n"))
			}
		}
	}
}

// TestDecideChecksTheFirstNewMachine drives decide with the canary against the same model: no
// old Machine is removed before a new one passed its check (one, with --max-surge 0, where no
// new Machine can exist before a removal), a passing check lets the rollout finish, and a
// failing one stops it with the old Machines still there.
func TestDecideChecksTheFirstNewMachine(t *testing.T) {
	for _, c := range []struct{ replicas, surge, unavailable int }{
		{3, 1, 0}, {3, 2, 0}, {3, 0, 1}, {3, 1, 1}, {1, 1, 0}, {5, 3, 2}, {2, 0, 2}, {1, 0, 1},
	} {
		for _, bad := range []bool{false, true} {
			for seed := uint64(0); seed < 150; seed++ {
				name := fmt.Sprintf("replicas%d-surge%d-unavailable%d-bad%v-seed%d", c.replicas, c.surge, c.unavailable, bad, seed)
				w := newWorld(seed, c.replicas)
				w.canary, w.badCanary = true, bad
				R := c.replicas
				allowance := 0 // old Machines that may go before a check passed
				if c.surge == 0 {
					allowance = 1
				}
				var last step
				checks := 0
				for i := 0; i < 2000 && last.Kind != stepDone && last.Kind != stepFail; i++ {
					if w.rng.IntN(3) == 0 {
						w.controllerEvent()
					} else {
						last = w.rollerEvent(int32(c.surge), int32(c.unavailable), w.rng.IntN(8) == 0)
						if last.Kind == stepCanary {
							checks++
						}
					}
					passed, oldLive := false, 0
					for _, m := range w.machines {
						passed = passed || m.Canary == CanaryPassed
						if !m.Updated && !m.Deleting {
							oldLive++
						}
					}
					if !passed && oldLive < R-allowance {
						t.Fatalf("%s: %d old Machines left before a check passed (want at least %d)\n%s", name, oldLive, R-allowance, strings.Join(w.log, "\n"))
					}
				}
				switch {
				case checks == 0:
					t.Fatalf("%s: no Machine was checked\n%s", name, strings.Join(w.log, "\n"))
				case bad && (last.Kind != stepFail || !last.Canary || !strings.Contains(last.Err, "node IP on the storage network")):
					t.Fatalf("%s: a failed check did not stop the rollout: %+v\n%s", name, last, strings.Join(w.log, "\n"))
				case !bad && last.Kind != stepDone:
					t.Fatalf("%s: not done: %+v\n%s", name, last, strings.Join(w.log, "\n"))
				}
			}
		}
	}
}

func TestDecideStopsOnAFailedOrSlowMachine(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	base := SetView{Name: "set", Replicas: 4, Original: 3, HasOriginal: true, Machines: []MachineView{
		{Name: "old-a", Ready: true, Created: now.Add(-time.Hour)},
		{Name: "old-b", Ready: true, Created: now.Add(-time.Hour)},
		{Name: "old-c", Ready: true, Created: now.Add(-time.Hour)},
	}}

	failed := base
	failed.Machines = append(slices.Clone(base.Machines), MachineView{Name: "new-x", Updated: true, Failed: true, Phase: "Failed",
		Message: "Quota exceeded for ports", Created: now.Add(-time.Minute)})
	st := decide(failed, 1, 0, 10*time.Minute, now, false)
	if st.Kind != stepFail || st.Machine != "new-x" || !strings.Contains(st.Err, "Quota exceeded for ports") {
		t.Errorf("failed machine: %+v", st)
	}

	slow := base
	slow.Machines = append(slices.Clone(base.Machines), MachineView{Name: "new-y", Updated: true, Phase: "Provisioned", Created: now.Add(-11 * time.Minute)})
	st = decide(slow, 1, 0, 10*time.Minute, now, false)
	if st.Kind != stepFail || st.Machine != "new-y" || !strings.Contains(st.Err, "no Ready Node 10m0s after it was created") {
		t.Errorf("slow machine: %+v", st)
	}
	// The same machine within its time: wait, and say for what.
	st = decide(slow, 1, 0, 20*time.Minute, now, false)
	if st.Kind != stepWait || !strings.Contains(st.Phase, "new-y") {
		t.Errorf("machine within its timeout: %+v", st)
	}

	// A new Machine the cloud refuses stays Provisioning while the machine controller retries:
	// its warning is shown while it is waited for, in the timeout's words, and a third refusal
	// of the same reason stops the rollout without waiting for the timeout.
	refused := base
	refusal := "FailedCreatePort: Port security must be enabled and port must have an IP address in order to use security groups."
	refused.Machines = append(slices.Clone(base.Machines), MachineView{Name: "new-z", Updated: true, Phase: "Provisioning", Created: now.Add(-time.Minute),
		Warning: refusal, Warnings: 2})
	st = decide(refused, 1, 0, 20*time.Minute, now, false)
	if st.Kind != stepWait || !strings.Contains(st.Phase, "new-z") || !strings.Contains(st.Phase, "warned 2 time(s): "+refusal) {
		t.Errorf("machine refused twice: %+v", st)
	}
	refused.Machines[len(refused.Machines)-1].Created = now.Add(-21 * time.Minute)
	st = decide(refused, 1, 0, 20*time.Minute, now, false)
	if st.Kind != stepFail || !strings.Contains(st.Err, "no Ready Node 20m0s after it was created (phase Provisioning); the last warning about it: "+refusal) {
		t.Errorf("machine refused twice, past its timeout: %+v", st)
	}
	refused.Machines[len(refused.Machines)-1].Created = now.Add(-time.Minute)
	refused.Machines[len(refused.Machines)-1].Warnings = RepeatedWarnings
	st = decide(refused, 1, 0, 20*time.Minute, now, false)
	if st.Kind != stepFail || st.Machine != "new-z" || !strings.Contains(st.Err, "tried 3 times and was refused each time (phase Provisioning): "+refusal) {
		t.Errorf("machine refused %d times: %+v", RepeatedWarnings, st)
	}

	// Every Machine replaced, the last old one still draining: the rollout waits for it (its
	// Node still runs pods), and stops if it is still there after the timeout.
	draining := SetView{Name: "s", Replicas: 3, Original: 3, HasOriginal: true, Machines: []MachineView{
		{Name: "new-a", Updated: true, Ready: true, Canary: CanaryPassed, Created: now.Add(-5 * time.Minute)},
		{Name: "new-b", Updated: true, Ready: true, Created: now.Add(-4 * time.Minute)},
		{Name: "new-c", Updated: true, Ready: true, Created: now.Add(-3 * time.Minute)},
		{Name: "old-c", Deleting: true, DeletingSince: now.Add(-time.Minute), Created: now.Add(-time.Hour)},
	}}
	st = decide(draining, 1, 0, 10*time.Minute, now, true)
	if st.Kind != stepWait || st.Waiting != "old-c" || !strings.Contains(st.Phase, "waiting for old Machine old-c to be drained and deleted") {
		t.Errorf("last old machine draining: %+v", st)
	}
	draining.Machines[3].DeletingSince = now.Add(-11 * time.Minute)
	st = decide(draining, 1, 0, 10*time.Minute, now, true)
	if st.Kind != stepFail || st.Machine != "old-c" || !strings.Contains(st.Err, "still being deleted 10m0s after") {
		t.Errorf("last old machine stuck draining: %+v", st)
	}
	draining.Machines = draining.Machines[:3]
	if st = decide(draining, 1, 0, 10*time.Minute, now, true); st.Kind != stepDone {
		t.Errorf("every old machine gone: %+v", st)
	}

	// Old machines failing are not our doing: they are replaced first.
	sick := base
	sick.Machines = slices.Clone(base.Machines)
	sick.Machines[1].Ready, sick.Machines[1].Failed = false, true
	sick.Machines = append(sick.Machines, MachineView{Name: "new-z", Updated: true, Ready: true, Created: now})
	st = decide(sick, 1, 0, time.Hour, now, false)
	if st.Kind != stepScale || !slices.Equal(st.Victims, []string{"old-b"}) || st.Replicas != 3 {
		t.Errorf("failed old machine is not the first victim: %+v", st)
	}
}

func TestDecideLeavesUpToDateSetsAlone(t *testing.T) {
	now := time.Now()
	v := SetView{Name: "set", Replicas: 2, Original: 2, Machines: []MachineView{
		{Name: "a", Updated: true, Ready: true, Created: now}, {Name: "b", Updated: true, Ready: false, Created: now},
	}}
	if st := decide(v, 1, 0, time.Hour, now, false); st.Kind != stepDone || st.Phase != "up to date" {
		t.Errorf("up-to-date set without a rollout under way: %+v", st)
	}
	// With a rollout under way it waits for the last Machine to be Ready.
	v.HasOriginal = true
	if st := decide(v, 1, 0, time.Hour, now, false); st.Kind != stepWait {
		t.Errorf("finishing rollout: %+v", st)
	}
}

func TestNewestWarningCountsItsReason(t *testing.T) {
	at := func(minute int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC)) }
	events := []corev1.Event{
		{Reason: "FailedCreatePort", Message: "try 1", Count: 1, LastTimestamp: at(1)},
		{Reason: "FailedCreate", Message: "quota", Count: 4, LastTimestamp: at(2)},
		{Reason: "FailedCreatePort", Message: "try 2 and 3", Count: 2, LastTimestamp: at(3)},
		{Reason: "FailedCreatePort", Message: "no count", EventTime: metav1.NewMicroTime(at(0).Time)},
	}
	if w, n := NewestWarning(events); w != "FailedCreatePort: try 2 and 3" || n != 4 {
		t.Errorf("NewestWarning = %q, %d; want the newest (try 2 and 3) and 4 of its reason", w, n)
	}
	if w, n := NewestWarning(nil); w != "" || n != 0 {
		t.Errorf("NewestWarning(nil) = %q, %d", w, n)
	}
}
