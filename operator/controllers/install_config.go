package controllers

import (
	"net/netip"
	"slices"
	"sync"

	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// installConfigs reads the cluster's install-config (kube-system/cluster-config-v1) from the
// cache and parses it once per version of the ConfigMap: three controllers read it at every
// resync, and parsing its YAML each time was a tenth of what a steady minute allocated
// (docs/performance.md).
type installConfigs struct {
	lister corelisters.ConfigMapLister

	mu sync.Mutex
	// version is the UID and resourceVersion of the ConfigMap last parsed.
	version string
	last    parsedInstallConfig
}

type parsedInstallConfig struct {
	// machine are networking.machineNetwork's CIDRs; err says why there are none.
	machine []string
	err     error
	// networks are every network and VIP, read leniently.
	networks operator.InstallConfigNetworks
}

// parsed returns the install-config's networks; found is false when the ConfigMap is not cached.
func (c *installConfigs) parsed() (p parsedInstallConfig, found bool) {
	cm, err := c.lister.ConfigMaps(machinery.ClusterConfigNamespace).Get(machinery.ClusterConfigName)
	if err != nil {
		return p, false
	}
	version := string(cm.UID) + "/" + cm.ResourceVersion
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.version != version || version == "/" {
		raw := []byte(cm.Data["install-config"])
		machine, err := operator.MachineNetworksFromInstallConfig(raw)
		// Clipped: the callers share it, and an append of theirs must not write into it.
		c.version, c.last = version, parsedInstallConfig{machine: slices.Clip(machine), err: err, networks: operator.ParseInstallConfigNetworks(raw)}
	}
	return c.last, true
}

// clusterNetworks are the machine, cluster and service networks, nil when unknown.
// --machine-network is not one of them: it only says what the StorageClasses admit, and may be
// wider than the nodes' network.
func (c *installConfigs) clusterNetworks() []netip.Prefix {
	p, found := c.parsed()
	if !found {
		return nil
	}
	return p.networks.All()
}
