package controllers

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// What the storage network does to the nodes, as StorageNetworkReachable says it: the network
// judged by the rules every command applies before attaching it (attach.Fitness), and what the
// workers' addresses show of it (a node IP on the storage network, workers the attachment has
// not reached yet). Both need the storage network's subnets, which only the cloud knows
// (discovery); without them nothing of this is said.

// Reasons of StorageNetworkReachable set here.
const (
	reasonNodeIPOnStorageNetwork = "NodeIPOnStorageNetwork"
	reasonStorageNetworkUnfit    = "StorageNetworkUnfit"
)

// namesShown caps the node names a message lists.
const namesShown = 5

// storageReport is what the operator sees of the storage network and the workers on it.
type storageReport struct {
	// network labels the storage network, as "name (ID)".
	network  string
	findings []attach.Finding
	// subnets are the storage network's subnets with a valid CIDR.
	subnets []openstack.Subnet
	// workers counts the nodes that run workloads (workers, and schedulable masters); nodeIPOn are those whose node IP lies in a storage
	// subnet, without those with no address in any.
	workers  int
	nodeIPOn []nodeOnSubnet
	without  []string
	// unaddressed are the Machines that attach the storage network but got no address on it
	// for lack of free addresses (storage_network_capacity.go); capacity the free addresses.
	unaddressed []unaddressedMachine
	capacity    storageCapacity
	// wanted are the storage addresses the attached MachineSets still want; short how many of
	// them the free addresses lack (0: enough, or not counted).
	wanted wantedAddresses
	short  int64
}

// nodeOnSubnet is a node whose node IP lies in a storage subnet.
type nodeOnSubnet struct {
	name   string
	addr   netip.Addr
	subnet openstack.Subnet
}

// judgeStorageNetwork judges network n, the storage network, for the MachineSets (sorted by
// name; those attached to n say whether its ports get security groups), the cluster's networks
// (install-config) and the nodes.
func judgeStorageNetwork(n openstack.Network, sets []*unstructured.Unstructured, clusterNetworks []netip.Prefix, nodes []*corev1.Node) storageReport {
	r := storageReport{
		network: nameAndID(n.Name, n.ID),
		findings: attach.Fitness(n, attach.FitnessOptions{
			SecurityGroups:  securityGroupsAsked(sets, n.ID),
			MachineNetworks: clusterNetworks,
		}),
	}
	for _, s := range n.Subnets {
		if s.CIDR.IsValid() {
			r.subnets = append(r.subnets, s)
		}
	}
	if len(r.subnets) > 0 {
		r.addNodes(nodes)
	}
	return r
}

// addNodes sorts the nodes that run workloads by what their addresses show: the node IP (the first
// InternalIP: the node's own choice comes first, see docs/day2.md) in a storage subnet, or no
// address in any storage subnet.
func (r *storageReport) addNodes(nodes []*corev1.Node) {
	sorted := slices.Clone(nodes)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, n := range sorted {
		// Masters count where workloads run on them (a compact cluster): their pods mount too.
		if !shareclient.RunsWorkloads(n) {
			continue
		}
		r.workers++
		if ip, ok := nodeIP(n); ok {
			if s, in := r.subnetOf(ip); in {
				r.nodeIPOn = append(r.nodeIPOn, nodeOnSubnet{name: n.Name, addr: ip, subnet: s})
				continue
			}
		}
		if !slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool {
			ip, err := netip.ParseAddr(a.Address)
			_, in := r.subnetOf(ip)
			return err == nil && in && (a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP)
		}) {
			r.without = append(r.without, n.Name)
		}
	}
}

func (r *storageReport) subnetOf(ip netip.Addr) (openstack.Subnet, bool) {
	for _, s := range r.subnets {
		if ip.IsValid() && s.CIDR.Contains(ip.Unmap()) {
			return s, true
		}
	}
	return openstack.Subnet{}, false
}

// nodeIP is the node's first InternalIP.
func nodeIP(n *corev1.Node) (netip.Addr, bool) {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ip, err := netip.ParseAddr(a.Address)
			return ip, err == nil
		}
	}
	return netip.Addr{}, false
}

// apply adds the report to the verdict on the MachineSets and the classes: a node IP on the
// storage network, then an unfit network, make the condition False with their own reason and
// come first in the message; the workers not reached yet and the warnings follow it without
// changing the status.
func (r storageReport) apply(status operatorv1.ConditionStatus, reason, msg string) (operatorv1.ConditionStatus, string, string) {
	var lead, tail []string
	if len(r.nodeIPOn) > 0 {
		status, reason = operatorv1.ConditionFalse, reasonNodeIPOnStorageNetwork
		lead = append(lead, r.nodeIPMessage())
	}
	if errs := attach.Errors(r.findings); len(errs) > 0 {
		if len(r.nodeIPOn) == 0 {
			status, reason = operatorv1.ConditionFalse, reasonStorageNetworkUnfit
		}
		lead = append(lead, fmt.Sprintf("the storage network %s cannot serve as the workers' second NIC: %s", r.network, numbered(errs)))
	}
	if len(r.unaddressed) > 0 {
		if status != operatorv1.ConditionFalse || (reason != reasonNodeIPOnStorageNetwork && reason != reasonStorageNetworkUnfit) {
			status, reason = operatorv1.ConditionFalse, reasonStorageAddressUnavailable
		}
		lead = append(lead, r.addressMessage())
	}
	if r.short > 0 {
		if status != operatorv1.ConditionFalse {
			status, reason = operatorv1.ConditionFalse, reasonStorageAddressesShort
		}
		lead = append(lead, r.shortMessage())
	}
	if s := r.reachMessage(); s != "" {
		tail = append(tail, s)
	}
	if w := r.warningsMessage(); w != "" {
		tail = append(tail, w)
	}
	return status, reason, strings.Join(slices.Concat(lead, []string{msg}, tail), ". ")
}

