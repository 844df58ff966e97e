//go:build integration

package openstack

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"

	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestUpdateSubnetMakesItFitAsASecondNIC: a subnet as Neutron makes it by default (a gateway,
// no dns_nameservers) plus a default host route and another route is changed to no gateway, DNS
// 0.0.0.0 and only the other route, as read back from Neutron; a subnet of another project's
// network shared with this one through RBAC is refused as KindForbidden naming the owner, and
// stays as it was; a subnet nobody has is KindNotFound.
func TestUpdateSubnetMakesItFitAsASecondNIC(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "subnet-fix")
	own := p.CreateNetworkWith("fix-me", nil, map[string]any{"cidr": "10.61.0.0/24",
		"host_routes": []map[string]string{{"destination": "0.0.0.0/0", "nexthop": "10.61.0.254"}, {"destination": "192.168.7.0/24", "nexthop": "10.61.0.253"}}})
	other := ostest.NewProject(t, cloud, "subnet-owner")
	theirs := other.CreateNetworkWith("not-yours", nil, map[string]any{"cidr": "10.62.0.0/24"})
	shareNetwork(t, other.CloudsFile, theirs.ID, p.ID)

	c, cnt := connect(t, cloud, ostest.CloudName, func(cfg *Config) { cfg.CloudsFile = p.CloudsFile })
	ctx := testContext(t, 2*time.Minute)
	before, err := c.Network(ctx, own.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := before.Subnets[0]; s.Gateway != netip.MustParseAddr("10.61.0.1") || len(s.DNS) != 0 || len(s.HostRoutes) != 2 {
		t.Fatalf("the subnet is not as Neutron makes it by default: %+v", s)
	}

	cnt.reset()
	start := time.Now()
	got, err := c.UpdateSubnet(ctx, SubnetUpdate{SubnetID: own.SubnetIDs[0], NoGateway: true, DropDefaultRoutes: true, NoDNS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("updated in %s", time.Since(start).Round(time.Millisecond))
	if n := cnt.get("PUT /v2.0/subnets/{id}"); n != 1 || cnt.get("GET /v2.0/subnets/{id}") != 1 {
		total, detail := cnt.snapshot()
		t.Errorf("requests (%d):\n%s", total, detail)
	}
	keep := []Route{{Destination: netip.MustParsePrefix("192.168.7.0/24"), NextHop: netip.MustParseAddr("10.61.0.253")}}
	after, err := c.Network(ctx, own.ID)
	if err != nil {
		t.Fatal(err)
	}
	for what, s := range map[string]Subnet{"answer": got, "read back": after.Subnets[0]} {
		if s.Gateway.IsValid() || !slices.Equal(s.DNS, []string{"0.0.0.0"}) || !slices.Equal(s.HostRoutes, keep) || s.ID != own.SubnetIDs[0] {
			t.Errorf("%s: gateway %v, DNS %v, host routes %v", what, s.Gateway, s.DNS, s.HostRoutes)
		}
	}

	// Shared with this project, owned by the other: visible, not changeable.
	shared, err := c.Network(ctx, theirs.ID)
	if err != nil || len(shared.Subnets) != 1 {
		t.Fatalf("the shared network is not visible: %+v %v", shared, err)
	}
	_, err = c.UpdateSubnet(ctx, SubnetUpdate{SubnetID: theirs.SubnetIDs[0], NoGateway: true, NoDNS: true})
	t.Logf("refused: %v", err)
	if KindOf(err) != KindForbidden || !strings.Contains(err.Error(), "belongs to project "+other.ID) ||
		!strings.Contains(err.Error(), "may not change it") || !strings.Contains(err.Error(), "not-yours-subnet-0") {
		t.Errorf("another project's subnet: kind %v: %v", KindOf(err), err)
	}
	owner, _ := connect(t, cloud, ostest.CloudName, func(cfg *Config) { cfg.CloudsFile = other.CloudsFile })
	unchanged, err := owner.Network(ctx, theirs.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := unchanged.Subnets[0]; !s.Gateway.IsValid() || len(s.DNS) != 0 {
		t.Errorf("the refused update changed the owner's subnet: %+v", s)
	}

	_, err = c.UpdateSubnet(ctx, SubnetUpdate{SubnetID: "00000000-0000-4000-8000-000000000000", NoDNS: true})
	if !IsNotFound(err) {
		t.Errorf("a subnet that does not exist: kind %v: %v", KindOf(err), err)
	}
}

// shareNetwork shares network id of the project of cloudsFile with project target (an RBAC
// policy access_as_shared, which a network's owner may create), and removes the policy when the
// test ends, before the projects go.
func shareNetwork(t *testing.T, cloudsFile, id, target string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithCloudName(ostest.CloudName), clouds.WithLocations(cloudsFile))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := gcopenstack.NewNetworkV2(pc, eo)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Policy struct {
			ID string `json:"id"`
		} `json:"rbac_policy"`
	}
	if _, err := sc.Post(ctx, sc.ServiceURL("rbac-policies"), map[string]any{"rbac_policy": map[string]any{
		"object_type": "network", "object_id": id, "action": "access_as_shared", "target_tenant": target}}, &out,
		&gophercloud.RequestOpts{OkCodes: []int{201}}); err != nil {
		t.Fatalf("sharing network %s with project %s: %v", id, target, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := sc.Delete(ctx, sc.ServiceURL("rbac-policies", out.Policy.ID), nil); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Errorf("removing RBAC policy %s: %v", out.Policy.ID, err)
		}
	})
}
