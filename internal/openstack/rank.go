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
	type subnetRef struct {
		net    *Network
		subnet Subnet
	}
	// Subnets indexed by prefix: a longest-prefix match costs one map lookup per prefix length
	// in use, whatever the number of networks.
	index := map[netip.Prefix][]subnetRef{}
	var lengths []int // distinct (bits, family) in use, longest first
	type lengthKey struct {
		bits int
		v6   bool
	}
	seenLen := map[lengthKey]bool{}
	byID := map[string]*Network{}
	for i := range networks {
		n := &networks[i]
		byID[n.ID] = n
		for _, s := range n.Subnets {
			if !s.CIDR.IsValid() {
				continue
			}
			p := s.CIDR.Masked()
			index[p] = append(index[p], subnetRef{n, s})
			if k := (lengthKey{p.Bits(), p.Addr().Is6()}); !seenLen[k] {
				seenLen[k] = true
				lengths = append(lengths, p.Bits())
			}
		}
	}
	slices.Sort(lengths)
	slices.Reverse(lengths)
	lengths = slices.Compact(lengths)
	// lookup returns the subnets containing a, the most specific ones first.
	lookup := func(a netip.Addr) (best, wider []subnetRef) {
		for _, bits := range lengths {
			if bits > a.BitLen() {
				continue
			}
			p, err := a.Prefix(bits)
			if err != nil {
				continue
			}
			refs := index[p]
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

	type netState struct {
		cand        Candidate
		shares      map[string]bool // share ID -> has a preferred address here
		exports     map[netip.Addr]*NetworkExport
		exportShare map[netip.Addr]map[string]bool
		widerOf     map[string]bool // notes about less specific subnets elsewhere
		snNames     []string
	}
	states := map[string]*netState{}
	state := func(n *Network) *netState {
		s := states[n.ID]
		if s == nil {
			s = &netState{cand: Candidate{Network: *n}, shares: map[string]bool{}, exports: map[netip.Addr]*NetworkExport{},
				exportShare: map[netip.Addr]map[string]bool{}, widerOf: map[string]bool{}}
			states[n.ID] = s
		}
		return s
	}

	var rk Ranking
	unmatched := map[string]*UnmatchedExport{}
	unmatchedShares := map[string]map[string]bool{}
	addUnmatched := func(key string, u UnmatchedExport, shareID string) {
		if unmatched[key] == nil {
			unmatched[key] = &u
			unmatchedShares[key] = map[string]bool{}
		}
		unmatchedShares[key][shareID] = true
		unmatched[key].Shares = len(unmatchedShares[key])
	}

	for _, ex := range ev.Exports {
		if !ex.Address.IsValid() {
			continue
		}
		hits, wider := lookup(ex.Address)
		if len(hits) == 0 {
			addUnmatched(ex.Address.String(), UnmatchedExport{Address: ex.Address}, ex.ShareID)
			continue
		}
		for _, h := range hits {
			st := state(h.net)
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
	for _, h := range ev.Hostnames {
		addUnmatched("name:"+h.Hostname, UnmatchedExport{Hostname: h.Hostname}, h.ShareID)
	}

	for _, sn := range ev.ShareNetworks {
		for _, sub := range sn.Subnets {
			if sub.NeutronNetID == "" {
				continue
			}
			n := byID[sub.NeutronNetID]
			if n == nil {
				rk.Notes = append(rk.Notes, fmt.Sprintf("share network %s uses network %s, which this project cannot see", coalesce(sn.Name, sn.ID), sub.NeutronNetID))
				continue
			}
			st := state(n)
			name := coalesce(sn.Name, sn.ID)
			if !slices.Contains(st.snNames, name) {
				st.snNames = append(st.snNames, name)
			}
		}
	}

	for _, st := range states {
		c := &st.cand
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
		rk.Candidates = append(rk.Candidates, *c)
	}

	if len(rk.Candidates) == 0 && len(ev.Exports) == 0 && len(ev.Hostnames) == 0 {
		for _, n := range networks {
			if storageName.MatchString(n.Name) {
				c := Candidate{Network: n, Score: scoreNameHint, Confidence: ConfidenceLow,
					Reasons: []string{fmt.Sprintf("Manila shows no share or share network yet; guessed from the name %q only", n.Name)}}
				if n.Shared {
					c.Score += scoreShared
					c.Reasons = append(c.Reasons, "shared with all projects, as provider storage networks usually are")
				}
				rk.Candidates = append(rk.Candidates, c)
			}
		}
	}

	slices.SortFunc(rk.Candidates, func(a, b Candidate) int {
		return cmp.Or(-cmp.Compare(a.Score, b.Score), -cmp.Compare(a.Shares, b.Shares),
			cmp.Compare(a.Network.Name, b.Network.Name), cmp.Compare(a.Network.ID, b.Network.ID))
	})
	for _, u := range unmatched {
		rk.Unmatched = append(rk.Unmatched, *u)
	}
	slices.SortFunc(rk.Unmatched, func(a, b UnmatchedExport) int {
		return cmp.Or(a.Address.Compare(b.Address), cmp.Compare(a.Hostname, b.Hostname))
	})
	return rk
}

// exportReasons words the exports of one network: per subnet, which addresses and how many shares.
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
