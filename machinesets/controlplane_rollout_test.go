package machinesets

import (
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1"
)

func TestMasterIndex(t *testing.T) {
	for name, want := range map[string]int{"ostest-8x2kq-master-0": 0, "ostest-8x2kq-master-hw7cd-2": 2, "master": -1, "m-x": -1} {
		if got := masterIndex(name); got != want {
			t.Errorf("masterIndex(%q) = %d, want %d", name, got, want)
		}
	}
}

// A master goes only when every index has one ready master, none is deleting and the set
// counts every replica ready.
func TestMastersAtRest(t *testing.T) {
	cpms := func(ready int32) *machinev1.ControlPlaneMachineSet {
		return &machinev1.ControlPlaneMachineSet{Status: machinev1.ControlPlaneMachineSetStatus{ReadyReplicas: ready}}
	}
	three := []master{{name: "m-0", index: 0, ready: true}, {name: "m-1", index: 1, ready: true}, {name: "m-2", index: 2, ready: true}}
	tests := []struct {
		name    string
		set     *machinev1.ControlPlaneMachineSet
		masters []master
		why     string
	}{
		{"at rest", cpms(3), three, ""},
		{"a replacement under way", cpms(3), append(three[:3:3], master{name: "m-abcde-0", index: 0}),
			"4 masters, the set wants 3; index 0 has 2 masters (a replacement under way); master m-abcde-0 is not Running with a Ready Node yet"},
		{"one deleting", cpms(2), []master{{name: "m-0", index: 0, deleting: true, ready: true}, three[1], three[2], {name: "m-abcde-0", index: 0, ready: true}},
			"master m-0 is being deleted; the set counts 2 of 3 masters ready"},
		{"one not ready", cpms(2), []master{three[0], three[1], {name: "m-2", index: 2}}, "master m-2 is not Running with a Ready Node yet; the set counts 2 of 3 masters ready"},
		{"one missing", cpms(2), three[:2], "2 masters, the set wants 3; the set counts 2 of 3 masters ready"},
	}
	for _, tt := range tests {
		ok, why := mastersAtRest(tt.set, tt.masters, 3)
		if ok != (tt.why == "") || why != tt.why {
			t.Errorf("%s: %t %q, want %q", tt.name, ok, why, tt.why)
		}
	}
}

// The canary is the oldest ready master on the template that was not when the rollout began.
func TestFirstReplacement(t *testing.T) {
	now := time.Now()
	masters := []master{
		{name: "m-0", onTemplate: true, ready: true, created: now.Add(-time.Hour)},
		{name: "m-new-1", onTemplate: true, ready: true, created: now.Add(-time.Minute)},
		{name: "m-new-0", onTemplate: true, ready: true, created: now.Add(-2 * time.Minute)},
		{name: "m-new-2", onTemplate: true, created: now.Add(-3 * time.Minute)}, // not ready
	}
	got := firstReplacement(masters, map[string]bool{"m-0": true})
	if got == nil || got.name != "m-new-0" {
		t.Errorf("first replacement %+v, want m-new-0", got)
	}
	if got := firstReplacement(masters[:1], map[string]bool{"m-0": true}); got != nil {
		t.Errorf("no replacement yet, got %+v", got)
	}
	if s := orWaiting("", masters[:2]); !strings.Contains(s, "m-0, m-new-1") {
		t.Errorf("orWaiting: %q", s)
	}
}

// A new master the Machine API cannot make stops the rollout with the cause, once it failed or
// was refused rollout.RepeatedWarnings times; an outdated master, a ready one, or one refused
// fewer times does not.
func TestRefusedMaster(t *testing.T) {
	full := "FailedCreatePort: No more IP addresses available on network 3c2e."
	tests := []struct {
		name     string
		masters  []master
		strategy machinev1.ControlPlaneMachineSetStrategyType
		want     []string // in the reason, in order; none: not stopped
	}{
		{"refused three times, OnDelete", []master{{name: "m-0", ready: true}, {name: "m-x-0", onTemplate: true, phase: "Provisioning", warning: full, warnings: 3}}, machinev1.OnDelete,
			[]string{"new master m-x-0 could not be made: the machine controller tried 3 times and was refused each time (phase Provisioning): " + full, "stays until the new one is Ready", "controlplane rollout again", "controlplane patch --remove --force", "then delete Machine m-x-0"}},
		{"refused three times, RollingUpdate", []master{{name: "m-x-0", onTemplate: true, warning: full, warnings: 4}}, machinev1.RollingUpdate,
			[]string{"tried 4 times", "(phase unset)", "keeps trying meanwhile", "patch --remove --force", "deletes m-x-0 and keeps the old master"}},
		{"failed", []master{{name: "m-x-1", onTemplate: true, failed: true, phase: "Failed", message: "quota exceeded"}}, machinev1.OnDelete,
			[]string{"new master m-x-1 failed: quota exceeded."}},
		{"failed without a message", []master{{name: "m-x-1", onTemplate: true, failed: true}}, machinev1.OnDelete, []string{"phase Failed, no error message"}},
		{"refused twice: the controller may still get through", []master{{name: "m-x-0", onTemplate: true, warning: full, warnings: 2}}, machinev1.OnDelete, nil},
		{"an outdated master is not new", []master{{name: "m-0", failed: true, warnings: 5}}, machinev1.OnDelete, nil},
		{"a ready master was made", []master{{name: "m-x-0", onTemplate: true, ready: true, warnings: 5}}, machinev1.OnDelete, nil},
		{"a deleted one is gone", []master{{name: "m-x-0", onTemplate: true, deleting: true, failed: true}}, machinev1.OnDelete, nil},
	}
	for _, tt := range tests {
		got := refusedMaster(tt.masters, tt.strategy)
		if len(tt.want) == 0 {
			if got != "" {
				t.Errorf("%s: stopped: %q", tt.name, got)
			}
			continue
		}
		rest := got
		for _, w := range tt.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("%s: %q lacks %q (after what came before)", tt.name, got, w)
				break
			}
			rest = rest[i+len(w):]
		}
		if tt.strategy == machinev1.OnDelete && strings.Contains(got, "keeps trying") {
			t.Errorf("%s: OnDelete has no operator to keep trying: %q", tt.name, got)
		}
	}
}
