package attach

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	recNet   = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"
	recNet2  = "c1d2e3f4-a5b6-4c7d-8e9f-a0b1c2d3e4f5"
	handNet  = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	recGroup = "8d2c4b1a-7e6f-4a3b-9c0d-1e2f3a4b5c6d"
)

func TestRemovalDecide(t *testing.T) {
	ref := Ref{Kind: "Thing", Namespace: "ns", Name: "a"}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := &Record{Attachment: Attachment{Networks: []string{recNet, recNet2}, SecurityGroups: []string{recGroup}, PortSecurityDisabled: []string{recNet2}}}
	spec := map[string]bool{recNet: true, recNet2: true, handNet: true, recGroup: true}
	has := func(id string) bool { return spec[id] }

	// Everything recorded goes, the hand-added network stays, the record goes.
	d, err := Removal{}.Decide(ref, rec, has, has, now, "me")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(d.Networks, ",") != recNet+","+recNet2 || strings.Join(d.SecurityGroups, ",") != recGroup || d.Record != nil || !d.Changed() {
		t.Errorf("remove all: %+v", d)
	}

	// --network: only it; the record keeps the rest, without its port-security mark.
	d, err = Removal{Networks: []string{strings.ToUpper(recNet2)}}.Decide(ref, rec, has, has, now, "me")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(d.Networks, ",") != recNet2 || len(d.SecurityGroups) != 0 || d.Record == nil ||
		strings.Join(d.Record.Networks, ",") != recNet || len(d.Record.PortSecurityDisabled) != 0 || d.Record.SecurityGroups[0] != recGroup || d.Record.By != "me" {
		t.Errorf("remove one: %+v %+v", d, d.Record)
	}

	// --network the user added: an error naming the flag and the value.
	_, err = Removal{Networks: []string{recNet, handNet}}.Decide(ref, rec, has, has, now, "me")
	var notRecorded *NotRecordedError
	if !errors.As(err, &notRecorded) || !strings.Contains(err.Error(), `--network[1]: Invalid value: "`+handNet+`"`) || !strings.Contains(err.Error(), "Thing ns/a") {
		t.Errorf("hand-added network named: %v", err)
	}

	// No record: nothing is removed, not even a storage-like network, and nothing guessed.
	d, err = Removal{}.Decide(ref, nil, has, has, now, "me")
	if err != nil || d.Changed() || !d.NoRecord || !strings.Contains(d.Reason(), "no attachment record") {
		t.Errorf("no record: %+v %v", d, err)
	}

	// Removed already (recorded no more, gone from the spec): nothing to do, no error.
	left := &Record{Attachment: Attachment{Networks: []string{recNet}}}
	gone := func(id string) bool { return id == recNet }
	d, err = Removal{Networks: []string{recNet2}}.Decide(ref, left, gone, gone, now, "me")
	if err != nil || d.Changed() {
		t.Errorf("removed twice: %+v %v", d, err)
	}

	// Recorded but removed from the spec by hand: only the record changes.
	d, err = Removal{}.Decide(ref, rec, gone, gone, now, "me")
	if err != nil || strings.Join(d.Networks, ",") != recNet || len(d.SecurityGroups) != 0 || d.Record != nil || !d.RecordChanged {
		t.Errorf("recorded, partly gone: %+v %v", d, err)
	}
}

func TestRemovalValidate(t *testing.T) {
	errs := Removal{Networks: []string{"nope", recNet, strings.ToUpper(recNet)}}.Validate()
	if len(errs) != 2 || !strings.Contains(errs.ToAggregate().Error(), "network[0]") || !strings.Contains(errs.ToAggregate().Error(), "network[2]") {
		t.Errorf("got %v", errs)
	}
}

// A kind that cannot remove says so rather than attaching.
func TestPatchRemoveNeedsARemover(t *testing.T) {
	m := &memTarget{objects: []Selected[string]{{Object: "a"}}}
	_, err := Patch(context.Background(), m, Options{Remove: &Removal{}})
	if err == nil || !strings.Contains(err.Error(), "removing is not supported") || len(m.written) != 0 {
		t.Errorf("got %v, written %v", err, m.written)
	}
}
