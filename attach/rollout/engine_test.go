package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// setController is a MachineSet and the controller that keeps its replicas, in memory: a
// scale-up makes a new Machine (Ready at once), a scale-down deletes a marked Machine, as the
// real controllers' delete policies do, and records whether the mark had settled for as long
// as MarkSettle.
type setController struct {
	t        *testing.T
	mu       sync.Mutex
	replicas int32
	original int32
	rolling  bool
	machines []MachineView
	markedAt map[string]time.Time
	made     int
	calls    []string
}

func (s *setController) API() API {
	return API{Namespace: "ns", SetKind: "MachineSet", MachineResource: "machine"}
}

func (s *setController) Observe(context.Context, string) (SetView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := SetView{Name: "workers", Replicas: s.replicas, Original: s.replicas, HasOriginal: s.rolling}
	if s.rolling {
		v.Original = s.original
	}
	v.Machines = append(v.Machines, s.machines...)
	return v, nil
}

func (s *setController) Mark(_ context.Context, names []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		s.calls = append(s.calls, "mark "+name)
		s.markedAt[name] = time.Now()
		for i := range s.machines {
			if s.machines[i].Name == name {
				s.machines[i].Marked = true
			}
		}
	}
	return nil
}

func (s *setController) Scale(_ context.Context, v SetView, replicas int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, fmt.Sprintf("scale %d", replicas))
	if !s.rolling {
		s.rolling, s.original = true, v.Original
	}
	for ; s.replicas < replicas; s.replicas++ {
		s.made++
		s.machines = append(s.machines, MachineView{Name: fmt.Sprintf("new-%d", s.made), Created: time.Now(), Updated: true, Ready: true})
	}
	for ; s.replicas > replicas; s.replicas-- {
		victim := -1
		for i, m := range s.machines {
			if m.Marked {
				victim = i
				break
			}
		}
		if victim < 0 {
			return fmt.Errorf("scaled down to %d with no Machine marked: the controller would delete any one", replicas)
		}
		name := s.machines[victim].Name
		if settled := time.Since(s.markedAt[name]); settled < MarkSettle {
			s.t.Errorf("scaled down %s after its mark, less than MarkSettle (%s): the controller's cache may not show the mark yet", settled, MarkSettle)
		}
		s.machines = append(s.machines[:victim], s.machines[victim+1:]...)
	}
	return nil
}

func (s *setController) Finish(context.Context, SetView) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rolling = false
	return nil
}

func (s *setController) Facts(context.Context, SetView, string) (Facts, error) {
	return Facts{}, nil
}

func (s *setController) MarkCanary(context.Context, string, string) error { return nil }

// TestRollSetsMarksBeforeScalingDown: every scale-down comes a MarkSettle after its victim was
// marked, in a call of its own, and only old Machines go.
func TestRollSetsMarksBeforeScalingDown(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	s := &setController{t: t, replicas: 2, markedAt: map[string]time.Time{}, machines: []MachineView{
		{Name: "old-a", Created: old, Ready: true},
		{Name: "old-b", Created: old.Add(time.Minute), Ready: true},
	}}
	progress, err := RollSets(context.Background(), s, []SetProgress{{Name: "workers", State: Pending}},
		Options{MaxSurge: 1, PollInterval: time.Millisecond, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("RollSets: %v (calls %v)", err, s.calls)
	}
	if progress[0].State != Done {
		t.Errorf("state %q (%s), want %q", progress[0].State, progress[0].Phase, Done)
	}
	want := []string{"scale 3", "mark old-a", "scale 2", "scale 3", "mark old-b", "scale 2"}
	if fmt.Sprint(s.calls) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v", s.calls, want)
	}
	for _, m := range s.machines {
		if !m.Updated {
			t.Errorf("old Machine %s is left", m.Name)
		}
	}
}

// markless is a set controller whose Machines never show the delete mark (a webhook or another
// controller takes it off).
type markless struct{ *setController }

func (m markless) Mark(_ context.Context, names []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range names {
		m.calls = append(m.calls, "mark "+name)
	}
	return nil
}

// TestRollSetsStopsWhenTheMarkNeverShows: the rollout neither scales down with nothing marked
// nor marks for ever; it stops, naming the Machine, with the new one left running.
func TestRollSetsStopsWhenTheMarkNeverShows(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	s := &setController{t: t, replicas: 1, markedAt: map[string]time.Time{}, machines: []MachineView{
		{Name: "old-a", Created: old, Ready: true},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	progress, err := RollSets(ctx, markless{s}, []SetProgress{{Name: "workers", State: Pending}},
		Options{MaxSurge: 1, PollInterval: time.Millisecond, Timeout: time.Hour})
	var rerr *Error
	if !errors.As(err, &rerr) {
		t.Fatalf("RollSets: %v, want a rollout *Error (calls %v)", err, s.calls)
	}
	if !strings.Contains(rerr.Reason, "old-a") || !strings.Contains(rerr.Reason, "no mark") {
		t.Errorf("reason %q does not name the Machine and the missing mark", rerr.Reason)
	}
	if progress[0].State != Failed {
		t.Errorf("state %q, want %q", progress[0].State, Failed)
	}
	want := []string{"scale 2"}
	for range maxMarks {
		want = append(want, "mark old-a")
	}
	if fmt.Sprint(s.calls) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v", s.calls, want)
	}
}
