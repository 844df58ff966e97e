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
