package attach

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// countingTarget is a memTarget whose objects have replicas.
type countingTarget struct {
	*memTarget
	replicas map[string]int
}

func (c countingTarget) Replicas(o string) int { return c.replicas[o] }

func storageCapacity(free int64) NetworkCapacity {
	pool := openstack.AddressRange{First: netip.MustParseAddr("10.0.0.100"), Last: netip.MustParseAddr("10.0.0.104")}
	return NetworkCapacity{Network: net1.Networks[0], Label: "storage (" + net1.Networks[0] + ")", Subnets: []openstack.SubnetCapacity{
		{Subnet: openstack.Subnet{ID: "sub-4", Name: "storage-v4", IPVersion: 4, CIDR: netip.MustParsePrefix("10.0.0.0/24")}, Pools: []openstack.AddressRange{pool}, Size: 5, Used: 5 - free, Free: free},
		{Subnet: openstack.Subnet{ID: "sub-6", Name: "storage-v6", IPVersion: 6, CIDR: netip.MustParsePrefix("fd00::/64")}, Size: openstack.MaxCount, Free: openstack.MaxCount},
	}}
}

func TestPatchRefusesMoreMachinesThanAddresses(t *testing.T) {
	target := countingTarget{
		memTarget: &memTarget{objects: []Selected[string]{{Object: "a"}, {Object: "b"}, {Object: "c"}}, has: map[string]bool{"c": true}},
		replicas:  map[string]int{"a": 2, "b": 2, "c": 9},
	}
	check := &CapacityCheck{Networks: []NetworkCapacity{storageCapacity(4)}, Surge: 1}
	_, err := Patch(context.Background(), target, Options{Attachment: net1, Capacity: check})
	var ce *CapacityError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CapacityError", err)
	}
	if ce.Needed != 5 || ce.Free != 4 || len(ce.Demand) != 2 {
		t.Errorf("needed %d, free %d, demand %v; want 5 (2+2, c has the network, and a surge of 1), 4, a and b", ce.Needed, ce.Free, ce.Demand)
	}
	if len(target.written) != 0 {
		t.Errorf("written %v, want nothing", target.written)
	}
	for _, want := range []string{"has 4 free addresses, but 5 are needed", "4 machines get a port on it (Thing a (2), Thing b (2)) plus 1 more",
		"1 machines would get no address", "subnet storage-v4 (sub-4) 10.0.0.0/24 (allocation pool 10.0.0.100-10.0.0.104: 5 addresses, 1 in use, 4 free)",
		"Fix: enlarge the allocation pool"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q:\n%s", want, err)
		}
	}
	if strings.Contains(err.Error(), "storage-v6") {
		t.Errorf("the IPv6 subnet counts when an IPv4 one is there:\n%s", err)
	}

	// Enough addresses: written.
	target.memTarget.written = nil
	check = &CapacityCheck{Networks: []NetworkCapacity{storageCapacity(5)}, Surge: 1}
	if _, err := Patch(context.Background(), target, Options{Attachment: net1, Capacity: check}); err != nil {
		t.Fatal(err)
	}
	if len(target.written) != 2 {
		t.Errorf("written %v, want a and b", target.written)
	}
}

func TestPatchCapacityForcedWarnsAndWrites(t *testing.T) {
	target := countingTarget{memTarget: &memTarget{objects: []Selected[string]{{Object: "a"}}}, replicas: map[string]int{"a": 3}}
	var warned []string
	check := &CapacityCheck{Networks: []NetworkCapacity{storageCapacity(1)}, Surge: 1, Force: true, Warn: func(e *CapacityError) { warned = append(warned, e.Error()) }}
	if _, err := Patch(context.Background(), target, Options{Attachment: net1, Capacity: check}); err != nil {
		t.Fatal(err)
	}
	if len(target.written) != 1 || len(warned) != 1 || !strings.Contains(warned[0], "has 1 free addresses, but 4 are needed") {
		t.Errorf("written %v, warned %q; want a written and one warning", target.written, warned)
	}
}

// A check shared by two kinds counts the machines of both against the same addresses.
func TestCapacitySharedByKinds(t *testing.T) {
	check := &CapacityCheck{Networks: []NetworkCapacity{storageCapacity(4)}, Surge: 1}
	first := countingTarget{memTarget: &memTarget{objects: []Selected[string]{{Object: "a"}}}, replicas: map[string]int{"a": 2}}
	second := countingTarget{memTarget: &memTarget{objects: []Selected[string]{{Object: "b"}}}, replicas: map[string]int{"b": 2}}
	if _, err := Patch(context.Background(), first, Options{Attachment: net1, Capacity: check}); err != nil {
		t.Fatal(err)
	}
	_, err := Patch(context.Background(), second, Options{Attachment: net1, Capacity: check})
	var ce *CapacityError
	if !errors.As(err, &ce) || ce.Needed != 5 {
		t.Fatalf("err = %v, want a *CapacityError needing 5", err)
	}
}

func TestCapacityErrorWithoutSurge(t *testing.T) {
	e := &CapacityError{Network: storageCapacity(1), Demand: []Demand{{Ref: Ref{Kind: "NodePool", Name: "np"}, Replicas: 2}}, Needed: 2, Free: 1}
	if msg := e.Error(); !strings.Contains(msg, "2 machines get a port on it (NodePool np (2)); 1 machines would get no address") {
		t.Errorf("message:\n%s", msg)
	}
}

func TestNetworkCapacityCountsIPv6WithoutIPv4(t *testing.T) {
	n := NetworkCapacity{Subnets: []openstack.SubnetCapacity{{Subnet: openstack.Subnet{IPVersion: 6}, Free: 7}}}
	if n.Free() != 7 {
		t.Errorf("Free = %d, want 7", n.Free())
	}
	n.Subnets = append(n.Subnets, openstack.SubnetCapacity{Subnet: openstack.Subnet{IPVersion: 4}, Free: 2}, openstack.SubnetCapacity{Subnet: openstack.Subnet{IPVersion: 4}, Free: 3})
	if n.Free() != 5 {
		t.Errorf("Free = %d, want 5 (the IPv4 subnets)", n.Free())
	}
}
