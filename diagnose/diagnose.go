// Package diagnose answers "why is my pod stuck?" for a pod or a claim of the Manila CSI
// driver, and "why is my snapshot not taken?" for a VolumeSnapshot (snapshots.go). The cause of a pod stuck in ContainerCreating (mount.nfs: Connection timed out, access
// denied by server) or of a claim stuck Pending lies in one of six places: the claim and its
// class, the Manila share, its access rules, the node's ports in Neutron, the machine that made
// the node, and the driver's pods on that node. Diagnose follows that chain and makes one check
// of each link, passed, failed or not checked, each with its evidence and, when it failed, the
// command that fixes it. It reads and never writes.
package diagnose

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// Status is a check's outcome.
type Status string

const (
	Passed     Status = "passed"
	Failed     Status = "failed"
	NotChecked Status = "not checked"
)

// Check is one link of the chain, as it was found.
type Check struct {
	// Name says which link: pod, claim, data source, class, share, zone (on a cloud whose zones
	// Manila serves on storage networks of their own), access rule, node, storage port, driver,
	// nfs-shareClient; of a VolumeSnapshot: snapshot, snapshot class, share type, Manila
	// snapshot.
	Name string `json:"name"`
	// Subject is the object looked at (Pod default/app, share 1a2b..., Node worker-0).
	Subject  string `json:"subject"`
	Status   Status `json:"status"`
	Evidence string `json:"evidence"`
	// Fix is the command (ours, kubectl or openstack) that fixes a failed check.
	Fix string `json:"fix,omitempty"`
}

// Report is what Run found, in the order of the chain.
type Report struct {
	Target string  `json:"target"`
	Checks []Check `json:"checks"`
}

// Count returns how many checks have the status.
func (r *Report) Count(s Status) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == s {
			n++
		}
	}
	return n
}

// Target is what to diagnose: a pod, a PersistentVolumeClaim or a VolumeSnapshot.
type Target struct {
	Kind      string // "pod", "pvc" or "volumesnapshot"
	Namespace string
	Name      string
}

func (t Target) String() string { return t.Kind + "/" + t.Namespace + "/" + t.Name }

// ParseTarget reads pod/NAME, pvc/NAME or volumesnapshot/NAME (and the long and short forms
// kubectl takes) in namespace.
func ParseTarget(s, namespace string) (Target, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return Target{}, fmt.Errorf("target: Invalid value: %q: want pod/NAME, pvc/NAME or volumesnapshot/NAME", s)
	}
	switch k := strings.ToLower(kind); {
	case k == "pod" || k == "pods" || k == "po":
		kind = "pod"
	case k == "pvc" || k == "pvcs" || k == "persistentvolumeclaim" || k == "persistentvolumeclaims":
		kind = "pvc"
	case isSnapshotKind(k):
		kind = "volumesnapshot"
	default:
		return Target{}, fmt.Errorf("target: Invalid value: %q: %q is not pod, pvc or volumesnapshot", s, kind)
	}
	if len(name) > 253 {
		return Target{}, fmt.Errorf("target: Invalid value: %q: a name has at most 253 characters", s)
	}
	return Target{Kind: kind, Namespace: namespace, Name: name}, nil
}

// Inputs are what Run reads.
type Inputs struct {
	Kube kubernetes.Interface
	// Meta reads the metadata of Secrets and Machines: their data is never fetched.
	Meta metadata.Interface
	// Dynamic reads VolumeSnapshots and their contents (no Go types for them here).
	Dynamic dynamic.Interface
	// Cloud connects to the cloud of the cluster; nil: the share, its access rules, the share
	// types and the nodes' ports are not checked.
	Cloud func(context.Context) (*openstack.Client, error)
	// CloudName is the cloud's name in the fix commands (openstack --os-cloud NAME).
	CloudName string
	// MachineNetworks are the nodes' networks (the install-config's machineNetwork).
	MachineNetworks []netip.Prefix
}

// cloudFacts are what the cloud says, asked once.
type cloudFacts struct {
	client *openstack.Client
	err    error // why the cloud could not be asked
	// storage is the network Manila exports on, exportSubnets its subnets holding export
	// addresses (nil when discovery found none).
	storage       *openstack.Network
	exportSubnets []openstack.Subnet
	// zones are each availability zone's storage networks when Manila serves the zones on
	// different ones (storage is nil then); exportSubnets are then those of every zone.
	zones      zoneFacts
	shareTypes []string
	// shareTypeInfo are the share types by name, with their snapshot extra specs.
	shareTypeInfo map[string]openstack.ShareType
	typesErr      error
}

// addExportSubnets adds the subnets of a storage network that hold export addresses.
func (f *cloudFacts) addExportSubnets(c *openstack.Candidate) {
	exports := c.ExportSubnets()
	for _, s := range c.Network.Subnets {
		if slices.Contains(exports, s.CIDR.Masked()) {
			f.exportSubnets = append(f.exportSubnets, s)
		}
	}
}

// exportSubnetOf returns the export subnet holding a, if any.
func (f *cloudFacts) exportSubnetOf(a netip.Addr) (openstack.Subnet, bool) {
	if f == nil {
		return openstack.Subnet{}, false
	}
	for _, s := range f.exportSubnets {
		if s.CIDR.Contains(a) {
			return s, true
		}
	}
	return openstack.Subnet{}, false
}

func (f *cloudFacts) prefixes() []netip.Prefix {
	if f == nil {
		return nil
	}
	var out []netip.Prefix
	for _, s := range f.exportSubnets {
		out = append(out, s.CIDR)
	}
	return out
}

// noCloud is the evidence of a check that needs the cloud when none was given.
const noCloud = "needs the cloud: give --os-cloud"

// mountAddress is where a node mounts a share from: its address in a subnet that holds export
// addresses (a port on the storage network), else, when those subnets are not known, its
// address outside the machine network, else its node IP (the first InternalIP), which reaches
// the export address through its default route.
func mountAddress(n *corev1.Node, exportSubnets, machineNetworks []netip.Prefix) (netip.Addr, string) {
	var addrs []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			addrs = append(addrs, ip)
		}
	}
	if len(addrs) == 0 {
		return netip.Addr{}, "it has no InternalIP"
	}
	for _, a := range addrs {
		for _, p := range exportSubnets {
			if p.Contains(a) {
				return a, "its address in the export subnet " + p.String()
			}
		}
	}
	if len(exportSubnets) == 0 && len(machineNetworks) > 0 {
		for _, a := range addrs {
			if !inAny(a, machineNetworks) {
				return a, "its address outside the machine network " + joinPrefixes(machineNetworks)
			}
		}
	}
	return addrs[0], "its node IP: with no address in an export subnet, it reaches the export address through its default route"
}

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
