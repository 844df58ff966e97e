package openstack

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/gophercloud/gophercloud/v2"
)

// SubnetUpdate changes what a subnet's DHCP server hands out, so that a machine's second NIC on
// it takes an address and nothing else: no default route, no DNS server. Fields left false are
// not touched.
type SubnetUpdate struct {
	SubnetID string
	// NoGateway sets gateway_ip to null: DHCP hands out no default route through the subnet.
	NoGateway bool
	// DropDefaultRoutes removes the host routes to 0.0.0.0/0 and ::/0, keeping the others.
	DropDefaultRoutes bool
	// NoDNS sets dns_nameservers to ["0.0.0.0"]: DHCP announces no DNS server (an empty list
	// would make the DHCP server announce itself).
	NoDNS bool
}

// Empty tells whether u changes nothing.
func (u SubnetUpdate) Empty() bool { return !u.NoGateway && !u.DropDefaultRoutes && !u.NoDNS }

// updateSubnetFields are read before the update: the host routes to keep, and the owner named
// when the project may see the subnet but not change it.
var updateSubnetFields = append(append([]string(nil), subnetFields...), "project_id")

// UpdateSubnet applies u and returns the subnet as Neutron describes it afterwards. Only the
// subnet's owner (or an administrator) may change it: when the project can see the subnet but
// Neutron refuses the change (403, or 404 for a subnet of another project, e.g. of a shared
// network), the error is of KindForbidden and names the owner; a subnet the project cannot see
// at all is KindNotFound.
// Requests: one GET (the subnet as it is), one PUT.
func (c *Client) UpdateSubnet(ctx context.Context, u SubnetUpdate) (Subnet, error) {
	sc, err := c.neutronClient()
	if err != nil {
		return Subnet{}, err
	}
	var cur struct {
		Subnet struct {
			wireSubnet
			ProjectID string `json:"project_id"`
		} `json:"subnet"`
	}
	read := call{service: "Neutron", what: "reading subnet " + u.SubnetID, id: u.SubnetID, idKind: "subnet"}
	if _, err := sc.Get(ctx, sc.ServiceURL("subnets", u.SubnetID)+"?"+fieldsQuery(updateSubnetFields).Encode(), &cur, nil); err != nil {
		return Subnet{}, c.explain(read, err)
	}
	if u.Empty() {
		return subnetOf(cur.Subnet.wireSubnet), nil
	}
	body := map[string]any{}
	if u.NoGateway {
		body["gateway_ip"] = nil
	}
	if u.NoDNS {
		body["dns_nameservers"] = []string{dnsNone}
	}
	if u.DropDefaultRoutes {
		// Neutron replaces the whole list: the routes that stay are sent again.
		keep := []map[string]string{}
		for _, r := range cur.Subnet.HostRoutes {
			if p, err := netip.ParsePrefix(r.Destination); err == nil && p.Bits() == 0 {
				continue
			}
			keep = append(keep, map[string]string{"destination": r.Destination, "nexthop": r.NextHop})
		}
		body["host_routes"] = keep
	}
	name := cur.Subnet.Name
	if name == "" {
		name = u.SubnetID
	} else {
		name += " (" + u.SubnetID + ")"
	}
	var out struct {
		Subnet wireSubnet `json:"subnet"`
	}
	_, err = sc.Put(ctx, sc.ServiceURL("subnets", u.SubnetID), map[string]any{"subnet": body}, &out, &gophercloud.RequestOpts{OkCodes: []int{200}})
	if err != nil {
		return Subnet{}, c.refusedUpdate(call{service: "Neutron", what: "updating subnet " + name}, err, cur.Subnet.ProjectID)
	}
	return subnetOf(out.Subnet), nil
}

// dnsNone is the dns_nameservers entry that makes Neutron's DHCP announce no DNS server.
const dnsNone = "0.0.0.0"

// refusedUpdate words a failed update of a subnet the project can read. Neutron answers 404
// rather than 403 when the subnet belongs to another project (it does not tell strangers what
// exists): either way the project may not change it.
func (c *Client) refusedUpdate(cl call, err error, owner string) error {
	code, ok := statusOf(err)
	switch {
	case ok && (code == http.StatusForbidden || code == http.StatusNotFound):
		whose := "it belongs to another project"
		if owner != "" && owner != c.projectID {
			whose = "it belongs to project " + owner
		} else if owner != "" {
			whose = "the cloud's policy keeps this change for administrators"
		}
		return &Error{Kind: KindForbidden, Service: cl.service, err: err, Message: c.redact(fmt.Sprintf(
			"%s: project %s can see the subnet but may not change it (Neutron answered %d %s): %s; its owner or the cloud's administrator can make the change",
			cl.what, c.projectLabel(), code, http.StatusText(code), whose))}
	case ok && code == http.StatusConflict:
		return &Error{Kind: KindServer, Service: cl.service, err: err, Message: c.redact(fmt.Sprintf(
			"%s: Neutron refused the change (409 Conflict), most often because a router's interface holds the subnet's gateway address: remove that interface first (openstack router remove subnet ROUTER SUBNET)",
			cl.what))}
	}
	return c.explain(cl, err)
}

// subnetOf reads one subnet of Neutron's answer as Networks does.
func subnetOf(w wireSubnet) Subnet {
	nets := joinSubnets([]wireNetwork{{ID: w.NetworkID}}, []wireSubnet{w})
	if len(nets) == 0 || len(nets[0].Subnets) == 0 {
		return Subnet{ID: w.ID, Name: w.Name, NetworkID: w.NetworkID}
	}
	return nets[0].Subnets[0]
}
