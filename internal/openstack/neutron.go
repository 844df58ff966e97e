package openstack

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
)

// Network is a Neutron network with its subnets.
type Network struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	ProjectID string   `json:"projectID,omitempty"`
	Status    string   `json:"status,omitempty"`
	Shared    bool     `json:"shared"`
	External  bool     `json:"external"`
	Subnets   []Subnet `json:"subnets"`
	Tags      []string `json:"tags,omitempty"`
	// PortSecurity is port_security_enabled: what the network's ports get unless a port says
	// otherwise (nil: Neutron did not say, the port_security extension is off: enabled).
	PortSecurity *bool `json:"portSecurity,omitempty"`
}

// Subnet is one subnet of a network, with what its DHCP server tells a machine on it.
type Subnet struct {
	ID        string       `json:"id"`
	Name      string       `json:"name,omitempty"`
	NetworkID string       `json:"networkID"`
	CIDR      netip.Prefix `json:"cidr"`
	IPVersion int          `json:"ipVersion"`
	// DHCP is enable_dhcp: without it a machine's port on the subnet gets no address.
	DHCP bool `json:"dhcp"`
	// Gateway is gateway_ip (invalid when none): DHCP hands it out as a default route.
	Gateway netip.Addr `json:"gateway,omitzero"`
	// DNS is dns_nameservers: empty makes the DHCP server announce itself; "0.0.0.0"
	// announces none.
	DNS []string `json:"dnsNameservers,omitempty"`
	// HostRoutes are host_routes, as DHCP hands them out.
	HostRoutes []Route `json:"hostRoutes,omitempty"`
	// IPv6RAMode is ipv6_ra_mode ("" when Neutron sends no router advertisements).
	IPv6RAMode string `json:"ipv6RAMode,omitempty"`
	// IPv6AddressMode is ipv6_address_mode: slaac, dhcpv6-stateless, dhcpv6-stateful or "".
	IPv6AddressMode string `json:"ipv6AddressMode,omitempty"`
}

// Route is a host route of a subnet.
type Route struct {
	Destination netip.Prefix `json:"destination"`
	NextHop     netip.Addr   `json:"nextHop"`
}

// CIDRs returns the network's subnet prefixes, IPv4 first.
func (n Network) CIDRs() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(n.Subnets))
	for _, s := range n.Subnets {
		if s.CIDR.IsValid() {
			out = append(out, s.CIDR)
		}
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if a.Addr().Is4() != b.Addr().Is4() {
			if a.Addr().Is4() {
				return -1
			}
			return 1
		}
		return a.Addr().Compare(b.Addr())
	})
	return out
}

// SecurityGroup is a Neutron security group with its rules.
type SecurityGroup struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	ProjectID   string `json:"projectID,omitempty"`
	Rules       []Rule `json:"rules"`
}

// Rule is one security group rule. Empty Protocol, zero ports and empty RemoteIPPrefix mean "any".
type Rule struct {
	ID             string `json:"id"`
	Direction      string `json:"direction"` // ingress or egress
	EtherType      string `json:"ethertype"` // IPv4 or IPv6
	Protocol       string `json:"protocol,omitempty"`
	PortMin        int    `json:"portMin,omitempty"`
	PortMax        int    `json:"portMax,omitempty"`
	RemoteIPPrefix string `json:"remoteIPPrefix,omitempty"`
	RemoteGroupID  string `json:"remoteGroupID,omitempty"`
}

// Port is a Neutron port: a server's (device_id) attachment to a network.
type Port struct {
	ID             string       `json:"id"`
	Name           string       `json:"name,omitempty"`
	NetworkID      string       `json:"networkID"`
	DeviceID       string       `json:"deviceID,omitempty"`
	DeviceOwner    string       `json:"deviceOwner,omitempty"`
	Status         string       `json:"status,omitempty"`
	FixedIPs       []netip.Addr `json:"fixedIPs,omitempty"`
	SecurityGroups []string     `json:"securityGroups,omitempty"`
	PortSecurity   bool         `json:"portSecurity"`
	Tags           []string     `json:"tags,omitempty"`
	// AllowedAddressPairs are the addresses (or CIDRs) the port may also answer for: the API
	// and ingress VIPs on a machine's primary port, so that keepalived can move them to it.
	AllowedAddressPairs []string `json:"allowedAddressPairs,omitempty"`
}

