package attach

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// What a storage network does to the machines it is attached to: their second NIC takes an
// address by DHCP, with the routes and DNS servers the subnet hands out, and the node may take
// its node IP from it (docs/day2.md, "What a second NIC does to a node"). Fitness judges a
// network by those rules before it is attached.

// Finding IDs: stable, for -o json and scripts.
const (
	FindingDHCPOff          = "dhcp-off"             // no subnet hands out addresses
	FindingPortSecurityOff  = "port-security-off"    // security groups asked on a network without port security
	FindingDefaultRoute     = "default-route"        // a gateway, or a 0.0.0.0/0 host route: a second default route
	FindingDNSAnnounced     = "dns-announced"        // the subnet's DHCP announces DNS servers
	FindingOverlap          = "overlap"              // the subnet overlaps the machines' networks
	FindingIPv6NoRA         = "ipv6-no-ra"           // an IPv6 subnet without router advertisements
	FindingIPv6Stateful     = "ipv6-dhcpv6-stateful" // addresses only from stateful DHCPv6, which nodes do not ask for
	FindingVIPInSubnet      = "vip-in-subnet"        // the subnet holds the API or ingress VIP
	SeverityError           = "error"                // the network is refused, unless forced
	SeverityWarning         = "warning"              // said, and the network attached
	dnsNoneAnnounced        = "0.0.0.0"
	defaultRouteExplanation = "every machine gets a second default route through it; when the API and ingress VIPs are not on-link, OpenShift's node-IP selection takes the interface with the lowest-metric default route and the node may take its InternalIP from the storage network (logs, exec and the node's br-ex move)"
)

// Finding is one thing a network would do wrong to the machines, with the fix.
type Finding struct {
	ID       string `json:"id"`
	Severity string `json:"severity"`
	// Network and Subnet name the object, as "name (ID)".
	Network string `json:"network"`
	Subnet  string `json:"subnet,omitempty"`
	Message string `json:"message"`
	// Fix is the command that removes the finding.
	Fix string `json:"fix,omitempty"`
}

func (f Finding) String() string {
	where := "network " + f.Network
	if f.Subnet != "" {
		where += ", subnet " + f.Subnet
	}
	s := where + ": " + f.Message
	if f.Fix != "" {
		s += "; fix: " + f.Fix
	}
	return s
}

// FitnessOptions say what the attachment asks of the network.
type FitnessOptions struct {
	// SecurityGroups: security groups are put on the machines' port on the network.
	SecurityGroups bool
	// MachineNetworks are the cluster's machine, cluster and service networks, when known: a
	// storage subnet must not overlap them.
	MachineNetworks []netip.Prefix
	// VIPs are the cluster's API and ingress VIPs, when known: a storage subnet must not hold
	// them, as OpenShift's node-IP selection takes the interface whose subnet holds one.
	VIPs []netip.Addr
	// Sources say where a machine network or a VIP was read (a field path, say), keyed by its
	// text form, for the messages; optional.
	Sources map[string]string
}

// source is " (where)" for a machine network or VIP whose origin is known.
func (o FitnessOptions) source(v fmt.Stringer) string {
	if where := o.Sources[v.String()]; where != "" {
		return " (" + where + ")"
	}
	return ""
}

