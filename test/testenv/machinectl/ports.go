package machinectl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"

	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/machinesets/attachment"
)

// PortMaker creates and deletes the Neutron ports of the simulated servers, so that what the
// cloud says about a machine's networks (ports by device_id) is what its providerSpec says,
// as with the real machine actuator.
type PortMaker interface {
	// CreatePorts gives the server a port on each network, named after the machine, and
	// returns the NICs its ports make: one per fixed IP, with what the subnet's DHCP gives it.
	CreatePorts(ctx context.Context, machine, serverID string, networkIDs []string) ([]NIC, error)
	// DeletePorts deletes every port of the server.
	DeletePorts(ctx context.Context, serverID string) error
}

// networksOf returns the Neutron IDs of the networks a Machine's providerSpec names by ID
// (networks[] uuid or filter.id, ports[] networkID). Networks found by a filter on names or
// tags (the installer's primary network) get no port: the stand-in has no cloud-side cluster.
func networksOf(m *machinev1beta1.Machine) []string {
	if m.Spec.ProviderSpec.Value == nil {
		return nil
	}
	spec, err := attachment.DecodeSpec(m.Spec.ProviderSpec.Value.Raw)
	if err != nil {
		return nil
	}
	var ids []string
	add := func(id string) {
		for _, x := range ids {
			if neutronid.Equal(x, id) {
				return
			}
		}
		if id != "" {
			// Neutron on MySQL finds an ID in any case; the loopback one (SQLite) only in
			// lower case.
			ids = append(ids, neutronid.Key(id))
		}
	}
	for _, n := range spec.Networks {
		add(n.UUID)
		if n.UUID == "" {
			add(n.Filter.ID)
		}
	}
	for _, p := range spec.Ports {
		add(p.NetworkID)
	}
	return ids
}

// NeutronPorts is a PortMaker on a real Neutron: the cloud named in a clouds.yaml (the loopback
// cloud of the tests and the sandbox).
func NeutronPorts(ctx context.Context, cloudsFile, cloud string) (PortMaker, error) {
	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithLocations(cloudsFile), clouds.WithCloudName(cloud))
	if err != nil {
		return nil, fmt.Errorf("clouds.yaml %s, cloud %s: %w", cloudsFile, cloud, err)
	}
	provider, err := openstack.NewClient(ao.IdentityEndpoint)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		provider.HTTPClient.Transport = &http.Transport{TLSClientConfig: tlsConfig}
	}
	if err := openstack.Authenticate(ctx, provider, ao); err != nil {
		return nil, fmt.Errorf("authenticating to cloud %s: %w", cloud, err)
	}
	nc, err := openstack.NewNetworkV2(provider, eo)
	if err != nil {
		return nil, err
	}
	return neutronPorts{nc}, nil
}

type neutronPorts struct{ nc *gophercloud.ServiceClient }

func (n neutronPorts) CreatePorts(ctx context.Context, machine, serverID string, networkIDs []string) ([]NIC, error) {
	existing, err := n.list(ctx, serverID)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, p := range existing {
		have[p.NetworkID] = true
	}
	for i, id := range networkIDs {
		if have[id] {
			continue
		}
		p, err := ports.Create(ctx, n.nc, ports.CreateOpts{
			NetworkID: id, Name: fmt.Sprintf("%s-%d", machine, i), DeviceID: serverID, DeviceOwner: "compute:nova",
		}).Extract()
		if err != nil {
			if msg, ok := noAddresses(err); ok {
				return nil, &NoAddressError{Network: id, Message: msg}
			}
			return nil, fmt.Errorf("creating the port of server %s (Machine %s) on network %s: %w", serverID, machine, id, err)
		}
		existing = append(existing, *p)
	}
	var nics []NIC
	for _, p := range existing {
		network, err := networks.Get(ctx, n.nc, p.NetworkID).Extract()
		if err != nil {
			return nil, fmt.Errorf("reading network %s of port %s: %w", p.NetworkID, p.ID, err)
		}
		for _, ip := range p.FixedIPs {
			subnet, err := subnets.Get(ctx, n.nc, ip.SubnetID).Extract()
			if err != nil {
				return nil, fmt.Errorf("reading subnet %s of port %s: %w", ip.SubnetID, p.ID, err)
			}
			nic, err := NICOf(network.Name, ip.IPAddress, subnet)
			if err != nil {
				return nil, fmt.Errorf("port %s: %w", p.ID, err)
			}
			nics = append(nics, nic)
		}
	}
	return nics, nil
}

// NICOf is the NIC a fixed IP on subnet makes: what the subnet's DHCP server hands out.
func NICOf(network, address string, subnet *subnets.Subnet) (NIC, error) {
	addr, err := netip.ParseAddr(address)
	if err != nil {
		return NIC{}, fmt.Errorf("fixed IP %q: %w", address, err)
	}
	prefix, err := netip.ParsePrefix(subnet.CIDR)
	if err != nil {
		return NIC{}, fmt.Errorf("subnet %s CIDR %q: %w", subnet.ID, subnet.CIDR, err)
	}
	nic := NIC{Network: network, Addr: addr, Subnet: prefix, NoDHCP: !subnet.EnableDHCP}
	nic.DefaultRoute = subnet.EnableDHCP && subnet.GatewayIP != ""
	for _, r := range subnet.HostRoutes {
		if d, err := netip.ParsePrefix(r.DestinationCIDR); err == nil && d.Bits() == 0 && subnet.EnableDHCP {
			nic.DefaultRoute = true
		}
	}
	return nic, nil
}

func (n neutronPorts) DeletePorts(ctx context.Context, serverID string) error {
	existing, err := n.list(ctx, serverID)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range existing {
		if err := ports.Delete(ctx, n.nc, p.ID).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
			errs = append(errs, fmt.Errorf("deleting port %s of server %s: %w", p.ID, serverID, err))
		}
	}
	return errors.Join(errs...)
}

func (n neutronPorts) list(ctx context.Context, serverID string) ([]ports.Port, error) {
	pages, err := ports.List(n.nc, ports.ListOpts{DeviceID: serverID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the ports of server %s: %w", serverID, err)
	}
	return ports.ExtractPorts(pages)
}

// NoAddressError is Neutron's refusal of a port for lack of addresses (409
// IpAddressGenerationFailure: "No more IP addresses available on network ..."): the real
// machine actuator fails such a Machine, as its server cannot be made.
type NoAddressError struct {
	Network string
	// Message is Neutron's own.
	Message string
}

func (e *NoAddressError) Error() string {
	return fmt.Sprintf("creating the port on network %s: %s", e.Network, e.Message)
}

// noAddresses tells Neutron's IpAddressGenerationFailure, with its message.
func noAddresses(err error) (string, bool) {
	var unexpected gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &unexpected) || unexpected.Actual != http.StatusConflict {
		return "", false
	}
	var body struct {
		NeutronError struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"NeutronError"`
	}
	if json.Unmarshal(unexpected.Body, &body) != nil || body.NeutronError.Type != "IpAddressGenerationFailure" {
		return "", false
	}
	return body.NeutronError.Message, true
}
