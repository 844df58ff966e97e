package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// rulesSource answers SharesWithRulesNotActive only, and counts the questions.
type rulesSource struct {
	ManilaSource
	states map[string]string
	err    error
	asked  *int
}

func (s rulesSource) SharesWithRulesNotActive(context.Context) (map[string]string, error) {
	if s.asked != nil {
		*s.asked++
	}
	return s.states, s.err
}

// While every share's rules are active, Manila is asked every accessRulesEvery resyncs only;
// while one is not, at every resync.
func TestAccessRuleCheckCadence(t *testing.T) {
	asked := 0
	a := &accessRuleCheck{recorder: &eventLog{}, every: time.Hour,
		volumes: func(context.Context) (map[string]string, error) { return map[string]string{"share-a": "pvc-a"}, nil }}
	for range 3 {
		a.check(context.Background(), rulesSource{states: map[string]string{}, asked: &asked})
	}
	if asked != 1 {
		t.Fatalf("all active: asked %d times in three resyncs, want 1", asked)
	}
	a.checkedAt = a.checkedAt.Add(-time.Hour)
	for range 3 {
		a.check(context.Background(), rulesSource{states: map[string]string{"share-a": "syncing"}, asked: &asked})
	}
	if asked != 4 {
		t.Fatalf("one syncing: asked %d times, want 4 (once when due, then at every resync)", asked)
	}
	// A share of another cluster, not one of the driver's volumes, does not hurry the checks.
	a.checkedAt, a.someNotActive = a.checkedAt.Add(-time.Hour), false
	for range 3 {
		a.check(context.Background(), rulesSource{states: map[string]string{"share-other": "error"}, asked: &asked})
	}
	if asked != 5 {
		t.Fatalf("another cluster's share in error: asked %d times, want 5 (once more, when due)", asked)
	}
}

func TestAccessRuleCheck(t *testing.T) {
	listed := 0
	vols := map[string]string{"share-a": "pvc-a", "share-b": "pvc-b", "share-c": "pvc-c"}
	events := &eventLog{}
	a := &accessRuleCheck{recorder: events, volumes: func(context.Context) (map[string]string, error) {
		listed++
		return vols, nil
	}}
	count := func(state string) float64 {
		var m dto.Metric
		if err := VolumesAccessRulesNotActive.WithLabelValues(state).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetGauge().GetValue()
	}

	// Every share active: no PersistentVolume list, both counts 0.
	a.check(context.Background(), rulesSource{states: map[string]string{}})
	if listed != 0 || count("error") != 0 || count("syncing") != 0 || len(events.events) != 0 {
		t.Fatalf("all active: listed %d, error %v, syncing %v, events %v", listed, count("error"), count("syncing"), events.events)
	}

	// A share of another cluster (not one of the driver's volumes) is not counted.
	states := map[string]string{"share-a": "error", "share-b": "syncing", "share-c": "error", "share-other": "error"}
	a.check(context.Background(), rulesSource{states: states})
	if listed != 1 || count("error") != 2 || count("syncing") != 1 {
		t.Fatalf("listed %d, error %v, syncing %v", listed, count("error"), count("syncing"))
	}
	if len(events.events) != 1 || !strings.Contains(events.events[0], "pvc-a (share share-a: error)") ||
		!strings.Contains(events.events[0], "openstack share access list") || strings.Contains(events.events[0], "share-other") {
		t.Fatalf("events %v", events.events)
	}

	// The same again: no second event. Manila failing: the counts stay.
	a.check(context.Background(), rulesSource{states: states})
	a.check(context.Background(), rulesSource{err: errors.New("Manila did not answer")})
	if len(events.events) != 1 || count("error") != 2 {
		t.Fatalf("events %v, error %v", events.events, count("error"))
	}

	// Fixed.
	a.check(context.Background(), rulesSource{states: map[string]string{}})
	if count("error") != 0 || count("syncing") != 0 {
		t.Fatalf("fixed: error %v, syncing %v", count("error"), count("syncing"))
	}
}