// Fitness judges network n as a storage network: errors for what leaves a node without an
// address or a port, warnings for what changes its routes and DNS.
func Fitness(n openstack.Network, opts FitnessOptions) []Finding {
	var out []Finding
	network := n.Ref()
	add := func(id, severity, subnet, msg, fix string) {
		out = append(out, Finding{ID: id, Severity: severity, Network: network, Subnet: subnet, Message: msg, Fix: fix})
	}
	if len(n.Subnets) > 0 && !slices.ContainsFunc(n.Subnets, func(s openstack.Subnet) bool { return s.DHCP }) {
		names := make([]string, len(n.Subnets))
		for i, s := range n.Subnets {
			names[i] = s.Name
			if names[i] == "" {
				names[i] = s.ID
			}
		}
		add(FindingDHCPOff, SeverityError, "", "no subnet has DHCP enabled: the machines' port on it gets no address, and the shares stay unreachable",
			"openstack subnet set --dhcp "+names[0])
	}
	if opts.SecurityGroups && n.PortSecurity != nil && !*n.PortSecurity {
		add(FindingPortSecurityOff, SeverityError, "", "port security is disabled on the network, and security groups are asked for: Neutron refuses the machines' port (PortSecurityAndIPRequiredForSecurityGroups) and the new machines never start",
			"attach it without --security-group (the port then has no security groups), or: openstack network set --enable-port-security "+n.ID)
	}
	for _, s := range n.Subnets {
		subnet := s.Ref()
		ref := s.Name
		if ref == "" {
			ref = s.ID
		}
		for _, m := range opts.MachineNetworks {
			if s.CIDR.IsValid() && m.IsValid() && s.CIDR.Overlaps(m) {
				add(FindingOverlap, SeverityError, subnet, fmt.Sprintf("its range %s overlaps the cluster's network %s%s: the nodes would route part of the cluster's traffic to the storage network", s.CIDR, m, opts.source(m)), "")
			}
		}
		for _, v := range opts.VIPs {
			if s.CIDR.IsValid() && s.CIDR.Contains(v) {
				add(FindingVIPInSubnet, SeverityError, subnet, fmt.Sprintf("its range %s holds the VIP %s%s: OpenShift's node-IP selection takes the interface whose subnet holds a VIP, so the nodes would take their InternalIP from the storage network (logs, exec and the node's br-ex move)", s.CIDR, v, opts.source(v)),
					"attach a storage network whose subnets do not hold the API and ingress VIPs (they belong to the machine network)")
			}
		}
		if !s.DHCP {
			continue // a subnet without DHCP hands out nothing: no routes, no DNS
		}
		if s.Gateway.IsValid() {
			add(FindingDefaultRoute, SeverityWarning, subnet, fmt.Sprintf("its gateway %s is handed out by DHCP: %s", s.Gateway, defaultRouteExplanation),
				"openstack subnet set --gateway none "+ref)
		}
		for _, r := range s.HostRoutes {
			if r.Destination.Bits() == 0 {
				add(FindingDefaultRoute, SeverityWarning, subnet, fmt.Sprintf("its host route %s via %s is handed out by DHCP: %s", r.Destination, r.NextHop, defaultRouteExplanation),
					fmt.Sprintf("openstack subnet unset --host-route destination=%s,gateway=%s %s", r.Destination, r.NextHop, ref))
			}
		}
		if !slices.Equal(s.DNS, []string{dnsNoneAnnounced}) {
			what := "no dns_nameservers: its DHCP server announces itself as a DNS server"
			if len(s.DNS) > 0 {
				what = "dns_nameservers " + strings.Join(s.DNS, ", ") + " are announced"
			}
			add(FindingDNSAnnounced, SeverityWarning, subnet, what+": the nodes may resolve through the storage network before the cluster's own DNS",
				"openstack subnet set --no-dns-nameservers --dns-nameserver 0.0.0.0 "+ref)
		}
		if s.IPVersion == 6 && s.IPv6RAMode == "" {
			add(FindingIPv6NoRA, SeverityWarning, subnet, "an IPv6 subnet without router advertisements (ipv6_ra_mode unset): the nodes do not configure an address on it",
				"recreate the subnet with --ipv6-ra-mode slaac --ipv6-address-mode slaac")
		} else if s.IPVersion == 6 && s.IPv6AddressMode == "dhcpv6-stateful" {
			add(FindingIPv6Stateful, SeverityWarning, subnet, "an IPv6 subnet whose addresses come only from stateful DHCPv6 (ipv6_address_mode dhcpv6-stateful): the nodes ask no DHCPv6 server for an address unless their kernel arguments say ip=dhcp,dhcpv6, so they get none on it",
				"recreate the subnet with --ipv6-ra-mode slaac --ipv6-address-mode slaac, or give the machines the kernel argument ip=dhcp,dhcpv6 (a MachineConfig)")
		}
	}
	return out
}

// Errors returns the findings that refuse the network.
func Errors(findings []Finding) []Finding {
	return slices.DeleteFunc(slices.Clone(findings), func(f Finding) bool { return f.Severity != SeverityError })
}
