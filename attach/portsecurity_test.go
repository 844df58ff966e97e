package attach

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

const (
	offNet     = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"
	onNet      = "0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37"
	unknownNet = "9a7c1e2b-3d4f-4a5b-8c6d-7e8f9a0b1c2d"
	nfsGroup   = "77c0a1d2-1111-4111-8111-111111111111"
)

// portSecurityDiscovery is a discovery of three networks Manila exports on: port security off,
// on, and not reported (the extension is off).
func portSecurityDiscovery() *openstack.Discovery {
	off, on := false, true
	nets := []openstack.Network{
		{ID: offNet, Name: "no-port-sec", PortSecurity: &off, Subnets: []openstack.Subnet{fitSubnet("a", "10.0.0.0/24")}},
		{ID: onNet, Name: "port-sec", PortSecurity: &on, Subnets: []openstack.Subnet{fitSubnet("b", "10.0.1.0/24")}},
		{ID: unknownNet, Name: "no-extension", Subnets: []openstack.Subnet{fitSubnet("c", "10.0.2.0/24")}},
	}
	d := &openstack.Discovery{Networks: nets}
	for i, n := range nets {
		d.Candidates = append(d.Candidates, openstack.Candidate{Network: n, Exports: []openstack.NetworkExport{{Address: netip.AddrFrom4([4]byte{10, 0, byte(i), 10})}}})
	}
	return d
}

// TestResolveNamesNetworksWithoutPortSecurity: only a network whose port_security_enabled is
// false is named (an unreported one is not); asking for security groups on it is refused, and
// --force still names it, so that its port is written without port security.
func TestResolveNamesNetworksWithoutPortSecurity(t *testing.T) {
	d := portSecurityDiscovery()
	all := []string{onNet, offNet, unknownNet}
	got, err := Resolve(d, "demo", all, NetworkPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.PortSecurityDisabled, []string{offNet}) {
		t.Errorf("PortSecurityDisabled %v, want [%s]", got.PortSecurityDisabled, offNet)
	}
	a := got.Attachment(nil)
	if !slices.Equal(a.Networks, all) || !a.PortSecurityOff(offNet) || a.PortSecurityOff(onNet) || a.PortSecurityOff(unknownNet) || len(a.Validate()) != 0 {
		t.Errorf("attachment %+v (errors %v)", a, a.Validate())
	}

	if got, err := Resolve(d, "demo", []string{onNet}, NetworkPolicy{SecurityGroups: true}); err != nil || len(got.PortSecurityDisabled) != 0 {
		t.Errorf("port security on, groups asked: %v, %v", err, got.PortSecurityDisabled)
	}
	_, err = Resolve(d, "demo", []string{offNet}, NetworkPolicy{SecurityGroups: true})
	var refused *NetworkPolicyError
	if !errors.As(err, &refused) || len(refused.Problems) != 1 || refused.Problems[0].Finding.ID != FindingPortSecurityOff {
		t.Fatalf("port security off, groups asked: %v", err)
	}
	got, err = Resolve(d, "demo", []string{offNet}, NetworkPolicy{SecurityGroups: true, Force: true})
	if err != nil || len(got.Forced) != 1 || !slices.Equal(got.PortSecurityDisabled, []string{offNet}) {
		t.Errorf("port security off, groups forced: %v, %+v", err, got)
	}
	if a := got.Attachment([]string{nfsGroup}); !slices.Equal(a.SecurityGroups, []string{nfsGroup}) || !a.PortSecurityOff(offNet) {
		t.Errorf("forced attachment %+v", a)
	}
}

// TestRecordOfPortSecurity: the record names a network as written without port security only
// when it was attached in that run, keeps what earlier runs recorded, and an attachment that
// names such a network it does not attach is invalid.
func TestRecordOfPortSecurity(t *testing.T) {
	now := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	first := (*Record)(nil).Merged(Attachment{Networks: []string{offNet}, PortSecurityDisabled: []string{offNet}}, now, "test")
	if !slices.Equal(first.PortSecurityDisabled, []string{offNet}) {
		t.Errorf("first record %+v", first)
	}
	second := first.Merged(Attachment{Networks: []string{onNet}, PortSecurityDisabled: []string{offNet}}, now, "test")
	if !slices.Equal(second.Networks, []string{offNet, onNet}) || !slices.Equal(second.PortSecurityDisabled, []string{offNet}) {
		t.Errorf("second record %+v", second)
	}
	if none := (*Record)(nil).Merged(Attachment{Networks: []string{onNet}, PortSecurityDisabled: []string{offNet}}, now, "test"); len(none.PortSecurityDisabled) != 0 {
		t.Errorf("a network not attached is recorded without port security: %+v", none)
	}
	errs := Attachment{Networks: []string{onNet}, PortSecurityDisabled: []string{offNet}}.Validate()
	if len(errs) != 1 || errs[0].Field != "portSecurityDisabled[0]" {
		t.Errorf("Validate: %v", errs)
	}
}
