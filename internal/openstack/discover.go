package openstack

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
)

// DiscoverOptions tunes Discover.
type DiscoverOptions struct {
	// Servers, when set, adds to each candidate which of these servers have a port on it and
	// whether their security groups let the share traffic through.
	Servers *ServerSelector
	// SecurityGroupIDs are checked, as the groups of one port, for NFS and CephFS traffic to
	// the best candidate.
	SecurityGroupIDs []string
	// ExactExports asks every share for its export locations (one request per share) instead of
	// reading them from the share list and asking one share per export address.
	ExactExports bool
	// Concurrency bounds parallel per-share requests (default 8).
	Concurrency int
}

// Discovery is the answer to "which network does Manila export on, and are my servers on it?".
type Discovery struct {
	Cloud     string     `json:"cloud"`
	Region    string     `json:"region,omitempty"`
	ProjectID string     `json:"projectID,omitempty"`
	Manila    ManilaInfo `json:"manila"`
	Ranking
	NetworksSeen      int `json:"networksSeen"`
	SharesSeen        int `json:"sharesSeen"`
	ShareNetworksSeen int `json:"shareNetworksSeen"`
	// SecurityGroups is the verdict for DiscoverOptions.SecurityGroupIDs.
	SecurityGroups *SecurityGroupCheck `json:"securityGroups,omitempty"`
	// Networks are all the networks seen, for listings.
	Networks []Network `json:"-"`
}

// SecurityGroupCheck is whether a set of security groups lets share traffic through.
type SecurityGroupCheck struct {
	Groups   []SecurityGroup  `json:"groups"`
	Verdicts []TrafficVerdict `json:"verdicts"`
}

// Best returns the top candidate, or nil.
func (d *Discovery) Best() *Candidate {
	if len(d.Candidates) == 0 {
		return nil
	}
	return &d.Candidates[0]
}

