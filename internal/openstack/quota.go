package openstack

import (
	"context"
	"fmt"
	"strings"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/quotasets"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/quotas"
)

// ServerNeeds is what one more server takes of the project's quotas: one instance, its
// flavor's cores and RAM, and a port on each network it attaches.
type ServerNeeds struct {
	// Flavor names the server's flavor (name or ID), for its cores and RAM.
	Flavor string
	// Ports is how many ports the server gets.
	Ports int
}

// QuotaUse is one quota of the project: Limit (-1: none), InUse and Reserved, and what one more
// server Needs of it.
type QuotaUse struct {
	Service  string `json:"service"`
	Resource string `json:"resource"`
	Limit    int    `json:"limit"`
	InUse    int    `json:"inUse"`
	Reserved int    `json:"reserved"`
	Needs    int    `json:"needs"`
}

// Short reports whether the quota leaves less than Needs.
func (q QuotaUse) Short() bool {
	return q.Limit >= 0 && q.InUse+q.Reserved+q.Needs > q.Limit
}

func (q QuotaUse) String() string {
	return fmt.Sprintf("%s %s: %d of %d in use (%d reserved), one more server needs %d", q.Service, q.Resource, q.InUse, q.Limit, q.Reserved, q.Needs)
}

// QuotaShortfall is the project's quotas one more server would exceed.
type QuotaShortfall struct {
	Project string
	Short   []QuotaUse
}

func (e *QuotaShortfall) Error() string {
	parts := make([]string, len(e.Short))
	for i, q := range e.Short {
		parts[i] = q.String()
	}
	return fmt.Sprintf("the quotas of project %s leave no room for one more server: %s", e.Project, strings.Join(parts, "; "))
}

// RoomForServer reads the project's Nova quotas (instances, cores, RAM) and its Neutron port
// quota, and the flavor's size: a *QuotaShortfall when one more server with n's ports would
// exceed any, nil when it fits. Requests: the flavor, Nova's and Neutron's quota details.
func (c *Client) RoomForServer(ctx context.Context, n ServerNeeds) ([]QuotaUse, error) {
	nova, err := c.computeClient()
	if err != nil {
		return nil, err
	}
	flavor, err := c.flavor(ctx, nova, n.Flavor)
	if err != nil {
		return nil, err
	}
	set, err := quotasets.GetDetail(ctx, nova, c.projectID).Extract()
	if err != nil {
		return nil, c.explain(call{service: "Nova", what: "reading the compute quotas of project " + c.projectID}, err)
	}
	neutron, err := c.neutronClient()
	if err != nil {
		return nil, err
	}
	nq, err := quotas.GetDetail(ctx, neutron, c.projectID).Extract()
	if err != nil {
		return nil, c.explain(call{service: "Neutron", what: "reading the network quotas of project " + c.projectID}, err)
	}
	use := []QuotaUse{
		{Service: "Nova", Resource: "instances", Limit: set.Instances.Limit, InUse: set.Instances.InUse, Reserved: set.Instances.Reserved, Needs: 1},
		{Service: "Nova", Resource: "cores", Limit: set.Cores.Limit, InUse: set.Cores.InUse, Reserved: set.Cores.Reserved, Needs: flavor.VCPUs},
		{Service: "Nova", Resource: "ram (MiB)", Limit: set.RAM.Limit, InUse: set.RAM.InUse, Reserved: set.RAM.Reserved, Needs: flavor.RAM},
		{Service: "Neutron", Resource: "ports", Limit: nq.Port.Limit, InUse: nq.Port.Used, Reserved: nq.Port.Reserved, Needs: n.Ports},
	}
	var short []QuotaUse
	for _, q := range use {
		if q.Short() {
			short = append(short, q)
		}
	}
	if len(short) > 0 {
		return use, &QuotaShortfall{Project: c.projectLabel(), Short: short}
	}
	return use, nil
}

// flavor finds a flavor by ID, else by name among those the project sees.
func (c *Client) flavor(ctx context.Context, nova *gophercloud.ServiceClient, ref string) (*flavors.Flavor, error) {
	if f, err := flavors.Get(ctx, nova, ref).Extract(); err == nil {
		return f, nil
	}
	pages, err := flavors.ListDetail(nova, flavors.ListOpts{AccessType: flavors.AllAccess}).AllPages(ctx)
	if err != nil {
		return nil, c.explain(call{service: "Nova", what: "listing flavors"}, err)
	}
	all, err := flavors.ExtractFlavors(pages)
	if err != nil {
		return nil, c.explain(call{service: "Nova", what: "listing flavors"}, err)
	}
	for i := range all {
		if all[i].Name == ref {
			return &all[i], nil
		}
	}
	return nil, &Error{Kind: KindNotFound, Service: "Nova", Message: fmt.Sprintf("flavor %q: no flavor of that name or ID in cloud %q", ref, c.cloud)}
}

func (c *Client) computeClient() (*gophercloud.ServiceClient, error) {
	return c.serviceClient(&c.nova, "compute", "Nova", func(endpoint string) string { return endpoint })
}
