package openstack

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"net/url"
	"slices"
)

// AddressRange is one allocation pool of a subnet: the addresses Neutron hands out to ports
// that ask for none in particular, First to Last inclusive.
type AddressRange struct {
	First netip.Addr `json:"start"`
	Last  netip.Addr `json:"end"`
}

// Contains reports whether a lies in the range.
func (r AddressRange) Contains(a netip.Addr) bool {
	a = a.Unmap()
	return a.BitLen() == r.First.BitLen() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

// Size is the number of addresses of the range (0 for a range that is not one).
func (r AddressRange) Size() *big.Int {
	if !r.First.IsValid() || !r.Last.IsValid() || r.First.BitLen() != r.Last.BitLen() || r.Last.Less(r.First) {
		return new(big.Int)
	}
	first, last := new(big.Int).SetBytes(r.First.AsSlice()), new(big.Int).SetBytes(r.Last.AsSlice())
	return last.Sub(last, first).Add(last, big.NewInt(1))
}

// SubnetCapacity is how many more ports a subnet can give an address: the size of its
// allocation pools minus the fixed IPs of its ports that lie in them. Addresses outside the
// pools (the gateway, fixed IPs given by hand outside them) take nothing from the pools.
type SubnetCapacity struct {
	Subnet Subnet         `json:"subnet"`
	Pools  []AddressRange `json:"allocationPools"`
	// Size is the number of addresses of the pools; Used those of them ports hold; Free the rest.
	// For IPv6 subnets they are capped at MaxCount.
	Size int64 `json:"size"`
	Used int64 `json:"used"`
	Free int64 `json:"free"`
}

// MaxCount caps the counts of SubnetCapacity: an IPv6 pool is, for machines, endless.
const MaxCount = int64(1) << 40

// Ref names the subnet with its range: name (ID) CIDR.
func (c SubnetCapacity) Ref() string {
	return fmt.Sprintf("%s %s", c.Subnet.Ref(), c.Subnet.CIDR)
}

// CountFree counts the addresses of pools that used does not hold: each address in a pool
// counts once, however many ports (or fixed IPs) name it.
func CountFree(pools []AddressRange, used []netip.Addr) (size, inUse, free int64) {
	total := new(big.Int)
	for _, p := range pools {
		total.Add(total, p.Size())
	}
	size = MaxCount
	if total.IsInt64() && total.Int64() < MaxCount {
		size = total.Int64()
	}
	seen := map[netip.Addr]bool{}
	for _, a := range used {
		a = a.Unmap()
		if seen[a] || !slices.ContainsFunc(pools, func(p AddressRange) bool { return p.Contains(a) }) {
			continue
		}
		seen[a] = true
		inUse++
	}
	free = max(size-inUse, 0)
	return size, inUse, free
}

type wireCapacitySubnet struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	NetworkID string `json:"network_id"`
	CIDR      string `json:"cidr"`
	IPVersion int    `json:"ip_version"`
	DHCP      *bool  `json:"enable_dhcp"`
	Pools     []struct {
		Start string `json:"start"`
		End   string `json:"end"`
	} `json:"allocation_pools"`
}

type wireFixedIPs struct {
	FixedIPs []struct {
		SubnetID  string `json:"subnet_id"`
		IPAddress string `json:"ip_address"`
	} `json:"fixed_ips"`
}

// NetworkCapacity counts the free addresses of the subnets of a network: one request for the
// subnets (with their allocation pools), then one per subnet (per page) for the fixed IPs of
// the ports on it (Neutron's fixed_ips=subnet_id= filter). Subnets are sorted as Networks sorts
// them: IPv4 first, then by address.
func (c *Client) NetworkCapacity(ctx context.Context, networkID string) ([]SubnetCapacity, error) {
	q := url.Values{"network_id": {networkID}, "fields": {"id", "name", "network_id", "cidr", "ip_version", "enable_dhcp", "allocation_pools"}}
	wires, err := neutronList[wireCapacitySubnet](ctx, c, call{service: "Neutron", what: "listing the subnets of network " + networkID}, "subnets", "subnets", q)
	if err != nil {
		return nil, err
	}
	var out []SubnetCapacity
	for _, w := range wires {
		p, err := netip.ParsePrefix(w.CIDR)
		if err != nil {
			continue
		}
		sc := SubnetCapacity{Subnet: Subnet{ID: w.ID, Name: w.Name, NetworkID: w.NetworkID, CIDR: p.Masked(), IPVersion: w.IPVersion, DHCP: w.DHCP == nil || *w.DHCP}}
		for _, pool := range w.Pools {
			first, ferr := netip.ParseAddr(pool.Start)
			last, lerr := netip.ParseAddr(pool.End)
			if ferr == nil && lerr == nil {
				sc.Pools = append(sc.Pools, AddressRange{First: first.Unmap(), Last: last.Unmap()})
			}
		}
		ports, err := neutronList[wireFixedIPs](ctx, c, call{service: "Neutron", what: "listing the ports of subnet " + w.ID}, "ports", "ports",
			url.Values{"fixed_ips": {"subnet_id=" + w.ID}, "fields": {"fixed_ips"}})
		if err != nil {
			return nil, err
		}
		var used []netip.Addr
		for _, port := range ports {
			for _, ip := range port.FixedIPs {
				if ip.SubnetID != w.ID {
					continue
				}
				if a, err := netip.ParseAddr(ip.IPAddress); err == nil {
					used = append(used, a)
				}
			}
		}
		sc.Size, sc.Used, sc.Free = CountFree(sc.Pools, used)
		out = append(out, sc)
	}
	slices.SortFunc(out, func(a, b SubnetCapacity) int {
		return cmp.Or(cmp.Compare(a.Subnet.IPVersion, b.Subnet.IPVersion), a.Subnet.CIDR.Addr().Compare(b.Subnet.CIDR.Addr()))
	})
	return out, nil
}
