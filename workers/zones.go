package workers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
)

// ZoneAttachment is what --discover gave the MachineSets of one availability zone, on a cloud
// whose zones Manila serves on storage networks of their own: every network Manila exports on
// in that zone (one per back end of the zone), so that the zone's pods reach the shares of each.
type ZoneAttachment struct {
	Zone string `json:"zone"`
	// Networks are the zone's storage networks, best first, as discovery ranked them.
	Networks []openstack.Candidate `json:"networks"`
	// MachineSets are the sets of the zone that were given them.
	MachineSets []string `json:"machineSets"`
}

// ZoneError says that --discover cannot give some MachineSets their zone's storage network:
// they name no availability zone, or one where Manila exports no share. Nothing is written.
type ZoneError struct {
	// Zones is what discovery found: each zone's networks.
	Zones []openstack.ZoneNetworks
	// Problems are one sentence per MachineSet.
	Problems []string
}

func (e *ZoneError) Error() string {
	return fmt.Sprintf("--discover: Manila exports on a storage network per availability zone (%s); %s; give such sets their network with --network, naming them",
		openstack.ZoneSummary(e.Zones), strings.Join(e.Problems, "; "))
}

// zonePart is the request for the MachineSets of one zone: the given networks and the zone's.
type zonePart struct {
	attachment ZoneAttachment
	req        Request
}

// discover is the discovery the request's policy needs (nil without --discover or a cloud),
// and, when Manila serves the cloud's zones on different storage networks and the request
// patches MachineSets only, the request split by zone: each zone's sets get the networks Manila
// exports on in their zone. Any other kind (the ControlPlaneMachineSet, whose failure domains
// span the zones; Cluster API sets; NodePools) is left to the one-network rule, which refuses.
func (c Cluster) discover(ctx context.Context, req Request) (*openstack.Discovery, []zonePart, error) {
	if !req.Discover || req.Cloud == nil || req.Chosen || req.Remove != nil {
		return nil, nil, nil
	}
	d, err := req.Cloud.Discover(ctx, openstack.DiscoverOptions{})
	if err != nil {
		return nil, nil, &attach.CloudError{Err: err}
	}
	var sne *openstack.StorageNetworkError
	_, err = d.StorageNetwork()
	only := req.MachineSets != nil && req.clusterAPI() == nil && req.nodePools() == nil && !req.ControlPlane
	if !errors.As(err, &sne) || len(sne.Zones) == 0 || !only || req.File != nil || c.Machines == nil {
		return d, nil, nil
	}
	parts, err := c.splitByZone(ctx, req, sne.Zones)
	return d, parts, err
}

