//go:build integration

package testenv

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/sharetypes"
)

// connect authenticates through clouds.yaml exactly as a user of the CLI would.
func connect(t *testing.T, ctx context.Context, cloud string) (*gophercloud.ProviderClient, gophercloud.EndpointOpts) {
	t.Helper()
	pc, eo, err := Connect(ctx, cloud)
	if err != nil {
		t.Fatal(err)
	}
	return pc, eo
}

func TestLoopbackCloudListsNetworksAndShareTypes(t *testing.T) {
	cloud := NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pc, eo := connect(t, ctx, CloudDemo)

	neutron, err := openstack.NewNetworkV2(pc, eo)
	if err != nil {
		t.Fatal(err)
	}
	pages, err := networks.List(neutron, networks.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatalf("listing networks: %v", err)
	}
	nets, err := networks.ExtractNetworks(pages)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, n := range nets {
		byName[n.Name] = n.ID
	}
	for _, name := range []string{"tenant", "storage", "decoy"} {
		if byName[name] == "" || byName[name] != cloud.Seed.Networks[name] {
			t.Errorf("network %s: listed ID %q, seeded ID %q", name, byName[name], cloud.Seed.Networks[name])
		}
	}

	manila, err := openstack.NewSharedFileSystemV2(pc, eo)
	if err != nil {
		t.Fatalf("no sharev2 endpoint in the catalog: %v", err)
	}
	manila.Microversion = "2.65"
	typePages, err := sharetypes.List(manila, sharetypes.ListOpts{}).AllPages(ctx)
	if err != nil {
		t.Fatalf("listing share types: %v", err)
	}
	types, err := sharetypes.ExtractShareTypes(typePages)
	if err != nil {
		t.Fatal(err)
	}
	var typeNames []string
	for _, st := range types {
		typeNames = append(typeNames, st.Name)
	}
	for _, want := range []string{"default", "cephfs-fast"} {
		if !slices.Contains(typeNames, want) {
			t.Errorf("share type %q not listed; got %v", want, typeNames)
		}
	}

	// The seeded NFS share is exported on an address inside the storage subnet: the fact that
	// storage-network discovery is built on.
	share, err := shares.Get(ctx, manila, cloud.Seed.Shares["nfs-share"].ID).Extract()
	if err != nil {
		t.Fatalf("getting the seeded share: %v", err)
	}
	if share.Status != "available" || share.ShareProto != "NFS" {
		t.Errorf("seeded share is %s/%s, want available/NFS", share.Status, share.ShareProto)
	}
	locations, err := shares.ListExportLocations(ctx, manila, share.ID).Extract()
	if err != nil || len(locations) == 0 {
		t.Fatalf("export locations: %v (%d)", err, len(locations))
	}
	storage := netip.MustParsePrefix(cloud.Seed.Subnets["storage-subnet"].CIDR)
	ip, _, _ := strings.Cut(locations[0].Path, ":")
	if addr, err := netip.ParseAddr(ip); err != nil || !storage.Contains(addr) {
		t.Errorf("export location %s is not in the storage subnet %s", locations[0].Path, storage)
	}
}

func TestLoopbackCloudApplicationCredential(t *testing.T) {
	cloud := NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pc, eo := connect(t, ctx, CloudAppCred)
	neutron, err := openstack.NewNetworkV2(pc, eo)
	if err != nil {
		t.Fatal(err)
	}
	n, err := networks.Get(ctx, neutron, cloud.Seed.Networks["storage"]).Extract()
	if err != nil {
		t.Fatalf("getting the storage network with an application credential: %v", err)
	}
	if n.Name != "storage" {
		t.Errorf("network %s is named %q, want storage", n.ID, n.Name)
	}
}
