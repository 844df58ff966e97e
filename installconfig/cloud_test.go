package installconfig

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fakeCloud knows some networks and security groups.
type fakeCloud struct {
	networks map[string]bool
	err      error
	got      CloudRefs
}

func (c *fakeCloud) CheckIDs(_ context.Context, refs CloudRefs) (Problems, error) {
	c.got = refs
	if c.err != nil {
		return nil, c.err
	}
	var ps Problems
	for _, r := range refs.Networks {
		if !c.networks[r.ID] {
			ps = append(ps, newProblem(SeverityError, "cloud-network", field.ErrorTypeNotFound, r.Field, r.ID, "no such network", r.Line, r.Column))
		}
	}
	return ps, nil
}

func TestReferences(t *testing.T) {
	f, _ := Parse("ic.yaml", readFile(t, "testdata/corpus/invalid-noncanonical.yaml"))
	refs := References(f)
	var nets []string
	for _, r := range refs.Networks {
		nets = append(nets, r.Field+"="+r.ID)
	}
	want := []string{
		"compute[0].platform.openstack.additionalNetworkIDs[0]=837e03cd-a06c-494f-9f58-88263af211ef",
		"compute[0].platform.openstack.additionalNetworkIDs[1]=a2c6e413-56e4-47d7-b06c-e8d49773801f",
		"compute[0].platform.openstack.additionalNetworkIDs[2]=416d4dfa-533e-42fd-9d70-f0583d5ab974",
	}
	if !reflect.DeepEqual(nets, want) {
		t.Errorf("networks %v, want %v", nets, want)
	}
	if len(refs.SecurityGroups) != 2 || len(refs.MachineNetworks) != 1 || refs.MachineNetworks[0].CIDR != "10.0.0.0/16" ||
		refs.MachineNetworks[0].Field != "networking.machineNetwork[0].cidr" || refs.MachineNetworks[0].Default {
		t.Errorf("security groups %v, machine networks %+v", refs.SecurityGroups, refs.MachineNetworks)
	}
	if len(refs.ComputePools) != 1 || len(refs.ComputePools[0].Networks) != 3 ||
		refs.ComputePools[0].Field != "compute[0].platform.openstack.additionalNetworkIDs" {
		t.Errorf("compute pools %+v", refs.ComputePools)
	}
}

// TestPoolRefs: a pool's own list replaces defaultMachinePlatform's, an absent one inherits it,
// and the installer's default machine network stands in when the file sets none.
func TestPoolRefs(t *testing.T) {
	const def, own = "6f0e3a3c-2b8d-4f51-9c1e-7d2a4b5c6d70", "0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37"
	data := []byte(`platform:
  openstack:
    defaultMachinePlatform:
      additionalNetworkIDs: [` + def + `]
compute:
- name: worker
- name: storage
  platform:
    openstack:
      additionalNetworkIDs: ["` + strings.ToUpper(own) + `"]
- name: bare
  platform:
    openstack:
      additionalNetworkIDs: []
`)
	f, _ := Parse("ic.yaml", data)
	refs := References(f)
	type pool struct {
		field, name string
		nets        []string
		inherited   bool
	}
	var got []pool
	for _, p := range refs.ComputePools {
		got = append(got, pool{p.Field, p.Name, p.Networks, p.Inherited})
	}
	want := []pool{
		{"compute[0].platform.openstack.additionalNetworkIDs", "worker", []string{def}, true},
		{"compute[1].platform.openstack.additionalNetworkIDs", "storage", []string{own}, false},
		{"compute[2].platform.openstack.additionalNetworkIDs", "bare", nil, false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pools\n%+v\nwant\n%+v", got, want)
	}
	if len(refs.MachineNetworks) != 1 || !refs.MachineNetworks[0].Default || refs.MachineNetworks[0].CIDR != DefaultMachineNetwork {
		t.Errorf("machine networks %+v, want the installer's default", refs.MachineNetworks)
	}
	// A defaultMachinePlatform without the list: nothing is inherited.
	f, _ = Parse("ic.yaml", []byte("platform:\n  openstack:\n    defaultMachinePlatform:\n      type: m1.large\ncompute:\n- name: worker\n"))
	if p := References(f).ComputePools[0]; p.Inherited || p.Networks != nil {
		t.Errorf("a pool without networks under a default without them: %+v", p)
	}
}

func TestCheckWithCloud(t *testing.T) {
	data := readFile(t, "testdata/corpus/invalid-uuid-version.yaml")
	cloud := &fakeCloud{networks: map[string]bool{}}
	ps, err := CheckWithCloud(context.Background(), "ic.yaml", data, cloud)
	if err != nil {
		t.Fatal(err)
	}
	// Two offline errors (not v4) and one from the cloud for the valid ID, in file order.
	want := []string{
		`compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: "aa1788ba-e63a-11f1-aa6c-02fc00000001": must be a UUID v4, not a version 1 UUID`,
		`compute[0].platform.openstack.additionalNetworkIDs[1]: Invalid value: "00000000-0000-0000-0000-000000000000": must be a UUID v4, not a version 0 UUID`,
		`compute[0].platform.openstack.additionalNetworkIDs[2]: Not found: "837e03cd-a06c-494f-9f58-88263af211ef": no such network`,
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.Text("ic.yaml"))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%v\nwant\n%v", got, want)
	}

	down := &fakeCloud{err: errors.New("keystone: connection refused")}
	ps, err = CheckWithCloud(context.Background(), "ic.yaml", data, down)
	if err == nil || err.Error() != "keystone: connection refused" || ps.Errors() != 2 {
		t.Errorf("unreachable cloud: %v, %d offline errors", err, ps.Errors())
	}
	ps, err = CheckWithCloud(context.Background(), "ic.yaml", data, nil)
	if err != nil || ps.Errors() != 2 {
		t.Errorf("no cloud: %v, %d errors", err, ps.Errors())
	}
}

