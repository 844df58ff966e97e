package openstack

import (
	"cmp"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// Evidence is what Manila tells about where it exports: each export address of each share the
// project can see, and the share networks (DHSS=true back ends create share servers there).
type Evidence struct {
	Exports       []ShareExport  `json:"exports"`
	Hostnames     []ShareExport  `json:"hostnames,omitempty"` // exports by DNS name, not resolved
	ShareNetworks []ShareNetwork `json:"shareNetworks"`
	SharesSeen    int            `json:"sharesSeen"` // available shares examined
	Notes         []string       `json:"notes,omitempty"`
}

// ShareExport is one address (or host name) a share is exported on.
type ShareExport struct {
	ShareID   string     `json:"shareID"`
	ShareName string     `json:"shareName,omitempty"`
	Protocol  string     `json:"protocol"`
	Address   netip.Addr `json:"address,omitzero"`
	Hostname  string     `json:"hostname,omitempty"`
	Preferred bool       `json:"preferred"`
	// Zone is the share's availability zone ("" when Manila gives none).
	Zone string `json:"zone,omitempty"`
}

// Confidence grades a candidate: exports seen in its subnets (high), only a share network on
// it (medium), or only its name (low; used when Manila has nothing to show yet).
type Confidence string

const (
	ConfidenceHigh   Confidence = "high"
	ConfidenceMedium Confidence = "medium"
	ConfidenceLow    Confidence = "low"
)

// Candidate is a network Manila exports on (or will), with the reasons, best first in a list.
type Candidate struct {
	Network    Network    `json:"network"`
	Score      int        `json:"score"`
	Confidence Confidence `json:"confidence"`
	Reasons    []string   `json:"reasons"`
	// Exports are the export addresses inside the network's subnets.
	Exports []NetworkExport `json:"exports,omitempty"`
	// Shares counts the distinct shares exported here.
	Shares        int      `json:"shares"`
	ShareNetworks []string `json:"shareNetworks,omitempty"`
	// Zones are the availability zones of the shares exported here and of the share networks'
	// subnets on it, sorted.
	Zones []string `json:"zones,omitempty"`
	// Attachment is set when discovery was asked about servers.
	Attachment *Attachment `json:"attachment,omitempty"`
	// Traffic says whether the attached servers' security groups let share traffic through.
	Traffic []TrafficVerdict `json:"traffic,omitempty"`
}

// NetworkExport is an export address found in one of a network's subnets.
type NetworkExport struct {
	Address   netip.Addr   `json:"address"`
	Subnet    string       `json:"subnet"` // name, or ID if unnamed
	CIDR      netip.Prefix `json:"cidr"`
	Shares    int          `json:"shares"`
	Preferred bool         `json:"preferred"`
	// Ambiguous: an equally specific subnet of another network also contains the address.
	Ambiguous bool `json:"ambiguous,omitempty"`
}

// UnmatchedExport is an export address in no subnet the project can see.
type UnmatchedExport struct {
	Address  netip.Addr `json:"address,omitzero"`
	Hostname string     `json:"hostname,omitempty"`
	Shares   int        `json:"shares"`
}

// Ranking is the outcome of Rank.
type Ranking struct {
	Candidates []Candidate       `json:"candidates"`
	Unmatched  []UnmatchedExport `json:"unmatched,omitempty"`
	Notes      []string          `json:"notes,omitempty"`
	// Zones rank each availability zone's evidence on its own, when the evidence names two
	// zones or more (RankZones).
	Zones []ZoneRanking `json:"zones,omitempty"`
}

// Weights of the evidence. A share counts once per network: fully if one of its preferred
// export addresses lies there, half otherwise; a share network on a network counts a little
// less than a share, so real exports win over configuration.
const (
	scorePreferredShare = 100
	scoreShare          = 50
	scoreShareNetwork   = 40
	scoreShared         = 5
	scoreNameHint       = 1
)

// storageName matches network names that suggest storage, used only when Manila shows nothing.
var storageName = regexp.MustCompile(`(?i)(storage|manila|nfs|cephfs|share|filer)`)

// Rank finds the networks that hold Manila's export addresses (longest-prefix match over the
// subnets of networks) and those that share networks use, and orders them best first.
func Rank(networks []Network, ev Evidence) Ranking {
	r := newRanker(networks)
	r.addExports(ev.Exports)
	for _, h := range ev.Hostnames {
		// A host name is not resolved: it says nothing of where the storage is, only that a
		// share is exported there.
		r.addUnmatched("name:"+h.Hostname, UnmatchedExport{Hostname: h.Hostname}, h.ShareID)
	}
	r.addShareNetworks(ev.ShareNetworks)
	for _, st := range r.states {
		r.rk.Candidates = append(r.rk.Candidates, st.candidate())
	}
	if len(r.rk.Candidates) == 0 && len(ev.Exports) == 0 && len(ev.Hostnames) == 0 {
		// Manila shows nothing at all: a guess from the names is better than no answer.
		r.rk.Candidates = nameGuesses(networks)
	}
	return r.sorted()
}

// subnetRef is one subnet of one network.
type subnetRef struct {
	net    *Network
	subnet Subnet
}

// subnetIndex finds the subnets that contain an address. Subnets are indexed by prefix: a
// longest-prefix match costs one map lookup per prefix length in use, whatever the number of
// networks.
type subnetIndex struct {
	byPrefix map[netip.Prefix][]subnetRef
	lengths  []int // distinct prefix lengths in use, longest first
}

func newSubnetIndex(networks []Network) subnetIndex {
	type lengthKey struct {
		bits int
		v6   bool
	}
	x := subnetIndex{byPrefix: map[netip.Prefix][]subnetRef{}}
	seenLen := map[lengthKey]bool{}
	for i := range networks {
		n := &networks[i]
		for _, s := range n.Subnets {
			if !s.CIDR.IsValid() {
				continue
			}
			p := s.CIDR.Masked()
			x.byPrefix[p] = append(x.byPrefix[p], subnetRef{n, s})
			if k := (lengthKey{p.Bits(), p.Addr().Is6()}); !seenLen[k] {
				seenLen[k] = true
				x.lengths = append(x.lengths, p.Bits())
			}
		}
	}
	slices.Sort(x.lengths)
	slices.Reverse(x.lengths)
	x.lengths = slices.Compact(x.lengths)
	return x
}

// lookup returns the subnets containing a: the most specific ones (best), and the less
// specific ones that contain it too (wider).
func (x subnetIndex) lookup(a netip.Addr) (best, wider []subnetRef) {
	for _, bits := range x.lengths {
		if bits > a.BitLen() {
			continue
		}
		p, err := a.Prefix(bits)
		if err != nil {
			continue
		}
		refs := x.byPrefix[p]
		if len(refs) == 0 {
			continue
		}
		if best == nil {
			best = refs
		} else {
			wider = append(wider, refs...)
		}
	}
	return best, wider
}

// netState is what the evidence says of one network, while it is gathered.
type netState struct {
	cand        Candidate
	shares      map[string]bool // share ID -> has a preferred address here
	exports     map[netip.Addr]*NetworkExport
	exportShare map[netip.Addr]map[string]bool
	widerOf     map[string]bool // notes about less specific subnets elsewhere
	snNames     []string
	zones       []string
}

// ranker gathers the evidence network by network (states) and what lies in no network
// (unmatched), for Rank.
type ranker struct {
	index           subnetIndex
	byID            map[string]*Network
	states          map[string]*netState
	unmatched       map[string]*UnmatchedExport
	unmatchedShares map[string]map[string]bool
	rk              Ranking
}

func newRanker(networks []Network) *ranker {
	r := &ranker{index: newSubnetIndex(networks), byID: map[string]*Network{}, states: map[string]*netState{},
		unmatched: map[string]*UnmatchedExport{}, unmatchedShares: map[string]map[string]bool{}}
	for i := range networks {
		r.byID[networks[i].ID] = &networks[i]
	}
	return r
}

// state is the state of n, made on first use.
func (r *ranker) state(n *Network) *netState {
	s := r.states[n.ID]
	if s == nil {
		s = &netState{cand: Candidate{Network: *n}, shares: map[string]bool{}, exports: map[netip.Addr]*NetworkExport{},
			exportShare: map[netip.Addr]map[string]bool{}, widerOf: map[string]bool{}}
		r.states[n.ID] = s
	}
	return s
}

// addUnmatched counts a share exported where no subnet of the project lies (key: the address,
// or the host name).
func (r *ranker) addUnmatched(key string, u UnmatchedExport, shareID string) {
	if r.unmatched[key] == nil {
		r.unmatched[key] = &u
		r.unmatchedShares[key] = map[string]bool{}
	}
	r.unmatchedShares[key][shareID] = true
	r.unmatched[key].Shares = len(r.unmatchedShares[key])
}

// addExports places each export address in the most specific subnets that contain it. Every
// network with an equally specific subnet gets it (and is told it is ambiguous); a less
// specific subnet of another network gets a note, not the export.
func (r *ranker) addExports(exports []ShareExport) {
	for _, ex := range exports {
		if !ex.Address.IsValid() {
			continue
		}
		hits, wider := r.index.lookup(ex.Address)
		if len(hits) == 0 {
			r.addUnmatched(ex.Address.String(), UnmatchedExport{Address: ex.Address}, ex.ShareID)
			continue
		}
		for _, h := range hits {
			st := r.state(h.net)
			st.addZone(ex.Zone)
			st.shares[ex.ShareID] = st.shares[ex.ShareID] || ex.Preferred
			ne := st.exports[ex.Address]
			if ne == nil {
				ne = &NetworkExport{Address: ex.Address, Subnet: coalesce(h.subnet.Name, h.subnet.ID), CIDR: h.subnet.CIDR, Ambiguous: len(hits) > 1}
				st.exports[ex.Address] = ne
				st.exportShare[ex.Address] = map[string]bool{}
			}
			st.exportShare[ex.Address][ex.ShareID] = true
			ne.Shares = len(st.exportShare[ex.Address])
			ne.Preferred = ne.Preferred || ex.Preferred
			for _, w := range wider {
				if w.net.ID != h.net.ID {
					st.widerOf[fmt.Sprintf("%s is also inside %s of network %s; the narrower subnet %s wins",
						ex.Address, w.subnet.CIDR, coalesce(w.net.Name, w.net.ID), h.subnet.CIDR)] = true
				}
			}
		}
	}
}

// addShareNetworks names, on each network, the share networks that place share servers there
// (DHSS=true back ends); one on a network the project cannot see is a note.
func (r *ranker) addShareNetworks(shareNetworks []ShareNetwork) {
	for _, sn := range shareNetworks {
		for _, sub := range sn.Subnets {
			if sub.NeutronNetID == "" {
				continue
			}
			n := r.byID[sub.NeutronNetID]
			if n == nil {
				r.rk.Notes = append(r.rk.Notes, fmt.Sprintf("share network %s uses network %s, which this project cannot see", coalesce(sn.Name, sn.ID), sub.NeutronNetID))
				continue
			}
			st := r.state(n)
			st.addZone(sub.AvailabilityZone)
			name := coalesce(sn.Name, sn.ID)
			if !slices.Contains(st.snNames, name) {
				st.snNames = append(st.snNames, name)
			}
		}
	}
}

// addZone notes an availability zone served by the network.
func (st *netState) addZone(z string) {
	if z != "" && !slices.Contains(st.zones, z) {
		st.zones = append(st.zones, z)
	}
}

// candidate scores the network of st and says why: its shares (preferred addresses weigh
// more), its share networks, less for an ambiguous export, a little more when shared.
func (st *netState) candidate() Candidate {
	c := st.cand
	for _, preferred := range st.shares {
		if preferred {
			c.Score += scorePreferredShare
		} else {
			c.Score += scoreShare
		}
	}
	c.Shares = len(st.shares)
	c.Score += scoreShareNetwork * len(st.snNames)
	slices.Sort(st.snNames)
	c.ShareNetworks = st.snNames
	slices.Sort(st.zones)
	c.Zones = st.zones
	for _, ne := range st.exports {
		c.Exports = append(c.Exports, *ne)
	}
	slices.SortFunc(c.Exports, func(a, b NetworkExport) int { return a.Address.Compare(b.Address) })

	if c.Shares > 0 {
		c.Confidence = ConfidenceHigh
		c.Reasons = append(c.Reasons, exportReasons(c.Exports, c.Shares)...)
	} else {
		c.Confidence = ConfidenceMedium
	}
	if len(c.ShareNetworks) > 0 {
		c.Reasons = append(c.Reasons, fmt.Sprintf("share network%s %s place%s share servers (driver_handles_share_servers=true) on it",
			plural(len(c.ShareNetworks)), quoteList(c.ShareNetworks), singularVerb(len(c.ShareNetworks))))
	}
	for _, e := range c.Exports {
		if e.Ambiguous {
			c.Reasons = append(c.Reasons, fmt.Sprintf("%s is also inside an equally specific subnet of another network: check which one the storage really is on", e.Address))
			c.Score -= scoreShare / 2
			break
		}
	}
	wider := make([]string, 0, len(st.widerOf))
	for w := range st.widerOf {
		wider = append(wider, w)
	}
	slices.Sort(wider)
	c.Reasons = append(c.Reasons, wider...)
	if c.Network.Shared {
		c.Score += scoreShared
		c.Reasons = append(c.Reasons, "shared with all projects, as provider storage networks usually are")
	}
	return c
}

// nameGuesses are the networks whose names suggest storage, with the lowest confidence: what
// Rank offers when Manila shows no share and no share network yet.
func nameGuesses(networks []Network) []Candidate {
	var out []Candidate
	for _, n := range networks {
		if storageName.MatchString(n.Name) {
			c := Candidate{Network: n, Score: scoreNameHint, Confidence: ConfidenceLow,
				Reasons: []string{fmt.Sprintf("Manila shows no share or share network yet; guessed from the name %q only", n.Name)}}
			if n.Shared {
				c.Score += scoreShared
				c.Reasons = append(c.Reasons, "shared with all projects, as provider storage networks usually are")
			}
			out = append(out, c)
		}
	}
	return out
}

// sorted is the ranking, best first (score, then shares, then name and ID, so that equal
// candidates keep one order), with the unmatched exports by address and host name.
func (r *ranker) sorted() Ranking {
	rk := r.rk
	slices.SortFunc(rk.Candidates, func(a, b Candidate) int {
		return cmp.Or(-cmp.Compare(a.Score, b.Score), -cmp.Compare(a.Shares, b.Shares),
			cmp.Compare(a.Network.Name, b.Network.Name), cmp.Compare(a.Network.ID, b.Network.ID))
	})
	for _, u := range r.unmatched {
		rk.Unmatched = append(rk.Unmatched, *u)
	}
	slices.SortFunc(rk.Unmatched, func(a, b UnmatchedExport) int {
		return cmp.Or(a.Address.Compare(b.Address), cmp.Compare(a.Hostname, b.Hostname))
	})
	return rk
}

func exportReasons(exports []NetworkExport, shares int) []string {
	type group struct {
		subnet string
		cidr   netip.Prefix
		addrs  []string
	}
	var groups []*group
	for _, e := range exports {
		var g *group
		for _, x := range groups {
			if x.cidr == e.CIDR && x.subnet == e.Subnet {
				g = x
			}
		}
		if g == nil {
			g = &group{subnet: e.Subnet, cidr: e.CIDR}
			groups = append(groups, g)
		}
		a := e.Address.String()
		if e.Preferred {
			a += " (preferred)"
		}
		g.addrs = append(g.addrs, a)
	}
	verb := "are"
	if shares == 1 {
		verb = "is"
	}
	reasons := []string{fmt.Sprintf("%d share%s %s exported on it", shares, plural(shares), verb)}
	for _, g := range groups {
		reasons = append(reasons, fmt.Sprintf("export address%s %s in subnet %s (%s)",
			pluralES(len(g.addrs)), strings.Join(g.addrs, ", "), g.subnet, g.cidr))
	}
	return reasons
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func pluralES(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}

func singularVerb(n int) string {
	if n == 1 {
		return "s"
	}
	return ""
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// ExportSubnets are the CIDRs of the candidate's subnets that hold export addresses, without
// repeats, in the order of Exports.
func (c *Candidate) ExportSubnets() []netip.Prefix {
	var out []netip.Prefix
	for _, e := range c.Exports {
		if e.CIDR.IsValid() && !slices.Contains(out, e.CIDR.Masked()) {
			out = append(out, e.CIDR.Masked())
		}
	}
	return out
}