// ResourceKind names what an ID refers to in Neutron.
type ResourceKind string

const (
	KindNetwork       ResourceKind = "network"
	KindSecurityGroup ResourceKind = "security group"
	KindSubnet        ResourceKind = "subnet"
	KindPort          ResourceKind = "port"
)

// PortFilter selects ports; empty fields do not filter.
type PortFilter struct {
	NetworkIDs []string
	DeviceIDs  []string
}

// wire types: Neutron's JSON.
type wireNetwork struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	ProjectID string   `json:"project_id"`
	TenantID  string   `json:"tenant_id"`
	Status    string   `json:"status"`
	Shared    bool     `json:"shared"`
	External  bool     `json:"router:external"`
	Subnets   []string `json:"subnets"`
	Tags      []string `json:"tags"`
	// PortSecurity is absent when the port_security extension is off.
	PortSecurity *bool `json:"port_security_enabled"`
}

type wireSubnet struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	NetworkID      string   `json:"network_id"`
	CIDR           string   `json:"cidr"`
	IPVersion      int      `json:"ip_version"`
	EnableDHCP     *bool    `json:"enable_dhcp"`
	GatewayIP      *string  `json:"gateway_ip"`
	DNSNameservers []string `json:"dns_nameservers"`
	HostRoutes     []struct {
		Destination string `json:"destination"`
		NextHop     string `json:"nexthop"`
	} `json:"host_routes"`
	IPv6RAMode      *string `json:"ipv6_ra_mode"`
	IPv6AddressMode *string `json:"ipv6_address_mode"`
}

type wireSecurityGroup struct {
	ID          string     `json:"id"`
	Name        string     `json:"name"`
	Description string     `json:"description"`
	ProjectID   string     `json:"project_id"`
	TenantID    string     `json:"tenant_id"`
	Rules       []wireRule `json:"security_group_rules"`
}

type wireRule struct {
	ID             string `json:"id"`
	Direction      string `json:"direction"`
	EtherType      string `json:"ethertype"`
	Protocol       string `json:"protocol"`
	PortRangeMin   *int   `json:"port_range_min"`
	PortRangeMax   *int   `json:"port_range_max"`
	RemoteIPPrefix string `json:"remote_ip_prefix"`
	RemoteGroupID  string `json:"remote_group_id"`
}

type wirePort struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	NetworkID   string `json:"network_id"`
	DeviceID    string `json:"device_id"`
	DeviceOwner string `json:"device_owner"`
	Status      string `json:"status"`
	FixedIPs    []struct {
		IPAddress string `json:"ip_address"`
	} `json:"fixed_ips"`
	SecurityGroups []string `json:"security_groups"`
	PortSecurity   *bool    `json:"port_security_enabled"`
	Tags           []string `json:"tags"`
	Pairs          []struct {
		IPAddress string `json:"ip_address"`
	} `json:"allowed_address_pairs"`
}

// Fields asked of Neutron, to keep answers small on clouds with thousands of networks.
var (
	networkFields = []string{"id", "name", "project_id", "status", "shared", "router:external", "subnets", "tags", "port_security_enabled"}
	subnetFields  = []string{"id", "name", "network_id", "cidr", "ip_version", "enable_dhcp", "gateway_ip", "dns_nameservers", "host_routes", "ipv6_ra_mode", "ipv6_address_mode"}
	portFields    = []string{"id", "name", "network_id", "device_id", "device_owner", "status", "fixed_ips", "security_groups", "port_security_enabled", "tags", "allowed_address_pairs"}
)

func fieldsQuery(fields []string) url.Values {
	return url.Values{"fields": slices.Clone(fields)}
}

func (c *Client) neutronClient() (*gophercloud.ServiceClient, error) {
	return c.serviceClient(&c.neutron, "network", "Neutron", func(endpoint string) string {
		if strings.HasSuffix(strings.TrimSuffix(endpoint, "/"), "/v2.0") {
			return endpoint
		}
		return endpoint + "v2.0/"
	})
}