// TestReferencesForFitness: what the storage-network rules need of the file: the cluster and
// service networks (the installer's defaults when unset) and the VIPs, new and legacy.
func TestReferencesForFitness(t *testing.T) {
	const a, b, c, sg = "6f0e3a3c-2b8d-4f51-9c1e-7d2a4b5c6d70", "0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37", "837e03cd-a06c-494f-9f58-88263af211ef", "a2c6e413-56e4-47d7-b06c-e8d49773801f"
	data := []byte(`networking:
  clusterNetwork:
  - cidr: 10.128.0.0/14
    hostPrefix: 23
  - cidr: fd01::/48
  serviceNetwork: [172.30.0.0/16, "fd02::/112"]
platform:
  openstack:
    apiVIPs: [10.0.0.5, "fd00::5"]
    ingressVIPs:
    - 10.0.0.7
    apiVIP: 10.0.0.5
    defaultMachinePlatform:
      additionalNetworkIDs: [` + a + `]
controlPlane:
  name: master
  platform:
    openstack:
      additionalSecurityGroupIDs: [` + sg + `]
compute:
- name: worker
  platform:
    openstack:
      additionalNetworkIDs: [` + b + `]
- name: storage
  platform:
    openstack:
      additionalNetworkIDs: [` + c + `]
      additionalSecurityGroupIDs: [` + sg + `]
`)
	f, ps := Check("ic.yaml", data)
	if ps.Errors() > 0 {
		t.Fatalf("the file is invalid:\n%s", ps.Text("ic.yaml"))
	}
	refs := References(f)
	var got []string
	for _, l := range [][]CIDRRef{refs.MachineNetworks, refs.ClusterNetworks, refs.ServiceNetworks} {
		for _, r := range l {
			got = append(got, fmt.Sprintf("%s=%s default=%v", r.Field, r.CIDR, r.Default))
		}
	}
	for _, v := range refs.VIPs {
		got = append(got, v.Field+"="+v.Address)
	}
	want := []string{
		"networking.machineNetwork=10.0.0.0/16 default=true",
		"networking.clusterNetwork[0].cidr=10.128.0.0/14 default=false",
		"networking.clusterNetwork[1].cidr=fd01::/48 default=false",
		"networking.serviceNetwork[0]=172.30.0.0/16 default=false",
		"networking.serviceNetwork[1]=fd02::/112 default=false",
		"platform.openstack.apiVIPs[0]=10.0.0.5",
		"platform.openstack.apiVIPs[1]=fd00::5",
		"platform.openstack.ingressVIPs[0]=10.0.0.7",
		"platform.openstack.apiVIP=10.0.0.5",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("refs\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Without networking: the installer's defaults.
	f, _ = Parse("ic.yaml", []byte("platform:\n  openstack:\n    defaultMachinePlatform:\n      additionalNetworkIDs: ["+a+"]\ncompute:\n- name: worker\n"))
	refs = References(f)
	if len(refs.ClusterNetworks) != 1 || refs.ClusterNetworks[0].CIDR != DefaultClusterNetwork || !refs.ClusterNetworks[0].Default ||
		len(refs.ServiceNetworks) != 1 || refs.ServiceNetworks[0].CIDR != DefaultServiceNetwork || len(refs.VIPs) != 0 {
		t.Errorf("defaults: %+v", refs)
	}
}
