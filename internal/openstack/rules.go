package openstack

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// PortRange is a protocol and an inclusive range of ports a share protocol's clients open
// connections to.
type PortRange struct {
	Protocol string `json:"protocol"` // tcp or udp
	Min      int    `json:"min"`
	Max      int    `json:"max"`
	// Optional ranges are needed only by some setups (e.g. rpcbind for NFSv3).
	Optional bool   `json:"optional,omitempty"`
	Why      string `json:"why,omitempty"`
}

func (p PortRange) String() string {
	if p.Min == p.Max {
		return fmt.Sprintf("%d/%s", p.Min, p.Protocol)
	}
	return fmt.Sprintf("%d-%d/%s", p.Min, p.Max, p.Protocol)
}

// ProtocolTraffic is what the clients of a share protocol need to reach on the storage side.
var ProtocolTraffic = map[string][]PortRange{
	"NFS": {
		{Protocol: "tcp", Min: 2049, Max: 2049, Why: "nfsd"},
		{Protocol: "tcp", Min: 111, Max: 111, Optional: true, Why: "rpcbind, NFSv3 only"},
		{Protocol: "udp", Min: 111, Max: 111, Optional: true, Why: "rpcbind, NFSv3 only"},
	},
	"CEPHFS": {
		{Protocol: "tcp", Min: 3300, Max: 3300, Why: "Ceph monitors (msgr2)"},
		{Protocol: "tcp", Min: 6789, Max: 6789, Why: "Ceph monitors (msgr1)"},
		{Protocol: "tcp", Min: 6800, Max: 7300, Why: "Ceph OSDs and MDS"},
	},
}

// TrafficVerdict says whether ports with a set of security groups can reach a share protocol's
// servers. Neutron groups are stateful and additive: a connection is allowed when any egress
// rule of any of the port's groups allows it, and the answers come back by themselves.
type TrafficVerdict struct {
	Protocol    string      `json:"protocol"` // NFS or CEPHFS
	Destination netip.Addr  `json:"destination,omitzero"`
	Allowed     bool        `json:"allowed"` // every required range is open
	Blocked     []PortRange `json:"blocked,omitempty"`
	Summary     string      `json:"summary"`
}

// CheckEgress decides, from the rules alone, whether a port with groups can open connections
// to dest (zero: any storage address) for protocol ("NFS" or "CEPHFS"). Rules that allow only a
// remote group are not counted: the storage servers are not members of the project's groups.
// portSecurity=false means Neutron filters nothing on the port.
func CheckEgress(groups []SecurityGroup, portSecurity bool, dest netip.Addr, protocol string) TrafficVerdict {
	protocol = strings.ToUpper(protocol)
	v := TrafficVerdict{Protocol: protocol, Destination: dest, Allowed: true}
	needs := ProtocolTraffic[protocol]
	if !portSecurity {
		v.Summary = fmt.Sprintf("%s traffic is not filtered: port security is off", protocol)
		return v
	}
	for _, need := range needs {
		for _, gap := range uncovered(need, egressRules(groups, dest, need.Protocol)) {
			v.Blocked = append(v.Blocked, gap)
			if !gap.Optional {
				v.Allowed = false
			}
		}
	}
	names := groupNames(groups)
	switch {
	case len(v.Blocked) == 0:
		v.Summary = fmt.Sprintf("%s is allowed by security groups %s", protocol, names)
	case v.Allowed:
		v.Summary = fmt.Sprintf("%s over NFSv4 is allowed by security groups %s; %s blocked (%s)", protocol, names, rangesString(v.Blocked), v.Blocked[0].Why)
	default:
		v.Summary = fmt.Sprintf("security groups %s would block %s: no egress rule allows %s%s", names, protocol, rangesString(v.Blocked), toDest(dest))
	}
	return v
}

func toDest(dest netip.Addr) string {
	if !dest.IsValid() {
		return ""
	}
	return " to " + dest.String()
}

func groupNames(groups []SecurityGroup) string {
	if len(groups) == 0 {
		return "(none)"
	}
	var names []string
	for _, g := range groups {
		names = append(names, coalesce(g.Name, g.ID))
	}
	return strings.Join(names, ", ")
}

func rangesString(rs []PortRange) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.String())
	}
	return strings.Join(s, ", ")
}

// egressRules returns the port intervals that egress rules open for proto towards dest.
func egressRules(groups []SecurityGroup, dest netip.Addr, proto string) [][2]int {
	var open [][2]int
	for _, g := range groups {
		for _, r := range g.Rules {
			if !strings.EqualFold(r.Direction, "egress") || !ruleProtocolMatches(r.Protocol, proto) {
				continue
			}
			if !ruleRemoteMatches(r, dest) {
				continue
			}
			lo, hi := r.PortMin, r.PortMax
			if lo == 0 && hi == 0 {
				lo, hi = 1, 65535
			} else if hi == 0 {
				hi = lo
			}
			open = append(open, [2]int{lo, hi})
		}
	}
	return open
}

func ruleProtocolMatches(ruleProto, proto string) bool {
	switch strings.ToLower(ruleProto) {
	case "", "any", "null":
		return true
	case proto:
		return true
	}
	numbers := map[string]string{"tcp": "6", "udp": "17"}
	return ruleProto == numbers[proto]
}

func ruleRemoteMatches(r Rule, dest netip.Addr) bool {
	if r.RemoteGroupID != "" {
		return false
	}
	family := "IPv4"
	if dest.IsValid() && dest.Is6() {
		family = "IPv6"
	}
	if r.EtherType != "" && !strings.EqualFold(r.EtherType, family) {
		return false
	}
	if r.RemoteIPPrefix == "" {
		return true
	}
	p, err := netip.ParsePrefix(r.RemoteIPPrefix)
	if err != nil {
		if a, err := netip.ParseAddr(r.RemoteIPPrefix); err == nil {
			p = netip.PrefixFrom(a, a.BitLen())
		} else {
			return false
		}
	}
	if !dest.IsValid() {
		return p.Bits() == 0 // without a destination only "anywhere" counts
	}
	return p.Contains(dest)
}

// uncovered returns the parts of need that no interval in open covers.
func uncovered(need PortRange, open [][2]int) []PortRange {
	slices.SortFunc(open, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	var gaps []PortRange
	next := need.Min
	for _, o := range open {
		if o[1] < next || o[0] > need.Max {
			continue
		}
		if o[0] > next {
			gap := need
			gap.Min, gap.Max = next, o[0]-1
			gaps = append(gaps, gap)
		}
		next = max(next, o[1]+1)
		if next > need.Max {
			return gaps
		}
	}
	if next <= need.Max {
		gap := need
		gap.Min = next
		gaps = append(gaps, gap)
	}
	return gaps
}