// Discover finds the Neutron network(s) Manila exports on: it matches the addresses of the
// export locations of the project's shares against the subnets of every network the project
// can see, adds the networks of share networks (DHSS=true), and ranks the candidates with the
// reasons. Requests: 1 (Manila versions) + pages of networks, subnets, shares and share
// networks + 1 per distinct export address (not per share); see Evidence for the details.
func (c *Client) Discover(ctx context.Context, opts DiscoverOptions) (*Discovery, error) {
	info, err := c.Manila(ctx)
	if err != nil {
		return nil, err
	}
	var (
		wg       sync.WaitGroup
		nets     []Network
		ev       Evidence
		nerr     error
		eerr     error
		groups   []SecurityGroup
		gerr     error
		ctxGroup context.Context
		cancel   context.CancelFunc
	)
	ctxGroup, cancel = context.WithCancel(ctx)
	defer cancel()
	wg.Add(2)
	go func() {
		defer wg.Done()
		if nets, nerr = c.Networks(ctxGroup); nerr != nil {
			cancel()
		}
	}()
	go func() {
		defer wg.Done()
		if ev, eerr = c.ManilaEvidence(ctxGroup, opts.ExactExports, opts.Concurrency); eerr != nil {
			cancel()
		}
	}()
	if len(opts.SecurityGroupIDs) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if groups, gerr = c.SecurityGroups(ctxGroup, opts.SecurityGroupIDs...); gerr != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	if err := firstRealError(nerr, eerr, gerr); err != nil {
		return nil, err
	}

	d := &Discovery{Cloud: c.cloud, Region: c.region, ProjectID: c.projectID, Manila: info, Networks: nets,
		NetworksSeen: len(nets), SharesSeen: ev.SharesSeen, ShareNetworksSeen: len(ev.ShareNetworks)}
	d.Ranking = Rank(nets, ev)
	d.Zones = RankZones(nets, ev)
	d.Notes = append(slices.Clone(ev.Notes), d.Notes...)

	if opts.Servers != nil && len(d.Candidates) > 0 {
		if err := c.addAttachments(ctx, d, *opts.Servers, ev); err != nil {
			return nil, err
		}
	}
	if len(opts.SecurityGroupIDs) > 0 {
		if err := checkGiven(d, groups, opts.SecurityGroupIDs, c); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// firstRealError prefers a real failure over the cancellations it caused in the others.
func firstRealError(errs ...error) error {
	var canceled error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if KindOf(err) == KindCanceled {
			canceled = err
			continue
		}
		return err
	}
	return canceled
}

func (c *Client) addAttachments(ctx context.Context, d *Discovery, sel ServerSelector, ev Evidence) error {
	ids := make([]string, 0, len(d.Candidates))
	for _, cand := range d.Candidates {
		ids = append(ids, cand.Network.ID)
	}
	atts, err := c.Attachments(ctx, sel, ids)
	if err != nil {
		return err
	}
	// Security groups of the ports already there: do they let the share traffic through?
	var sgIDs []string
	for _, a := range atts {
		for _, s := range a.Servers {
			for _, p := range s.Ports {
				sgIDs = append(sgIDs, p.SecurityGroups...)
			}
		}
	}
	groups := map[string]SecurityGroup{}
	if sgIDs = dedupe(sgIDs); len(sgIDs) > 0 {
		sgs, err := c.SecurityGroups(ctx, sgIDs...)
		if err != nil {
			return err
		}
		for _, g := range sgs {
			groups[g.ID] = g
		}
	}
	for i := range d.Candidates {
		cand := &d.Candidates[i]
		a := atts[cand.Network.ID]
		cand.Attachment = &a
		cand.Traffic = trafficOf(cand, a, groups, protocolsOn(cand, ev))
	}
	return nil
}

// trafficOf checks each distinct set of security groups on the servers' ports of a candidate.
func trafficOf(cand *Candidate, a Attachment, groups map[string]SecurityGroup, protocols []string) []TrafficVerdict {
	dest := representative(cand)
	seen := map[string]bool{}
	var out []TrafficVerdict
	for _, s := range a.Servers {
		for _, p := range s.Ports {
			set := slices.Clone(p.SecurityGroups)
			sort.Strings(set)
			key := fmt.Sprint(p.PortSecurity, set)
			if seen[key] {
				continue
			}
			seen[key] = true
			var gs []SecurityGroup
			for _, id := range set {
				if g, ok := groups[id]; ok {
					gs = append(gs, g)
				} else {
					gs = append(gs, SecurityGroup{ID: id})
				}
			}
			for _, proto := range protocols {
				out = append(out, CheckEgress(gs, p.PortSecurity, dest, proto))
			}
		}
	}
	return out
}

// protocolsOn lists the share protocols exported on a candidate that have known port needs.
func protocolsOn(cand *Candidate, ev Evidence) []string {
	var protos []string
	for _, ex := range ev.Exports {
		for _, ne := range cand.Exports {
			if ex.Address == ne.Address && ProtocolTraffic[strings.ToUpper(ex.Protocol)] != nil && !slices.Contains(protos, strings.ToUpper(ex.Protocol)) {
				protos = append(protos, strings.ToUpper(ex.Protocol))
			}
		}
	}
	if len(protos) == 0 {
		protos = []string{"NFS"}
	}
	sort.Strings(protos)
	return protos
}

// representative is the address traffic checks aim at: the first preferred export address,
// else the first export, else the first address of the first subnet.
func representative(cand *Candidate) netip.Addr {
	for _, e := range cand.Exports {
		if e.Preferred {
			return e.Address
		}
	}
	if len(cand.Exports) > 0 {
		return cand.Exports[0].Address
	}
	for _, s := range cand.Network.Subnets {
		return s.CIDR.Addr().Next()
	}
	return netip.Addr{}
}

func checkGiven(d *Discovery, groups []SecurityGroup, ids []string, c *Client) error {
	found := map[string]bool{}
	for _, g := range groups {
		found[g.ID] = true
	}
	for _, id := range dedupe(ids) {
		if !found[id] {
			return c.notFound("Neutron", "checking security groups", "security group", id)
		}
	}
	var dest netip.Addr
	if best := d.Best(); best != nil {
		dest = representative(best)
	}
	check := &SecurityGroupCheck{Groups: groups}
	for _, proto := range []string{"NFS", "CEPHFS"} {
		check.Verdicts = append(check.Verdicts, CheckEgress(groups, true, dest, proto))
	}
	d.SecurityGroups = check
	return nil
}

// ManilaEvidence collects where the project's available shares are exported and which Neutron
// networks its share networks use. With exact=false (the default of Discover) the export paths
// come with the share list itself (microversion 2.8, one request per page) and one share per
// distinct address is asked for its export locations, to learn which addresses are preferred
// and to drop admin-only ones; with exact=true every share is asked (one request per share).
// A 403 on share networks becomes a note, not an error.
func (c *Client) ManilaEvidence(ctx context.Context, exact bool, concurrency int) (Evidence, error) {
	var ev Evidence
	var shares []Share
	var err error
	var wg sync.WaitGroup
	var snErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		ev.ShareNetworks, snErr = c.ShareNetworks(ctx)
	}()
	if !exact {
		var paths map[string][]string
		var ok bool
		shares, paths, ok, err = c.sharesWithInlineExports(ctx)
		if err == nil && ok {
			err = c.sampleExportFlags(ctx, shares, paths)
		}
		exact = err == nil && !ok
	}
	if err == nil && exact {
		shares, err = c.Shares(ctx, ShareFilter{Status: "available", ExportLocations: true, Concurrency: concurrency})
	}
	wg.Wait()
	if err != nil {
		return Evidence{}, err
	}
	if snErr != nil {
		if KindOf(snErr) != KindForbidden {
			return Evidence{}, snErr
		}
		ev.Notes = append(ev.Notes, fmt.Sprintf("share networks are not visible to %s (403 Forbidden): networks of DHSS=true share networks are not considered", c.identity))
		ev.ShareNetworks = nil
	}
	ev.SharesSeen = len(shares)
	for _, s := range shares {
		for _, loc := range s.ExportLocations {
			if loc.AdminOnly {
				continue
			}
			addrs, names := ExportHosts(loc.Path)
			for _, a := range addrs {
				ev.Exports = append(ev.Exports, ShareExport{ShareID: s.ID, ShareName: s.Name, Protocol: s.Protocol, Address: a, Preferred: loc.Preferred, Zone: s.AvailabilityZone})
			}
			for _, n := range names {
				ev.Hostnames = append(ev.Hostnames, ShareExport{ShareID: s.ID, ShareName: s.Name, Protocol: s.Protocol, Hostname: n, Preferred: loc.Preferred, Zone: s.AvailabilityZone})
			}
		}
	}
	if len(ev.Hostnames) > 0 {
		ev.Notes = append(ev.Notes, "some shares are exported by host name, which is not resolved: their networks are not considered")
	}
	return ev, nil
}

