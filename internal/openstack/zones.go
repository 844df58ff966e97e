package openstack

import (
	"fmt"
	"slices"
	"strings"
)

// ZoneRanking is the ranking of one availability zone's evidence: the shares Manila placed in
// that zone, and the share networks with a subnet there (or with one for every zone). Clouds of
// several sites give each zone a back end of its own that exports on a storage network of its
// site: a worker of one zone attached to another zone's network gets a port that leads nowhere.
type ZoneRanking struct {
	Zone string `json:"zone"`
	Ranking
}

// Zones are the availability zones the evidence names, sorted: those of the shares and those
// of the share networks' subnets. A subnet with no zone serves every zone and names none.
func (ev Evidence) Zones() []string {
	var zones []string
	add := func(z string) {
		if z != "" && !slices.Contains(zones, z) {
			zones = append(zones, z)
		}
	}
	for _, e := range ev.Exports {
		add(e.Zone)
	}
	for _, h := range ev.Hostnames {
		add(h.Zone)
	}
	for _, sn := range ev.ShareNetworks {
		for _, s := range sn.Subnets {
			add(s.AvailabilityZone)
		}
	}
	slices.Sort(zones)
	return zones
}

// InZone is the part of the evidence that concerns one zone: the exports of its shares, and the
// share networks' subnets in it or in every zone. The notes stay with the whole evidence.
func (ev Evidence) InZone(zone string) Evidence {
	out := Evidence{}
	shares := map[string]bool{}
	for _, e := range ev.Exports {
		if e.Zone == zone {
			out.Exports = append(out.Exports, e)
			shares[e.ShareID] = true
		}
	}
	for _, h := range ev.Hostnames {
		if h.Zone == zone {
			out.Hostnames = append(out.Hostnames, h)
			shares[h.ShareID] = true
		}
	}
	for _, sn := range ev.ShareNetworks {
		in := sn
		in.Subnets = nil
		for _, s := range sn.Subnets {
			if s.AvailabilityZone == zone || s.AvailabilityZone == "" {
				in.Subnets = append(in.Subnets, s)
			}
		}
		if len(in.Subnets) > 0 {
			out.ShareNetworks = append(out.ShareNetworks, in)
		}
	}
	out.SharesSeen = len(shares)
	return out
}

// RankZones ranks each zone's evidence on its own when the evidence names two zones or more.
// With one zone or none, the ranking of all the evidence is that zone's, and it returns nil.
func RankZones(networks []Network, ev Evidence) []ZoneRanking {
	zones := ev.Zones()
	if len(zones) < 2 {
		return nil
	}
	out := make([]ZoneRanking, 0, len(zones))
	for _, z := range zones {
		rk := Rank(networks, ev.InZone(z))
		// What lies in no network is listed once, for the whole evidence.
		rk.Unmatched = nil
		out = append(out, ZoneRanking{Zone: z, Ranking: rk})
	}
	return out
}

// Zone returns the ranking of one availability zone: the zone's own when the evidence named
// several, else the whole ranking (ok is false when the ranking has zones and this is not one).
func (r *Ranking) Zone(zone string) (rk *Ranking, ok bool) {
	if len(r.Zones) == 0 {
		return r, true
	}
	for i := range r.Zones {
		if r.Zones[i].Zone == zone {
			return &r.Zones[i].Ranking, true
		}
	}
	return nil, false
}

// ZoneNetworks are, for each zone of the ranking, the networks that Manila shows it exports on
// there (HasEvidence), best first: the storage networks a worker of that zone needs.
type ZoneNetworks struct {
	Zone     string      `json:"zone"`
	Networks []Candidate `json:"networks"`
}

// ByZone lists each zone's networks with evidence (nil when the ranking has no zones).
func (r *Ranking) ByZone() []ZoneNetworks {
	var out []ZoneNetworks
	for _, z := range r.Zones {
		zn := ZoneNetworks{Zone: z.Zone}
		for _, c := range z.Candidates {
			if c.HasEvidence() {
				zn.Networks = append(zn.Networks, c)
			}
		}
		out = append(out, zn)
	}
	return out
}

// zonesDiffer reports whether the zones are served by different storage networks: then no one
// network is the storage network of the cloud, and a choice must be made zone by zone.
func (r *Ranking) zonesDiffer() bool {
	var first []string
	for i, z := range r.ByZone() {
		ids := make([]string, 0, len(z.Networks))
		for _, c := range z.Networks {
			ids = append(ids, c.Network.ID)
		}
		slices.Sort(ids)
		if i == 0 {
			first = ids
		} else if !slices.Equal(first, ids) {
			return true
		}
	}
	return false
}

// ZoneSummary says which networks serve which zone, for messages: az1: "a", "b"; az2: "c".
func ZoneSummary(zones []ZoneNetworks) string {
	parts := make([]string, 0, len(zones))
	for _, z := range zones {
		names := make([]string, 0, len(z.Networks))
		for _, c := range z.Networks {
			names = append(names, c.Network.Label())
		}
		if len(names) == 0 {
			names = []string{"no network with evidence"}
		}
		parts = append(parts, fmt.Sprintf("%s: %s", z.Zone, strings.Join(names, ", ")))
	}
	return strings.Join(parts, "; ")
}
