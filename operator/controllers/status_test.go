package controllers

import (
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
)

func TestStatusHas(t *testing.T) {
	have := &operatorv1.OperatorStatus{
		ObservedGeneration: 3,
		Version:            "1.0",
		Conditions: []operatorv1.OperatorCondition{
			condition("AAvailable", operatorv1.ConditionTrue, "AsExpected", "ok"),
			condition("ADegraded", operatorv1.ConditionFalse, "AsExpected", ""),
		},
		Generations: []operatorv1.GenerationStatus{{Group: "apps", Resource: "deployments", Namespace: "ns", Name: "d", LastGeneration: 2}},
	}
	gen := func(g int64) operatorv1.GenerationStatus {
		return operatorv1.GenerationStatus{Group: "apps", Resource: "deployments", Namespace: "ns", Name: "d", LastGeneration: g}
	}
	for name, c := range map[string]struct {
		st   *operatorStatus
		want bool
	}{
		"same conditions":           {newStatus().WithConditions(have.Conditions...), true},
		"a subset":                  {newStatus().WithConditions(have.Conditions[1]), true},
		"other status":              {newStatus().WithConditions(condition("AAvailable", operatorv1.ConditionFalse, "AsExpected", "ok")), false},
		"other reason":              {newStatus().WithConditions(condition("AAvailable", operatorv1.ConditionTrue, "Deploying", "ok")), false},
		"other message":             {newStatus().WithConditions(condition("AAvailable", operatorv1.ConditionTrue, "AsExpected", "1 of 2")), false},
		"a condition not there":     {newStatus().WithConditions(condition("BAvailable", operatorv1.ConditionTrue, "AsExpected", "ok")), false},
		"same generation":           {newStatus().WithObservedGeneration(3).WithVersion("1.0"), true},
		"newer observed generation": {newStatus().WithObservedGeneration(4), false},
		"other version":             {newStatus().WithVersion("1.1"), false},
		"same workload generation":  {newStatus().WithGenerations(gen(2)), true},
		"new workload generation":   {newStatus().WithGenerations(gen(3)), false},
	} {
		if got := statusHas(have, c.st); got != c.want {
			t.Errorf("%s: statusHas = %v, want %v", name, got, c.want)
		}
	}
}
