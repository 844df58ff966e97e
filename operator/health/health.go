// Package health is how manila-setup reads the Manila CSI driver's state, the one rule that
// `manila-setup operator status` and the attach wizard's last screen share: which conditions of
// the ClusterCSIDriver say something is wrong, which only inform, and which StorageClasses are
// the driver's. It reads what any Manila operator reports (ours or the platform's), so it needs
// nothing but conditions and StorageClasses.
package health

import (
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"

	"github.com/manila-setup/manila-setup/operator"
)

// Verdict is what one condition says.
type Verdict int

const (
	// Good: as it should be (Available=True, Degraded=False, Progressing=False).
	Good Verdict = iota
	// Bad: needs attention (Available=False, Degraded=True, or an informative condition that
	// is not as wished, see Informative).
	Bad
	// Progressing: a rollout is under way.
	Progressing
	// Info: an informative condition that is fine, shown with its message.
	Info
)

// Condition is one condition of the ClusterCSIDriver.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// informative are the conditions that say what the operator found rather than how a controller
// is doing; each with the status it is fine at ("" when every status is fine). They are always
// shown with their message.
var informative = map[string]string{
	operator.ConditionDisabled:                "",
	operator.ConditionStorageNetworkReachable: "True",
	operator.ConditionManilaReachable:         "True",
	"DriverMode":                              "",
	"StorageClassesValid":                     "True",
}

// Informative tells whether a condition type only informs.
func Informative(typ string) bool {
	_, ok := informative[typ]
	return ok
}

// Judge reads one condition.
func Judge(c Condition) Verdict {
	if want, ok := informative[c.Type]; ok {
		if want != "" && c.Status != want {
			return Bad
		}
		return Info
	}
	switch {
	case strings.HasSuffix(c.Type, "Progressing"):
		if c.Status == "True" {
			return Progressing
		}
		return Good
	case strings.HasSuffix(c.Type, "Degraded"):
		if c.Status == "True" {
			return Bad
		}
		return Good
	case strings.HasSuffix(c.Type, "Available"):
		if c.Status == "True" {
			return Good
		}
		return Bad
	}
	return Info
}

// Degraded tells whether a controller reports Degraded=True: what makes the driver unhealthy
// whatever else holds. (A missing storage network or an unreachable Manila are Bad for the eye
// but do not make the driver unhealthy: what exists still works.)
func Degraded(conds []Condition) bool {
	return slices.ContainsFunc(conds, func(c Condition) bool {
		return strings.HasSuffix(c.Type, "Degraded") && c.Status == "True"
	})
}

// Disabled tells whether the operator found no usable Manila and so installed nothing.
func Disabled(conds []Condition) bool {
	return slices.ContainsFunc(conds, func(c Condition) bool {
		return c.Type == operator.ConditionDisabled && c.Status == "True"
	})
}

// Healthy: nothing Degraded, and either every workload of the driver is available or Manila is
// disabled and the driver was never installed.
func Healthy(conds []Condition, workloadsAvailable, installed bool) bool {
	return !Degraded(conds) && (workloadsAvailable || (Disabled(conds) && !installed))
}

// ConditionsHealthy judges from the conditions alone (a driver whose workloads manila-setup does
// not know, the platform's): nothing Degraded, nothing unavailable.
func ConditionsHealthy(conds []Condition) bool {
	for _, c := range conds {
		if !Informative(c.Type) && Judge(c) == Bad {
			return false
		}
	}
	return true
}

// StorageClasses returns the names of the classes the Manila driver provisions, sorted: the
// operator's own and any other (the platform's, an admin's).
func StorageClasses(list []storagev1.StorageClass) []string {
	var out []string
	for _, sc := range list {
		if sc.Provisioner == operator.DriverName {
			out = append(out, sc.Name)
		}
	}
	slices.Sort(out)
	return out
}
