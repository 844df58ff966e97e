package deploy

import (
	"context"
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/operator"
)

// Where the installer leaves the install-config it installed the cluster from.
const (
	InstallConfigNamespace = "kube-system"
	InstallConfigName      = "cluster-config-v1"
	installConfigKey       = "install-config"
)

// InstallConfig is what the CLI reads of the install-config a cluster keeps, in the two ways
// its readers need it.
type InstallConfig struct {
	// Networks are every network and VIP, read leniently (operator.ParseInstallConfigNetworks):
	// what a storage subnet must neither overlap nor hold, and where a node's IP belongs.
	Networks operator.InstallConfigNetworks
	// MachineNetworks are networking.machineNetwork read as the operator reads it for where the
	// workers mount from (operator.MachineNetworksFromInstallConfig), masked: none when there
	// is none or one is not a CIDR, so that `storageclasses check` and `diagnose` judge the
	// volumes by the same networks as the operator does.
	MachineNetworks []netip.Prefix
}

// ReadInstallConfig reads the install-config from kube-system/cluster-config-v1. Without a
// cluster (kube nil) it is empty and no error; when the ConfigMap cannot be read it is empty
// and the error says so, and the callers decide whether that matters (the canary and the
// network policy check less, the StorageClasses' check falls back to nothing).
func ReadInstallConfig(ctx context.Context, kube kubernetes.Interface) (InstallConfig, error) {
	if kube == nil {
		return InstallConfig{}, nil
	}
	cm, err := kube.CoreV1().ConfigMaps(InstallConfigNamespace).Get(ctx, InstallConfigName, metav1.GetOptions{})
	if err != nil {
		return InstallConfig{}, fmt.Errorf("reading %s/%s (the install-config): %w", InstallConfigNamespace, InstallConfigName, err)
	}
	return ParseInstallConfig([]byte(cm.Data[installConfigKey])), nil
}

// ParseInstallConfig reads an install-config's text as ReadInstallConfig does.
func ParseInstallConfig(raw []byte) InstallConfig {
	ic := InstallConfig{Networks: operator.ParseInstallConfigNetworks(raw)}
	cidrs, err := operator.MachineNetworksFromInstallConfig(raw)
	if err != nil {
		return ic
	}
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			ic.MachineNetworks = append(ic.MachineNetworks, p.Masked())
		}
	}
	return ic
}
