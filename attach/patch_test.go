package attach

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// memTarget is an in-memory kind for the engine's own logic: objects are names with a version;
// a write conflicts while conflicts[name] > 0 and fails for the names in fail.
type memTarget struct {
	mu        sync.Mutex
	objects   []Selected[string]
	has       map[string]bool // already attached
	conflicts map[string]int
	fail      map[string]error
	written   []string
	plans     int
}

func (m *memTarget) Select(context.Context) ([]Selected[string], error) { return m.objects, nil }
func (m *memTarget) Ref(o string) Ref {
	return Ref{Kind: "Thing", Namespace: "ns", Name: o, Resource: "things.example.com"}
}
func (m *memTarget) Get(_ context.Context, o string) (string, error) { return o, nil }

func (m *memTarget) Plan(_ context.Context, o string, a Attachment, _ time.Time, _ string) (Plan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.plans++
	r := Result{Kind: "Thing", Namespace: "ns", Name: o, Action: ActionPatched, AddedNetworks: a.Networks}
	if m.has[o] {
		r.Action, r.AddedNetworks = ActionUnchanged, nil
	}
	return Plan{Result: r, Change: o, Diff: func() string { return "diff of " + o }}, nil
}

func (m *memTarget) Write(_ context.Context, o string, _ Plan) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conflicts[o] > 0 {
		m.conflicts[o]--
		return apierrors.NewConflict(schema.GroupResource{Group: "example.com", Resource: "things"}, o, errors.New("changed"))
	}
	if err := m.fail[o]; err != nil {
		return err
	}
	m.written = append(m.written, o)
	return nil
}

var net1 = Attachment{Networks: []string{"5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"}}

func TestPatchRetriesConflictsAndKeepsOrder(t *testing.T) {
	m := &memTarget{
		objects:   []Selected[string]{{Object: "a"}, {Object: "b", Skip: "not ours"}, {Object: "c"}, {Object: "d"}},
		has:       map[string]bool{"d": true},
		conflicts: map[string]int{"c": 2},
	}
	results, err := Patch(context.Background(), m, Options{Attachment: net1})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range results {
		got = append(got, r.Name+":"+r.Action)
	}
	if want := "a:patched b:skipped c:patched d:unchanged"; strings.Join(got, " ") != want {
		t.Errorf("results %q, want %q", strings.Join(got, " "), want)
	}
	if results[2].ConflictRetries != 2 || results[1].Reason != "not ours" {
		t.Errorf("c retried %d times (want 2), b's reason %q", results[2].ConflictRetries, results[1].Reason)
	}
	if len(m.written) != 2 {
		t.Errorf("written %v, want a and c", m.written)
	}
}

func TestPatchDryRunWritesNothing(t *testing.T) {
	m := &memTarget{objects: []Selected[string]{{Object: "a"}}}
	results, err := Patch(context.Background(), m, Options{Attachment: net1, DryRun: true})
	if err != nil || len(results) != 1 || results[0].Action != ActionWouldPatch || results[0].Diff != "diff of a" || len(m.written) != 0 {
		t.Errorf("dry run: %+v, %v, written %v", results, err, m.written)
	}
}

// TestPatchFailureSaysWhatWasDone: a refused write stops the run; the error names the object,
// the verb it needs, and what was patched before.
func TestPatchFailureSaysWhatWasDone(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "things"}, "b", errors.New("no"))
	m := &memTarget{objects: []Selected[string]{{Object: "a"}, {Object: "b"}}, fail: map[string]error{"b": forbidden}}
	_, err := Patch(context.Background(), m, Options{Attachment: net1, Concurrency: 1})
	if err == nil || !strings.Contains(err.Error(), "patching Thing ns/b was refused") || !strings.Contains(err.Error(), "patch verb on things.example.com in ns") ||
		!strings.Contains(err.Error(), "patched before that: Thing a") {
		t.Errorf("error: %v", err)
	}
}

// TestPatchChecksOnce: invalid IDs stop everything before a read; checked options are not
// validated again.
func TestPatchChecksOnce(t *testing.T) {
	m := &memTarget{objects: []Selected[string]{{Object: "a"}}}
	if _, err := Patch(context.Background(), m, Options{Attachment: Attachment{Networks: []string{"nope"}}}); err == nil || m.plans != 0 {
		t.Fatalf("invalid network: %v, %d plans", err, m.plans)
	}
	checked, err := Options{Attachment: net1, Checker: failingChecker{}}.Check(context.Background())
	if err == nil {
		t.Fatal("the checker was not asked")
	}
	checked, err = Options{Attachment: net1}.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	checked.Checker = failingChecker{} // not asked again
	if _, err := Patch(context.Background(), m, checked); err != nil {
		t.Errorf("checked options checked again: %v", err)
	}
}

type failingChecker struct{}

func (failingChecker) CheckNetworks(context.Context, []string) error {
	return &UnknownIDsError{What: "network", IDs: []string{"x"}}
}
func (failingChecker) CheckSecurityGroups(context.Context, []string) error { return nil }
