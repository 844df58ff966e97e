package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/operator"
)

// Volumes whose access rules are not active: the driver asks Manila for an access rule per node
// address and does not wait for it to leave queued_to_apply, and a rule in error is silent
// until a pod's mount is refused ("access denied by server"). Manila sums up each share's rules
// in its access_rules_status, which one list of the project's shares carries: the Manila
// controller reads it every accessRulesEvery resyncs, and at every resync while a share is not
// "active" (to see it clear soon); only then does it list the PersistentVolumes, to count the
// driver's among them. Steady state costs one Manila request every five resyncs and no
// Kubernetes request: a page of 1000 shares takes about 7 ms of CPU to read
// (BenchmarkShareRulesList), a sixth of the operator's steady minute.

// accessRulesEvery is how many resyncs apart the access rules are checked while all are active.
const accessRulesEvery = 5

// accessRuleCheck keeps what the last check found, to say a change once rather than every
// resync.
type accessRuleCheck struct {
	// volumes maps the share ID of each of the driver's PersistentVolumes to its name.
	volumes  func(context.Context) (map[string]string, error)
	recorder interface {
		Warningf(reason, format string, args ...any)
	}

	// every is how long apart the checks are while every share is active (accessRulesEvery
	// resyncs, less a tenth for the timers' jitter).
	every time.Duration

	mu            sync.Mutex
	last          string
	checkedAt     time.Time
	someNotActive bool
}

// due tells whether the access rules should be asked for now.
func (a *accessRuleCheck) due(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.checkedAt.IsZero() || a.someNotActive || now.Sub(a.checkedAt) >= a.every
}

// check counts the driver's volumes by the state of their share's access rules and exports the
// counts (VolumesAccessRulesNotActive). An error leaves the last counts as they were.
func (a *accessRuleCheck) check(ctx context.Context, src ManilaSource) {
	now := time.Now()
	if !a.due(now) {
		return
	}
	states, err := src.SharesWithRulesNotActive(ctx)
	if err != nil {
		klog.V(2).Infof("access rules of the driver's volumes not checked: %v", err)
		return
	}
	var found []string
	counts := map[string]int{}
	if len(states) > 0 {
		vols, err := a.volumes(ctx)
		if err != nil {
			klog.V(2).Infof("access rules of the driver's volumes not checked: listing PersistentVolumes: %v", err)
			return
		}
		for _, share := range slices.Sorted(maps.Keys(states)) {
			if pv, ok := vols[share]; ok {
				counts[states[share]]++
				found = append(found, fmt.Sprintf("%s (share %s: %s)", pv, share, states[share]))
			}
		}
	}
	for _, s := range accessRuleStates {
		VolumesAccessRulesNotActive.WithLabelValues(s).Set(float64(counts[s]))
	}
	for s, n := range counts {
		if !slices.Contains(accessRuleStates, s) {
			VolumesAccessRulesNotActive.WithLabelValues(s).Set(float64(n))
		}
	}
	summary := strings.Join(found, ", ")
	a.mu.Lock()
	changed := summary != a.last
	// Only the driver's volumes make the next check come sooner: a share of another cluster in
	// the same project, left in error, must not have the PersistentVolumes listed every resync.
	a.last, a.checkedAt, a.someNotActive = summary, now, len(found) > 0
	a.mu.Unlock()
	if changed && summary != "" {
		a.recorder.Warningf("VolumeAccessRulesNotActive",
			"PersistentVolumes whose share's access rules are not all applied: %s. Nodes may be refused (access denied by server): "+
				"openstack share access list SHARE shows each rule's state; manila-setup diagnose pod/NAME names the rule a node needs", capNames(found))
	}
}

// driverVolumes lists the PersistentVolumes of the Manila CSI driver, by share ID (the CSI
// volume handle), a page of 500 at a time.
func driverVolumes(core rest.Interface) func(context.Context) (map[string]string, error) {
	return func(ctx context.Context) (map[string]string, error) {
		out := map[string]string{}
		next := ""
		for {
			var list corev1.PersistentVolumeList
			req := core.Get().Resource("persistentvolumes").Param("limit", "500")
			if next != "" {
				req = req.Param("continue", next)
			}
			if err := req.Do(ctx).Into(&list); err != nil {
				return nil, err
			}
			for _, pv := range list.Items {
				if pv.Spec.CSI != nil && pv.Spec.CSI.Driver == operator.DriverName {
					out[pv.Spec.CSI.VolumeHandle] = pv.Name
				}
			}
			if next = list.Continue; next == "" {
				return out, nil
			}
		}
	}
}
