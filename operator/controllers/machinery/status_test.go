package machinery

import (
	"testing"

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