// serviceClient returns *slot, made on first use from the catalog's endpoint of service type
// typ (service names it in errors); base gives the resources' base URL from the endpoint.
func (c *Client) serviceClient(slot **gophercloud.ServiceClient, typ, service string, base func(endpoint string) string) (*gophercloud.ServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *slot != nil {
		return *slot, nil
	}
	endpoint, err := c.endpoint(typ)
	if err != nil {
		return nil, &Error{Kind: KindNoEndpoint, Service: service, Message: c.noEndpointMessage(service), err: err}
	}
	*slot = &gophercloud.ServiceClient{ProviderClient: c.provider, Endpoint: endpoint, ResourceBase: base(endpoint), Type: typ}
	return *slot, nil
}

// Networks returns the networks the project can see (its own, shared and external ones) with
// their subnets, sorted by name. With ids, only those networks; IDs that do not exist are
// simply absent (compare, or use Identify to say what they are instead).
// Requests: one per page of networks plus one per page of subnets (per 50 IDs when filtered).
func (c *Client) Networks(ctx context.Context, ids ...string) ([]Network, error) {
	cl := call{service: "Neutron", what: "listing networks"}
	var wires []wireNetwork
	var subnets []wireSubnet
	if len(ids) == 0 {
		// Two independent lists: asked at the same time, so a cloud with several API workers
		// answers in the time of the longer one.
		var serr error
		done := make(chan struct{})
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			defer close(done)
			subnets, serr = neutronList[wireSubnet](sctx, c, call{service: "Neutron", what: "listing subnets"}, "subnets", "subnets", fieldsQuery(subnetFields))
		}()
		var err error
		if wires, err = neutronList[wireNetwork](ctx, c, cl, "networks", "networks", fieldsQuery(networkFields)); err != nil {
			cancel()
		}
		<-done
		if err = firstRealError(err, serr); err != nil {
			return nil, err
		}
	} else {
		for _, chunk := range chunks(dedupe(ids), idChunk) {
			q := fieldsQuery(networkFields)
			q["id"] = chunk
			w, err := neutronList[wireNetwork](ctx, c, cl, "networks", "networks", q)
			if err != nil {
				return nil, err
			}
			wires = append(wires, w...)
			if len(w) == 0 {
				continue
			}
			sq := fieldsQuery(subnetFields)
			for _, n := range w {
				sq.Add("network_id", n.ID)
			}
			s, err := neutronList[wireSubnet](ctx, c, call{service: "Neutron", what: "listing subnets"}, "subnets", "subnets", sq)
			if err != nil {
				return nil, err
			}
			subnets = append(subnets, s...)
		}
	}
	return joinSubnets(wires, subnets), nil
}

// Network returns one network with its subnets; a missing ID is a KindNotFound error.
func (c *Client) Network(ctx context.Context, id string) (Network, error) {
	nets, err := c.Networks(ctx, id)
	if err != nil {
		return Network{}, err
	}
	if len(nets) == 0 {
		return Network{}, c.notFound("Neutron", "getting network "+id, "network", id)
	}
	return nets[0], nil
}

func (c *Client) notFound(service, what, kind, id string) error {
	return &Error{Kind: KindNotFound, Service: service, Message: c.redact(
		what + ": there is no " + kind + " with ID " + id + " (or project " + c.projectLabel() + " cannot see it).")}
}

