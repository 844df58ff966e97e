package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// What the operator knows, as metrics an alert can use: its conditions as they are on its own
// object, and the counts behind the findings that matter to a pod that must mount. The alert
// rules (assets/prometheusrule.yaml, docs/alerts.md) are written against these names; an
// integration test scrapes a running operator for every name the rules use.

// conditionDesc is one series per condition of the operator's object, value 1.
var conditionDesc = prometheus.NewDesc("manila_operator_condition",
	"A condition of the operator's object (ClusterCSIDriver manila.csi.openstack.org, or ManilaCompanion cluster), as it is now: one series per condition, value 1.",
	[]string{"condition", "status", "reason"}, nil)

// conditionCollector reads the conditions at scrape time from the informer's copy of the
// operator's object: nothing is kept between scrapes, a condition that went away has no series,
// and a scrape makes no request.
type conditionCollector struct{ self ownObject }

func (c conditionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- conditionDesc }

func (c conditionCollector) Collect(ch chan<- prometheus.Metric) {
	d := c.self()
	if d == nil {
		return
	}
	for _, cond := range d.Status.Conditions {
		ch <- prometheus.MustNewConstMetric(conditionDesc, prometheus.GaugeValue, 1, cond.Type, string(cond.Status), cond.Reason)
	}
}

// MachineSetsNotAttached is the number of MachineSets whose providerSpec gives their machines no
// port on the storage network, as the storage network controller last judged them (0 while the
// storage network is not known); on a cloud whose zones Manila serves on networks of their own,
// those that lack a network of their zone (zonesVerdict).
var MachineSetsNotAttached = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "manila_operator_machinesets_not_attached",
	Help: "MachineSets whose providerSpec gives their machines no port on the storage network: their nodes cannot mount Manila shares (0 while the storage network is not known).",
})

// VolumesAccessRulesNotActive counts the driver's PersistentVolumes whose share's access rules
// are not all applied, by Manila's access_rules_status: "error" (a rule failed: the node gets
// "access denied by server") or "syncing" (rules queued or being applied).
var VolumesAccessRulesNotActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "manila_operator_volumes_access_rules_not_active",
	Help: "The Manila CSI driver's PersistentVolumes whose share's access_rules_status is error or syncing, as last asked (every resync).",
}, []string{"state"})

// accessRuleStates are the states VolumesAccessRulesNotActive always has a series for, once
// Manila was asked: an alert on "> 0" needs a 0 to compare with.
var accessRuleStates = []string{"error", "syncing"}

// metricsRegistry holds the process's metrics. The conditions are added once the operator
// exists (Start), since they are read from its informers.
func metricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), machinery.KubeRequests,
		MachinesWithoutStorageAddress, StorageSubnetFreeAddresses, StorageAddressesShort, MachineSetsNotAttached, VolumesAccessRulesNotActive)
	for name, c := range map[string]func() int64{
		"tokens":              OpenStackCalls.Tokens.Load,
		"catalog_reads":       OpenStackCalls.Catalogs.Load,
		"share_type_lists":    OpenStackCalls.ShareTypeLists.Load,
		"share_network_lists": OpenStackCalls.ShareNetworkLists.Load,
		"share_lists":         OpenStackCalls.ShareLists.Load,
		"discoveries":         OpenStackCalls.Discoveries.Load,
		"capacity_counts":     OpenStackCalls.CapacityCounts.Load,
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "manila_operator_openstack_" + name + "_total",
			Help: "OpenStack requests made by the operator: " + name,
		}, func() float64 { return float64(c()) }))
	}
	return reg
}
