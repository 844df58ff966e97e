package openstack

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func net1(id, name string, shared bool, cidrs ...string) Network {
	n := Network{ID: id, Name: name, Shared: shared}
	for i, c := range cidrs {
		p := netip.MustParsePrefix(c)
		v := 4
		if p.Addr().Is6() {
			v = 6
		}
		n.Subnets = append(n.Subnets, Subnet{ID: id + "-sub" + string(rune('0'+i)), Name: name + "-subnet", NetworkID: id, CIDR: p, IPVersion: v})
	}
	return n
}

func export(share, addr string, preferred bool) ShareExport {
	return ShareExport{ShareID: share, ShareName: share, Protocol: "NFS", Address: netip.MustParseAddr(addr), Preferred: preferred}
}

func names(cands []Candidate) string {
	var s []string
	for _, c := range cands {
		s = append(s, c.Network.Name)
	}
	return strings.Join(s, ",")
}

func hasReason(c Candidate, part string) bool {
	for _, r := range c.Reasons {
		if strings.Contains(r, part) {
			return true
		}
	}
	return false
}

func TestRankSeededLayout(t *testing.T) {
	nets := []Network{
		net1("t", "tenant", false, "10.196.0.0/16"),
		net1("s", "storage", true, "10.0.0.0/24"),
		net1("d", "decoy", false, "192.168.50.0/24"),
	}
	ev := Evidence{Exports: []ShareExport{export("nfs-share", "10.0.0.10", true), export("nfs-share", "10.0.0.20", false)}}
	rk := Rank(nets, ev)
	if names(rk.Candidates) != "storage" {
		t.Fatalf("candidates %q, want storage only", names(rk.Candidates))
	}
	c := rk.Candidates[0]
	if c.Confidence != ConfidenceHigh || c.Shares != 1 || len(c.Exports) != 2 {
		t.Errorf("candidate %+v", c)
	}
	if c.Score != scorePreferredShare+scoreShared {
		t.Errorf("score %d", c.Score)
	}
	for _, want := range []string{"1 share is exported on it", "export addresses 10.0.0.10 (preferred), 10.0.0.20 in subnet storage-subnet (10.0.0.0/24)", "shared with all projects"} {
		if !hasReason(c, want) {
			t.Errorf("reasons %q lack %q", c.Reasons, want)
		}
	}
	if len(rk.Unmatched) != 0 {
		t.Errorf("unmatched %v", rk.Unmatched)
	}
}

func TestRankTwoStorageNetworksAndIPv6(t *testing.T) {
	nets := []Network{
		net1("a", "storage-a", false, "10.0.0.0/24"),
		net1("b", "storage-v6", false, "fd00:5::/64", "10.1.0.0/24"),
		net1("c", "storage-sn", false, "fd00:6::/64"),
		net1("d", "decoy", false, "192.168.0.0/24"),
	}
	ev := Evidence{
		Exports: []ShareExport{
			export("s1", "10.0.0.10", true), export("s1", "10.0.0.20", false),
			export("s2", "fd00:5::10", true), export("s3", "fd00:5::10", true), export("s3", "10.1.0.9", false),
		},
		ShareNetworks: []ShareNetwork{{ID: "sn1", Name: "dhss", Subnets: []ShareNetworkSubnet{{NeutronNetID: "c"}}},
			{ID: "sn2", Name: "gone", Subnets: []ShareNetworkSubnet{{NeutronNetID: "invisible"}}}},
	}
	rk := Rank(nets, ev)
	if got := names(rk.Candidates); got != "storage-v6,storage-a,storage-sn" {
		t.Fatalf("order %q", got)
	}
	v6 := rk.Candidates[0]
	if v6.Shares != 2 || !hasReason(v6, "fd00:5::10 (preferred) in subnet storage-v6-subnet (fd00:5::/64)") || !hasReason(v6, "10.1.0.9 in subnet") {
		t.Errorf("storage-v6: %d shares, reasons %q", v6.Shares, v6.Reasons)
	}
	sn := rk.Candidates[2]
	if sn.Confidence != ConfidenceMedium || sn.Score != scoreShareNetwork || !hasReason(sn, `share network "dhss" places share servers`) {
		t.Errorf("storage-sn: %+v", sn)
	}
	if len(rk.Notes) != 1 || !strings.Contains(rk.Notes[0], "share network gone uses network invisible") {
		t.Errorf("notes %q", rk.Notes)
	}
}

