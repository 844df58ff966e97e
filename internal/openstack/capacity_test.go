package openstack

import (
	"net/netip"
	"testing"
)

func TestCountFree(t *testing.T) {
	r := func(a, b string) AddressRange {
		return AddressRange{First: netip.MustParseAddr(a), Last: netip.MustParseAddr(b)}
	}
	ips := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x))
		}
		return out
	}
	for _, tc := range []struct {
		name              string
		pools             []AddressRange
		used              []netip.Addr
		size, inUse, free int64
	}{
		{"the issue's pool, empty", []AddressRange{r("10.0.0.100", "10.0.0.250")}, nil, 151, 0, 151},
		{"one address", []AddressRange{r("10.0.0.5", "10.0.0.5")}, nil, 1, 0, 1},
		{"ports in the pool", []AddressRange{r("10.0.0.100", "10.0.0.250")}, ips("10.0.0.100", "10.0.0.101", "10.0.0.250"), 151, 3, 148},
		{"ports outside the pool take nothing", []AddressRange{r("10.0.0.100", "10.0.0.109")}, ips("10.0.0.1", "10.0.0.2", "10.0.0.99", "10.0.0.110", "10.0.1.100"), 10, 0, 10},
		{"several pools", []AddressRange{r("10.0.0.10", "10.0.0.19"), r("10.0.0.200", "10.0.0.204")}, ips("10.0.0.10", "10.0.0.204", "10.0.0.100"), 15, 2, 13},
		{"an address counted once", []AddressRange{r("192.168.1.2", "192.168.1.3")}, ips("192.168.1.2", "192.168.1.2"), 2, 1, 1},
		{"full", []AddressRange{r("192.168.1.2", "192.168.1.3")}, ips("192.168.1.2", "192.168.1.3"), 2, 2, 0},
		{"a pool across an octet", []AddressRange{r("10.0.0.250", "10.0.1.4")}, ips("10.0.1.0"), 11, 1, 10},
		{"IPv4-mapped addresses", []AddressRange{r("10.0.0.1", "10.0.0.4")}, ips("::ffff:10.0.0.2"), 4, 1, 3},
		{"no pools", nil, ips("10.0.0.1"), 0, 0, 0},
		{"a reversed range is empty", []AddressRange{r("10.0.0.9", "10.0.0.1")}, nil, 0, 0, 0},
		{"IPv6 capped", []AddressRange{r("fd00::2", "fd00::ffff:ffff:ffff:ffff")}, ips("fd00::2"), MaxCount, 1, MaxCount - 1},
		{"IPv4 address not in an IPv6 pool", []AddressRange{r("fd00::2", "fd00::9")}, ips("10.0.0.2"), 8, 0, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			size, inUse, free := CountFree(tc.pools, tc.used)
			if size != tc.size || inUse != tc.inUse || free != tc.free {
				t.Errorf("CountFree = size %d, used %d, free %d; want %d, %d, %d", size, inUse, free, tc.size, tc.inUse, tc.free)
			}
		})
	}
}
