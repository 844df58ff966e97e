package machinery

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
)

func TestStatusHas(t *testing.T) {
	have := &operatorv1.OperatorStatus{
		ObservedGeneration: 3,
		Version:            "1.0",
		Conditions: []operatorv1.OperatorCondition{
			Condition("AAvailable", operatorv1.ConditionTrue, "AsExpected", "ok"),
			Condition("ADegraded", operatorv1.ConditionFalse, "AsExpected", ""),
		},
		Generations: []operatorv1.GenerationStatus{{Group: "apps", Resource: "deployments", Namespace: "ns", Name: "d", LastGeneration: 2}},
	}
	gen := func(g int64) operatorv1.GenerationStatus {
		return operatorv1.GenerationStatus{Group: "apps", Resource: "deployments", Namespace: "ns", Name: "d", LastGeneration: g}
	}
	for name, c := range map[string]struct {
		st   *Status
		want bool
	}{
		"same conditions":           {NewStatus().WithConditions(have.Conditions...), true},
		"a subset":                  {NewStatus().WithConditions(have.Conditions[1]), true},
		"other status":              {NewStatus().WithConditions(Condition("AAvailable", operatorv1.ConditionFalse, "AsExpected", "ok")), false},
		"other reason":              {NewStatus().WithConditions(Condition("AAvailable", operatorv1.ConditionTrue, "Deploying", "ok")), false},
		"other message":             {NewStatus().WithConditions(Condition("AAvailable", operatorv1.ConditionTrue, "AsExpected", "1 of 2")), false},
		"a condition not there":     {NewStatus().WithConditions(Condition("BAvailable", operatorv1.ConditionTrue, "AsExpected", "ok")), false},
		"same generation":           {NewStatus().WithObservedGeneration(3).WithVersion("1.0"), true},
		"newer observed generation": {NewStatus().WithObservedGeneration(4), false},
		"other version":             {NewStatus().WithVersion("1.1"), false},
		"same workload generation":  {NewStatus().WithGenerations(gen(2)), true},
		"new workload generation":   {NewStatus().WithGenerations(gen(3)), false},
	} {
		if got := StatusHas(have, c.st); got != c.want {
			t.Errorf("%s: statusHas = %v, want %v", name, got, c.want)
		}
	}
}

// TestMessagesOnlyWaitForTheRefresh: while only the messages of a controller's conditions
// change (the counts of a scale-up), the writer writes them at most once per MessageRefresh and
// says when to sync again; any change of status or reason is written at once.
func TestMessagesOnlyWaitForTheRefresh(t *testing.T) {
	obj := &operatorv1.ClusterCSIDriver{}
	var writes int
	target := StatusTarget{apiVersion: "operator.openshift.io/v1", kind: "ClusterCSIDriver", name: "manila.csi.openstack.org",
		patch: func(_ context.Context, _ string, body []byte) error {
			writes++
			var sent struct{ Status Status }
			if err := json.Unmarshal(body, &sent); err != nil {
				return err
			}
			for _, c := range sent.Status.Conditions {
				if ex := FindCondition(obj.Status.Conditions, c.Type); ex != nil {
					*ex = c
				} else {
					obj.Status.Conditions = append(obj.Status.Conditions, c)
				}
			}
			return nil
		}}
	w := NewStatusWriter(func() *operatorv1.ClusterCSIDriver { return obj }, target)
	clock := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	w.now = func() time.Time { return clock }
	available := func(status operatorv1.ConditionStatus, reason, msg string) *Status {
		return NewStatus().WithConditions(Condition("NodeAvailable", status, reason, msg))
	}
	apply := func(st *Status) error { return w.Apply(context.Background(), "node", st) }

	if err := apply(available(operatorv1.ConditionTrue, "AsExpected", "1 of 3 pods available")); err != nil || writes != 1 {
		t.Fatalf("first status: err %v, %d writes, want written", err, writes)
	}
	clock = clock.Add(5 * time.Second)
	err := apply(available(operatorv1.ConditionTrue, "AsExpected", "2 of 3 pods available"))
	var d *Deferred
	if !errors.As(err, &d) || d.After != MessageRefresh-5*time.Second || writes != 1 {
		t.Fatalf("a new count 5 s later: err %v, %d writes, want Deferred after %s and no write", err, writes, MessageRefresh-5*time.Second)
	}
	if got := FindCondition(obj.Status.Conditions, "NodeAvailable").Message; got != "1 of 3 pods available" {
		t.Fatalf("message before the refresh = %q", got)
	}
	clock = clock.Add(MessageRefresh)
	if err := apply(available(operatorv1.ConditionTrue, "AsExpected", "2 of 3 pods available")); err != nil || writes != 2 {
		t.Fatalf("the new count after the refresh: err %v, %d writes, want written", err, writes)
	}
	clock = clock.Add(time.Second)
	if err := apply(available(operatorv1.ConditionFalse, "Deploying", "0 of 3 pods available")); err != nil || writes != 3 {
		t.Fatalf("a new status 1 s later: err %v, %d writes, want written at once", err, writes)
	}
	clock = clock.Add(time.Second)
	if err := apply(available(operatorv1.ConditionFalse, "Deploying", "0 of 3 pods available")); err != nil || writes != 3 {
		t.Fatalf("the same status again: err %v, %d writes, want nothing to write", err, writes)
	}
	// Someone else changed the condition meanwhile: the writer puts its own back at once.
	FindCondition(obj.Status.Conditions, "NodeAvailable").Reason = "Other"
	if err := apply(available(operatorv1.ConditionFalse, "Deploying", "1 of 3 pods available")); err != nil || writes != 4 {
		t.Fatalf("after another writer: err %v, %d writes, want written at once", err, writes)
	}
}
