package capireal

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// cloudClients are the Nova, Neutron and Glance clients of the cloud the controllers act on, as
// the same user (the one whose credentials the identityRef Secret holds).
type cloudClients struct {
	compute, network, image *gophercloud.ServiceClient
}

// connect authenticates as the demo user of the loopback cloud (testenv.Connect: the
// clouds.yaml that testenv.NewCloud points OS_CLIENT_CONFIG_FILE at).
func connect(ctx context.Context) (*cloudClients, error) {
	provider, eo, err := testenv.Connect(ctx, testenv.CloudDemo)
	if err != nil {
		return nil, err
	}
	c := &cloudClients{}
	if c.compute, err = openstack.NewComputeV2(provider, eo); err != nil {
		return nil, fmt.Errorf("the loopback cloud has no compute endpoint (Nova): %w", err)
	}
	if c.network, err = openstack.NewNetworkV2(provider, eo); err != nil {
		return nil, fmt.Errorf("the loopback cloud has no network endpoint (Neutron): %w", err)
	}
	if c.image, err = openstack.NewImageV2(provider, eo); err != nil {
		return nil, fmt.Errorf("the loopback cloud has no image endpoint (Glance): %w", err)
	}
	return c, nil
}

func (c *cloudClients) deleteImage(ctx context.Context, id string) error {
	err := images.Delete(ctx, c.image, id).ExtractErr()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil
	}
	return err
}

// serversNamed lists the servers whose name starts with prefix (Nova filters by regular
// expression).
func (c *cloudClients) serversNamed(ctx context.Context, prefix string) ([]servers.Server, error) {
	pages, err := servers.List(c.compute, servers.ListOpts{Name: "^" + prefix}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing Nova servers named %s*: %w", prefix, err)
	}
	all, err := servers.ExtractServers(pages)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(s servers.Server) bool { return !strings.HasPrefix(s.Name, prefix) }), nil
}

// Port is a Neutron port of a server, with what the tests assert on.
type Port struct {
	ID, NetworkID       string
	SecurityGroups      []string
	AllowedAddressPairs []ports.AddressPair
	PortSecurity        *bool
	FixedIPs            []ports.IP
}

// portsOf lists the ports whose device is the server.
func (c *cloudClients) portsOf(ctx context.Context, serverID string) ([]Port, error) {
	pages, err := ports.List(c.network, ports.ListOpts{DeviceID: serverID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the ports of server %s: %w", serverID, err)
	}
	all, err := ports.ExtractPorts(pages)
	if err != nil {
		return nil, err
	}
	// port_security_enabled (the port security extension) is read on its own: ports.Port has
	// an UnmarshalJSON of its own, which a struct embedding it would take over whole.
	var security []struct {
		ID                  string `json:"id"`
		PortSecurityEnabled *bool  `json:"port_security_enabled"`
	}
	if err := ports.ExtractPortsInto(pages, &security); err != nil {
		return nil, err
	}
	out := make([]Port, 0, len(all))
	for i, p := range all {
		if security[i].ID != p.ID {
			return nil, fmt.Errorf("the ports of server %s read twice in different orders", serverID)
		}
		out = append(out, Port{ID: p.ID, NetworkID: p.NetworkID, SecurityGroups: p.SecurityGroups, AllowedAddressPairs: p.AllowedAddressPairs,
			PortSecurity: security[i].PortSecurityEnabled, FixedIPs: p.FixedIPs})
	}
	return out, nil
}

// portsOnNetwork lists every port on a network whose description is desc ("" for any).
func (c *cloudClients) portsOnNetwork(ctx context.Context, networkID, desc string) ([]ports.Port, error) {
	pages, err := ports.List(c.network, ports.ListOpts{NetworkID: networkID, Description: desc}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the ports on network %s: %w", networkID, err)
	}
	return ports.ExtractPorts(pages)
}

// networkStatus is what CAPO's OpenStackCluster reports of a network: its ID, name and subnets.
func (c *cloudClients) networkStatus(ctx context.Context, id string) (map[string]any, error) {
	n, err := networks.Get(ctx, c.network, id).Extract()
	if err != nil {
		return nil, fmt.Errorf("reading network %s: %w", id, err)
	}
	var subs []any
	for _, sid := range n.Subnets {
		s, err := subnets.Get(ctx, c.network, sid).Extract()
		if err != nil {
			return nil, fmt.Errorf("reading subnet %s of network %s: %w", sid, id, err)
		}
		subs = append(subs, map[string]any{"id": s.ID, "name": s.Name, "cidr": s.CIDR})
	}
	return map[string]any{"id": n.ID, "name": n.Name, "subnets": subs}, nil
}

func (c *cloudClients) deleteServer(ctx context.Context, id string) error {
	err := servers.Delete(ctx, c.compute, id).ExtractErr()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil
	}
	return err
}