// sampleExportFlags turns the inline export paths of the share list into ExportLocations with
// flags. Manila marks locations preferred or admin-only per back-end address, so asking one
// share per distinct address is enough: addresses missing from the exact list are admin-only
// locations Manila hides from this user, and are dropped.
func (c *Client) sampleExportFlags(ctx context.Context, shares []Share, paths map[string][]string) error {
	type flags struct{ visible, preferred bool }
	learned := map[string]*flags{} // host (address or name) -> flags
	hostsOf := func(path string) []string {
		addrs, names := ExportHosts(path)
		hosts := slices.Clone(names)
		for _, a := range addrs {
			hosts = append(hosts, a.String())
		}
		return hosts
	}
	for i := range shares {
		s := &shares[i]
		unknown := false
		for _, p := range paths[s.ID] {
			for _, h := range hostsOf(p) {
				if learned[h] == nil {
					unknown = true
				}
			}
		}
		if !unknown {
			continue
		}
		locs, err := c.ExportLocations(ctx, s.ID)
		if IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		for _, p := range paths[s.ID] {
			for _, h := range hostsOf(p) {
				if learned[h] == nil {
					learned[h] = &flags{}
				}
			}
		}
		for _, l := range locs {
			for _, h := range hostsOf(l.Path) {
				f := learned[h]
				if f == nil {
					f = &flags{}
					learned[h] = f
				}
				f.visible = f.visible || !l.AdminOnly
				f.preferred = f.preferred || l.Preferred
			}
		}
	}
	for i := range shares {
		s := &shares[i]
		for _, p := range paths[s.ID] {
			loc := ExportLocation{Path: p, AdminOnly: true}
			for _, h := range hostsOf(p) {
				if f := learned[h]; f != nil && f.visible {
					loc.AdminOnly = false
					loc.Preferred = loc.Preferred || f.preferred
				}
			}
			s.ExportLocations = append(s.ExportLocations, loc)
		}
	}
	return nil
}