func joinSubnets(wires []wireNetwork, subnets []wireSubnet) []Network {
	byNet := map[string][]Subnet{}
	for _, s := range subnets {
		p, err := netip.ParsePrefix(s.CIDR)
		if err != nil {
			continue
		}
		sub := Subnet{ID: s.ID, Name: s.Name, NetworkID: s.NetworkID, CIDR: p.Masked(), IPVersion: s.IPVersion,
			DHCP: s.EnableDHCP == nil || *s.EnableDHCP, DNS: s.DNSNameservers}
		if s.GatewayIP != nil {
			sub.Gateway, _ = netip.ParseAddr(*s.GatewayIP)
		}
		if s.IPv6RAMode != nil {
			sub.IPv6RAMode = *s.IPv6RAMode
		}
		if s.IPv6AddressMode != nil {
			sub.IPv6AddressMode = *s.IPv6AddressMode
		}
		for _, r := range s.HostRoutes {
			dst, derr := netip.ParsePrefix(r.Destination)
			hop, herr := netip.ParseAddr(r.NextHop)
			if derr == nil && herr == nil {
				sub.HostRoutes = append(sub.HostRoutes, Route{Destination: dst, NextHop: hop})
			}
		}
		byNet[s.NetworkID] = append(byNet[s.NetworkID], sub)
	}
	out := make([]Network, 0, len(wires))
	seen := map[string]bool{}
	for _, w := range wires {
		if seen[w.ID] {
			continue
		}
		seen[w.ID] = true
		subs := byNet[w.ID]
		slices.SortFunc(subs, func(a, b Subnet) int {
			return cmp.Or(cmp.Compare(a.IPVersion, b.IPVersion), a.CIDR.Addr().Compare(b.CIDR.Addr()))
		})
		out = append(out, Network{
			ID: w.ID, Name: w.Name, ProjectID: coalesce(w.ProjectID, w.TenantID), Status: w.Status,
			Shared: w.Shared, External: w.External, Subnets: subs, Tags: w.Tags, PortSecurity: w.PortSecurity,
		})
	}
	slices.SortFunc(out, func(a, b Network) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	return out
}

// SecurityGroups returns security groups with their rules, sorted by name: all the project can
// see, or only ids (missing IDs are absent). One request per page (per 50 IDs).
func (c *Client) SecurityGroups(ctx context.Context, ids ...string) ([]SecurityGroup, error) {
	cl := call{service: "Neutron", what: "listing security groups"}
	var wires []wireSecurityGroup
	if len(ids) == 0 {
		var err error
		if wires, err = neutronList[wireSecurityGroup](ctx, c, cl, "security-groups", "security_groups", nil); err != nil {
			return nil, err
		}
	} else {
		for _, chunk := range chunks(dedupe(ids), idChunk) {
			w, err := neutronList[wireSecurityGroup](ctx, c, cl, "security-groups", "security_groups", url.Values{"id": chunk})
			if err != nil {
				return nil, err
			}
			wires = append(wires, w...)
		}
	}
	out := make([]SecurityGroup, 0, len(wires))
	for _, w := range wires {
		sg := SecurityGroup{ID: w.ID, Name: w.Name, Description: w.Description, ProjectID: coalesce(w.ProjectID, w.TenantID)}
		for _, r := range w.Rules {
			rule := Rule{ID: r.ID, Direction: r.Direction, EtherType: r.EtherType, Protocol: strings.ToLower(r.Protocol),
				RemoteIPPrefix: r.RemoteIPPrefix, RemoteGroupID: r.RemoteGroupID}
			if r.PortRangeMin != nil {
				rule.PortMin = *r.PortRangeMin
			}
			if r.PortRangeMax != nil {
				rule.PortMax = *r.PortRangeMax
			}
			sg.Rules = append(sg.Rules, rule)
		}
		slices.SortFunc(sg.Rules, func(a, b Rule) int {
			return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.EtherType, b.EtherType),
				cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.PortMin, b.PortMin), cmp.Compare(a.ID, b.ID))
		})
		out = append(out, sg)
	}
	slices.SortFunc(out, func(a, b SecurityGroup) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// SecurityGroup returns one security group; a missing ID is a KindNotFound error.
func (c *Client) SecurityGroup(ctx context.Context, id string) (SecurityGroup, error) {
	sgs, err := c.SecurityGroups(ctx, id)
	if err != nil {
		return SecurityGroup{}, err
	}
	if len(sgs) == 0 {
		return SecurityGroup{}, c.notFound("Neutron", "getting security group "+id, "security group", id)
	}
	return sgs[0], nil
}

// Ports returns the ports matching f, sorted by network, device and name. One request per page
// (per 50 device IDs).
func (c *Client) Ports(ctx context.Context, f PortFilter) ([]Port, error) {
	cl := call{service: "Neutron", what: "listing ports"}
	base := fieldsQuery(portFields)
	if len(f.NetworkIDs) > 0 {
		base["network_id"] = dedupe(f.NetworkIDs)
	}
	var wires []wirePort
	if len(f.DeviceIDs) == 0 {
		var err error
		if wires, err = neutronList[wirePort](ctx, c, cl, "ports", "ports", base); err != nil {
			return nil, err
		}
	} else {
		for _, chunk := range chunks(dedupe(f.DeviceIDs), idChunk) {
			q := url.Values{}
			for k, v := range base {
				q[k] = v
			}
			q["device_id"] = chunk
			w, err := neutronList[wirePort](ctx, c, cl, "ports", "ports", q)
			if err != nil {
				return nil, err
			}
			wires = append(wires, w...)
		}
	}
	out := make([]Port, 0, len(wires))
	for _, w := range wires {
		p := Port{ID: w.ID, Name: w.Name, NetworkID: w.NetworkID, DeviceID: w.DeviceID, DeviceOwner: w.DeviceOwner,
			Status: w.Status, SecurityGroups: w.SecurityGroups, PortSecurity: w.PortSecurity == nil || *w.PortSecurity, Tags: w.Tags}
		for _, ip := range w.FixedIPs {
			if a, err := netip.ParseAddr(ip.IPAddress); err == nil {
				p.FixedIPs = append(p.FixedIPs, a)
			}
		}
		for _, pair := range w.Pairs {
			p.AllowedAddressPairs = append(p.AllowedAddressPairs, pair.IPAddress)
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Port) int {
		return cmp.Or(cmp.Compare(a.NetworkID, b.NetworkID), cmp.Compare(a.DeviceID, b.DeviceID), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// ServerPorts returns the ports of one server (device_id), on every network.
func (c *Client) ServerPorts(ctx context.Context, serverID string) ([]Port, error) {
	return c.Ports(ctx, PortFilter{DeviceIDs: []string{serverID}})
}

// Identify says what each ID is: a network, a security group, a subnet or a port. IDs found
// nowhere are absent from the map. This is how "a security group ID given as a network" is
// caught. Requests: one per kind still unresolved (per 50 IDs).
func (c *Client) Identify(ctx context.Context, ids ...string) (map[string]ResourceKind, error) {
	out := map[string]ResourceKind{}
	rest := dedupe(ids)
	lookups := []struct {
		kind      ResourceKind
		path, key string
	}{
		{KindNetwork, "networks", "networks"},
		{KindSecurityGroup, "security-groups", "security_groups"},
		{KindSubnet, "subnets", "subnets"},
		{KindPort, "ports", "ports"},
	}
	for _, l := range lookups {
		if len(rest) == 0 {
			break
		}
		cl := call{service: "Neutron", what: "looking up " + string(l.kind) + " IDs"}
		for _, chunk := range chunks(rest, idChunk) {
			found, err := neutronList[struct {
				ID string `json:"id"`
			}](ctx, c, cl, l.path, l.key, url.Values{"id": chunk, "fields": {"id"}})
			if err != nil {
				return nil, err
			}
			for _, f := range found {
				out[f.ID] = l.kind
			}
		}
		rest = slices.DeleteFunc(rest, func(id string) bool { _, ok := out[id]; return ok })
	}
	return out, nil
}

// Label names the network in messages: "name" (ID), or the ID alone when it has no name.
func (n Network) Label() string {
	if n.Name == "" {
		return n.ID
	}
	return fmt.Sprintf("%q (%s)", n.Name, n.ID)
}

// Ref names the network as problems and findings do: name (ID), or the ID alone.
func (n Network) Ref() string { return nameAndID(n.Name, n.ID) }

// Ref names the subnet as problems and findings do: name (ID), or the ID alone.
func (s Subnet) Ref() string { return nameAndID(s.Name, s.ID) }

func nameAndID(name, id string) string {
	if name == "" {
		return id
	}
	return name + " (" + id + ")"
}