// nodeIPMessage names the workers whose node IP lies on the storage network, what that breaks
// and the fix.
func (r storageReport) nodeIPMessage() string {
	var names, fixes []string
	for _, n := range r.nodeIPOn {
		names = append(names, fmt.Sprintf("%s (%s in subnet %s %s)", n.name, n.addr, nameAndID(n.subnet.Name, n.subnet.ID), n.subnet.CIDR))
		if fix := "openstack subnet set --gateway none " + subnetRef(n.subnet); !slices.Contains(fixes, fix) {
			fixes = append(fixes, fix)
		}
	}
	return fmt.Sprintf("workers %s have their node IP (first InternalIP) on the storage network %s: logs, exec and port-forward to them break and their br-ex follows the storage NIC; "+
		"fix: give the storage subnet no default route (%s), which the node-IP selection falls back to, then delete their Machines so that the replacements take their node IP on the machine network",
		capNames(names), r.network, strings.Join(fixes, "; "))
}

// reachMessage says how many workers have no address in the storage subnets yet, and which.
func (r storageReport) reachMessage() string {
	if r.workers == 0 {
		return ""
	}
	cidrs := make([]string, len(r.subnets))
	for i, s := range r.subnets {
		cidrs[i] = s.CIDR.String()
	}
	in := strings.Join(cidrs, ", ")
	if len(r.without) == 0 {
		return fmt.Sprintf("all %d workers have an address in the storage subnets %s", r.workers, in)
	}
	return fmt.Sprintf("%d of %d workers have no address in the storage subnets %s yet (not attached, or their Machines predate the attachment): %s",
		len(r.without), r.workers, in, capNames(r.without))
}

func (r storageReport) warningsMessage() string {
	w := slices.DeleteFunc(slices.Clone(r.findings), func(f attach.Finding) bool { return f.Severity != attach.SeverityWarning })
	if len(w) == 0 {
		return ""
	}
	return fmt.Sprintf("warnings on the storage network %s: %s", r.network, numbered(w))
}

// numbered lists the findings, each with its ID and fix, in one line.
func numbered(findings []attach.Finding) string {
	parts := make([]string, len(findings))
	for i, f := range findings {
		parts[i] = fmt.Sprintf("(%d) %s: %s", i+1, f.ID, f)
	}
	return strings.Join(parts, " ")
}

// capNames lists the first namesShown names and counts the rest.
func capNames(names []string) string {
	if len(names) <= namesShown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:namesShown], ", "), len(names)-namesShown)
}

func nameAndID(name, id string) string {
	if name == "" {
		return id
	}
	return name + " (" + id + ")"
}

// subnetRef names a subnet in a command: by name, else by ID.
func subnetRef(s openstack.Subnet) string {
	if s.Name != "" {
		return s.Name
	}
	return s.ID
}

// portSecuritySpec is what an OpenstackProviderSpec says of the security groups on a port:
// the machine's securityGroups go to every port whose entry does not disable port security
// (machine-api-provider-openstack passes portSecurity: false on as CAPO's DisablePortSecurity,
// and CAPO then gives the port no security groups); a ports[] entry may name its own.
type portSecuritySpec struct {
	Networks []struct {
		UUID   string `json:"uuid"`
		Filter struct {
			ID string `json:"id"`
		} `json:"filter"`
		PortSecurity *bool `json:"portSecurity"`
	} `json:"networks"`
	Ports []struct {
		NetworkID      string            `json:"networkID"`
		PortSecurity   *bool             `json:"portSecurity"`
		SecurityGroups []json.RawMessage `json:"securityGroups"`
	} `json:"ports"`
	SecurityGroups []json.RawMessage `json:"securityGroups"`
}

// securityGroupsAsked reports whether a MachineSet gives its machines' port on network id
// security groups: Neutron refuses that port on a network without port security.
func securityGroupsAsked(sets []*unstructured.Unstructured, id string) bool {
	for _, u := range sets {
		value, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template", "spec", "providerSpec", "value")
		raw, err := json.Marshal(value)
		if err != nil {
			continue
		}
		var s portSecuritySpec
		if json.Unmarshal(raw, &s) != nil {
			continue
		}
		off := func(p *bool) bool { return p != nil && !*p }
		for _, n := range s.Networks {
			if (neutronid.Equal(n.UUID, id) || neutronid.Equal(n.Filter.ID, id)) && !off(n.PortSecurity) && len(s.SecurityGroups) > 0 {
				return true
			}
		}
		for _, p := range s.Ports {
			if neutronid.Equal(p.NetworkID, id) && !off(p.PortSecurity) && len(s.SecurityGroups)+len(p.SecurityGroups) > 0 {
				return true
			}
		}
	}
	return false
}