func TestRankLongestPrefixWins(t *testing.T) {
	nets := []Network{net1("w", "wide", true, "10.0.0.0/16"), net1("n", "narrow", false, "10.0.0.0/28")}
	rk := Rank(nets, Evidence{Exports: []ShareExport{export("s", "10.0.0.10", true)}})
	if names(rk.Candidates) != "narrow" {
		t.Fatalf("candidates %q", names(rk.Candidates))
	}
	if !hasReason(rk.Candidates[0], "10.0.0.10 is also inside 10.0.0.0/16 of network wide; the narrower subnet 10.0.0.0/28 wins") {
		t.Errorf("reasons %q", rk.Candidates[0].Reasons)
	}
}

func TestRankAmbiguousEqualSubnets(t *testing.T) {
	nets := []Network{net1("x", "x", false, "10.0.0.0/24"), net1("y", "y", true, "10.0.0.0/24")}
	rk := Rank(nets, Evidence{Exports: []ShareExport{export("s", "10.0.0.10", true)}})
	if names(rk.Candidates) != "y,x" {
		t.Fatalf("candidates %q (shared should break the tie)", names(rk.Candidates))
	}
	for _, c := range rk.Candidates {
		if !c.Exports[0].Ambiguous || !hasReason(c, "equally specific subnet") {
			t.Errorf("%s: not marked ambiguous: %q", c.Network.Name, c.Reasons)
		}
	}
}

func TestRankPreferredBeatsMore(t *testing.T) {
	nets := []Network{net1("p", "pref", false, "10.0.0.0/24"), net1("o", "other", false, "10.9.0.0/24")}
	ev := Evidence{Exports: []ShareExport{
		export("s1", "10.0.0.10", true), export("s1", "10.9.0.10", false),
		export("s2", "10.0.0.10", true), export("s2", "10.9.0.10", false),
	}}
	rk := Rank(nets, ev)
	if names(rk.Candidates) != "pref,other" || rk.Candidates[0].Score != 2*scorePreferredShare || rk.Candidates[1].Score != 2*scoreShare {
		t.Errorf("candidates %q scores %d/%d", names(rk.Candidates), rk.Candidates[0].Score, rk.Candidates[1].Score)
	}
}

func TestRankUnmatchedAndHostnames(t *testing.T) {
	nets := []Network{net1("t", "tenant", false, "10.196.0.0/16")}
	ev := Evidence{
		Exports:   []ShareExport{export("s1", "172.16.0.5", true), export("s2", "172.16.0.5", true)},
		Hostnames: []ShareExport{{ShareID: "s3", Hostname: "filer.example.com"}},
	}
	rk := Rank(nets, ev)
	if len(rk.Candidates) != 0 {
		t.Errorf("candidates %q, want none (a name hint must not appear when Manila has exports)", names(rk.Candidates))
	}
	if len(rk.Unmatched) != 2 || rk.Unmatched[0].Hostname != "filer.example.com" || rk.Unmatched[1].Address.String() != "172.16.0.5" || rk.Unmatched[1].Shares != 2 {
		t.Errorf("unmatched %+v", rk.Unmatched)
	}
}

func TestRankNameHintOnlyWithoutEvidence(t *testing.T) {
	nets := []Network{net1("t", "tenant", false, "10.196.0.0/16"), net1("s", "Storage-NFS", true, "10.0.0.0/24")}
	rk := Rank(nets, Evidence{})
	if names(rk.Candidates) != "Storage-NFS" || rk.Candidates[0].Confidence != ConfidenceLow || !hasReason(rk.Candidates[0], "guessed from the name") {
		t.Errorf("candidates %+v", rk.Candidates)
	}
}

func TestRankIgnoresInvalidAddresses(t *testing.T) {
	nets := []Network{net1("s", "storage", false, "10.0.0.0/24")}
	rk := Rank(nets, Evidence{Exports: []ShareExport{{ShareID: "x"}}})
	if len(rk.Candidates) != 0 || len(rk.Unmatched) != 0 {
		t.Errorf("%+v", rk)
	}
}

// BenchmarkRank ranks 2000 networks against 500 shares with 3 export addresses each.
func BenchmarkRank(b *testing.B) {
	var nets []Network
	for i := 0; i < 2000; i++ {
		nets = append(nets, net1(strconv.Itoa(i), "net-"+strconv.Itoa(i), false, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(16 + i/256%16), byte(i % 256), 0}), 24).String()))
	}
	nets = append(nets, net1("s", "storage", true, "10.0.0.0/24"))
	var ev Evidence
	for i := 0; i < 500; i++ {
		id := "share-" + strconv.Itoa(i)
		ev.Exports = append(ev.Exports, export(id, "10.0.0.10", true), export(id, "10.0.0.20", false), export(id, "11.0.0.11", false))
	}
	for b.Loop() {
		rk := Rank(nets, ev)
		if rk.Candidates[0].Network.Name != "storage" {
			b.Fatal(rk.Candidates[0].Network.Name)
		}
	}
}