// splitByZone groups the selected MachineSets by their providerSpec's availabilityZone. A set
// that would be patched must name a zone in which Manila exports on some network; the others
// (left alone whatever is attached) go with the first zone, which reports them as skipped.
func (c Cluster) splitByZone(ctx context.Context, req Request, zones []openstack.ZoneNetworks) ([]zonePart, error) {
	selected, err := machinesets.Target{Client: c.Machines, Selection: *req.MachineSets}.Select(ctx)
	if err != nil {
		return nil, err
	}
	byZone := map[string][]string{}
	var leftAlone, problems []string
	for _, s := range selected {
		ms := s.Object
		if s.Skip != "" {
			continue // not selected by default (not a worker): never named below
		}
		zone := machinesets.Zone(ms)
		patched := machinesets.Skipped(ms) == "" || machinesets.NotMachineAPIAuthoritative(ms) != ""
		at := slices.IndexFunc(zones, func(z openstack.ZoneNetworks) bool { return z.Zone == zone })
		switch {
		case !patched:
			leftAlone = append(leftAlone, ms.Name)
		case zone == "":
			problems = append(problems, fmt.Sprintf("MachineSet %s names no availability zone in its providerSpec", ms.Name))
		case at < 0 || len(zones[at].Networks) == 0:
			problems = append(problems, fmt.Sprintf("MachineSet %s makes its machines in availability zone %s, where Manila exports no share", ms.Name, zone))
		default:
			byZone[zone] = append(byZone[zone], ms.Name)
		}
	}
	if len(problems) > 0 {
		return nil, &ZoneError{Zones: zones, Problems: problems}
	}
	var parts []zonePart
	for _, z := range zones {
		names := byZone[z.Zone]
		if len(names) == 0 {
			continue
		}
		part := zonePart{attachment: ZoneAttachment{Zone: z.Zone, Networks: z.Networks, MachineSets: names}, req: req}
		part.req.Discover = false
		part.req.Attachment.Networks = slices.Clone(req.Attachment.Networks)
		for _, n := range z.Networks {
			if !slices.ContainsFunc(part.req.Attachment.Networks, func(id string) bool { return neutronid.Equal(id, n.Network.ID) }) {
				part.req.Attachment.Networks = append(part.req.Attachment.Networks, n.Network.ID)
			}
		}
		if len(parts) == 0 {
			names = append(names, leftAlone...)
		}
		part.req.Selection = Selection{MachineSets: &machinesets.Selection{Names: names}}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return nil, &ZoneError{Zones: zones, Problems: []string{"no MachineSet selected would take a storage network"}}
	}
	return parts, nil
}

// applyByZone is Apply for a request split by zone: the policy, the capacity and the zone rule
// per zone (each zone's networks are checked like any given network), the removal risk once,
// the writes zone by zone, then one rollout of every set.
func (c Cluster) applyByZone(ctx context.Context, req Request, d *openstack.Discovery, parts []zonePart, report *Report) error {
	opts := make([]attach.Options, len(parts))
	for i, p := range parts {
		sub := &Report{}
		o, err := c.options(ctx, p.req, d, sub)
		report.mergeNetworks(sub)
		if err != nil {
			return err
		}
		opts[i] = o
		report.Zones = append(report.Zones, p.attachment)
	}
	report.Planned = true
	for i, p := range parts {
		if err := c.refuseOtherZones(ctx, p.req, opts[i], report); err != nil {
			return err
		}
	}
	if err := c.refuseRemovalRisk(ctx, req, opts[0], report); err != nil {
		return err
	}
	for i, p := range parts {
		patched, err := c.write(ctx, p.req.Selection, opts[i], req.Force)
		if patched != nil {
			report.Results = append(report.Results, patched.Results...)
			report.Templates = append(report.Templates, patched.Templates...)
		}
		if err != nil {
			return err
		}
	}
	slices.SortStableFunc(report.Results, func(a, b attach.Result) int { return strings.Compare(a.Name, b.Name) })
	if req.DryRun || req.Rollout == nil || req.Rollout.Later || report.Invalid() != nil {
		return nil
	}
	if req.Patched != nil {
		req.Patched(report)
	}
	return c.roll(ctx, req, report)
}

// mergeNetworks adds what the policy decided for one zone's sets to the report's.
func (r *Report) mergeNetworks(sub *Report) {
	n, s := &r.Networks, sub.Networks
	for _, id := range s.IDs {
		if !slices.ContainsFunc(n.IDs, func(x string) bool { return neutronid.Equal(x, id) }) {
			n.IDs = append(n.IDs, id)
		}
	}
	n.Forced = append(n.Forced, s.Forced...)
	n.Warnings = append(n.Warnings, s.Warnings...)
	for _, id := range s.PortSecurityDisabled {
		if !slices.Contains(n.PortSecurityDisabled, id) {
			n.PortSecurityDisabled = append(n.PortSecurityDisabled, id)
		}
	}
	if n.Zones == nil {
		n.Zones = s.Zones
	}
	r.Warnings = append(r.Warnings, sub.Warnings...)
	r.Notes = append(r.Notes, sub.Notes...)
	r.Refused = append(r.Refused, sub.Refused...)
}
