package provider

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha7"
)

const storageNet = "6a2b0f0e-1c7e-4c55-9a65-3f1e0a3b9d10"

// A worker spec as the installer writes it, after `machinesets patch` added a storage network
// and a security group.
const workerSpec = `{
  "apiVersion": "machine.openshift.io/v1alpha1", "kind": "OpenstackProviderSpec",
  "availabilityZone": "nova", "cloudName": "openstack",
  "cloudsSecret": {"name": "openstack-cloud-credentials", "namespace": "openshift-machine-api"},
  "flavor": "m1.xlarge", "image": "ostest-8x2kq-rhcos",
  "networks": [
    {"filter": {}, "subnets": [{"filter": {"tags": "openshiftClusterID=ostest-8x2kq"}}]},
    {"uuid": "` + storageNet + `", "noAllowedAddressPairs": true}
  ],
  "securityGroups": [{"filter": {}, "name": "ostest-8x2kq-worker"}, {"uuid": "0c6a4a4e-9f50-4b51-8f7e-6d2b9e7b1f00"}],
  "serverGroupName": "ostest-8x2kq-worker-nova",
  "serverMetadata": {"Name": "ostest-8x2kq-worker", "openshiftClusterID": "ostest-8x2kq"},
  "tags": ["openshiftClusterID=ostest-8x2kq"],
  "trunk": false,
  "userDataSecret": {"name": "worker-user-data"}
}`

func machineWith(spec string) *machinev1beta1.Machine {
	return &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "ostest-8x2kq-worker-0-abcde", Namespace: "openshift-machine-api",
			Labels: map[string]string{machinev1beta1.MachineClusterIDLabel: "ostest-8x2kq"}},
		Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(spec)}}},
	}
}

var vips = VIPs{API: []string{"10.196.0.5"}, Ingress: []string{"10.196.0.7"}}

func TestInstanceSpecOfAPatchedWorker(t *testing.T) {
	m := machineWith(workerSpec)
	spec, err := DecodeSpec(m.Spec.ProviderSpec)
	if err != nil {
		t.Fatal(err)
	}
	is, err := InstanceSpec(m, spec, vips, "ignition", "sg-1")
	if err != nil {
		t.Fatal(err)
	}
	if is.Name != m.Name || is.Image != "ostest-8x2kq-rhcos" || is.Flavor != "m1.xlarge" || is.FailureDomain != "nova" || is.UserData != "ignition" || is.ServerGroupID != "sg-1" {
		t.Errorf("instance spec: %+v", is)
	}
	wantTags := []string{"openshiftClusterID=ostest-8x2kq", "cluster-api-provider-openstack", "openshift-machine-api-ostest-8x2kq"}
	if !reflect.DeepEqual(is.Tags, wantTags) {
		t.Errorf("tags %v, want %v", is.Tags, wantTags)
	}
	if is.Metadata["openshiftClusterID"] != "ostest-8x2kq" {
		t.Errorf("metadata %v", is.Metadata)
	}
	wantGroups := []capov1.SecurityGroupFilter{{Name: "ostest-8x2kq-worker"}, {ID: "0c6a4a4e-9f50-4b51-8f7e-6d2b9e7b1f00"}}
	if !reflect.DeepEqual(is.SecurityGroups, wantGroups) {
		t.Errorf("security groups %+v, want %+v", is.SecurityGroups, wantGroups)
	}
	if len(is.Ports) != 2 {
		t.Fatalf("%d ports, want 2: %s", len(is.Ports), show(is.Ports))
	}
	nodes, storage := is.Ports[0], is.Ports[1]
	// The machine network: found from its subnet by tag, the VIPs as allowed address pairs.
	if nodes.Network == nil || *nodes.Network != (capov1.NetworkFilter{}) || len(nodes.FixedIPs) != 1 || nodes.FixedIPs[0].Subnet.Tags != "openshiftClusterID=ostest-8x2kq" {
		t.Errorf("nodes port: %s", show(nodes))
	}
	wantPairs := []capov1.AddressPair{{IPAddress: "10.196.0.5"}, {IPAddress: "10.196.0.7"}}
	if !reflect.DeepEqual(nodes.AllowedAddressPairs, wantPairs) {
		t.Errorf("nodes port pairs %+v, want %+v", nodes.AllowedAddressPairs, wantPairs)
	}
	// The storage network: by ID, no address pairs, no port-level groups (the top-level ones
	// apply), port security the cloud's default.
	if storage.Network == nil || storage.Network.ID != storageNet || len(storage.FixedIPs) != 0 || len(storage.AllowedAddressPairs) != 0 ||
		storage.SecurityGroupFilters != nil || storage.DisablePortSecurity != nil || storage.Trunk == nil || *storage.Trunk {
		t.Errorf("storage port: %s", show(storage))
	}
	if ServerGroupName(spec) != "ostest-8x2kq-worker-nova" {
		t.Errorf("server group name %q", ServerGroupName(spec))
	}
}

func TestNetworkRules(t *testing.T) {
	for _, tc := range []struct {
		name, networks string
		check          func(t *testing.T, ports []capov1.PortOpts)
	}{
		{"one port per subnet when the network is not named",
			`[{"subnets": [{"uuid": "s1", "portTags": ["a"]}, {"filter": {"name": "s2"}}], "portTags": ["n"]}]`,
			func(t *testing.T, ports []capov1.PortOpts) {
				if len(ports) != 2 || ports[0].FixedIPs[0].Subnet.ID != "s1" || ports[1].FixedIPs[0].Subnet.Name != "s2" ||
					!reflect.DeepEqual(ports[0].Tags, []string{"n", "a"}) || !reflect.DeepEqual(ports[1].Tags, []string{"n"}) {
					t.Errorf("%s", show(ports))
				}
			}},
		{"one port with a fixed IP per subnet when the network is named",
			`[{"filter": {"name": "net"}, "subnets": [{"uuid": "s1", "portTags": ["a"]}, {"uuid": "s2", "portTags": ["b"]}]}]`,
			func(t *testing.T, ports []capov1.PortOpts) {
				if len(ports) != 1 || ports[0].Network.Name != "net" || len(ports[0].FixedIPs) != 2 || !reflect.DeepEqual(ports[0].Tags, []string{"a", "b"}) {
					t.Errorf("%s", show(ports))
				}
			}},
		{"uuid wins over filter.id",
			`[{"uuid": "u", "filter": {"id": "f"}}]`,
			func(t *testing.T, ports []capov1.PortOpts) {
				if ports[0].Network.ID != "u" {
					t.Errorf("%s", show(ports))
				}
			}},
		{"portSecurity false disables port security, true enables it",
			`[{"uuid": "a", "portSecurity": false}, {"uuid": "b", "portSecurity": true}]`,
			func(t *testing.T, ports []capov1.PortOpts) {
				if !*ports[0].DisablePortSecurity || *ports[1].DisablePortSecurity {
					t.Errorf("%s", show(ports))
				}
			}},
		{"noAllowedAddressPairs leaves the VIPs out of that network's port only",
			`[{"uuid": "a"}, {"uuid": "b", "noAllowedAddressPairs": true}]`,
			func(t *testing.T, ports []capov1.PortOpts) {
				if len(ports[0].AllowedAddressPairs) != 2 || len(ports[1].AllowedAddressPairs) != 0 {
					t.Errorf("%s", show(ports))
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := DecodeSpec(machineWith(`{"networks": ` + tc.networks + `}`).Spec.ProviderSpec)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, Ports(spec, vips))
		})
	}
}

func TestPortsEntries(t *testing.T) {
	spec, err := DecodeSpec(machineWith(`{"trunk": true, "networks": [{"uuid": "a"}], "ports": [{"networkID": "p", "nameSuffix": "storage",
	  "securityGroups": ["g1"], "allowedAddressPairs": [{"ipAddress": "10.0.0.9"}], "fixedIPs": [{"subnetID": "s"}], "trunk": false, "portSecurity": true}]}`).Spec.ProviderSpec)
	if err != nil {
		t.Fatal(err)
	}
	ports := Ports(spec, vips)
	if len(ports) != 2 {
		t.Fatalf("%s", show(ports))
	}
	if !*ports[0].Trunk {
		t.Errorf("networks[] port takes the top-level trunk: %s", show(ports[0]))
	}
	p := ports[1]
	if p.Network.ID != "p" || p.NameSuffix != "storage" || *p.Trunk || *p.DisablePortSecurity ||
		!reflect.DeepEqual(p.SecurityGroupFilters, []capov1.SecurityGroupFilter{{ID: "g1"}}) ||
		!reflect.DeepEqual(p.AllowedAddressPairs, []capov1.AddressPair{{IPAddress: "10.0.0.9"}}) || p.FixedIPs[0].Subnet.ID != "s" {
		t.Errorf("ports[] entry: %s", show(p))
	}
	// A user-managed load balancer: no pairs anywhere.
	for _, p := range Ports(spec, VIPs{API: vips.API, Ingress: vips.Ingress, UserManagedLB: true}) {
		if len(p.AllowedAddressPairs) != 0 {
			t.Errorf("user-managed LB, yet pairs: %s", show(p))
		}
	}
}

func TestVIPsOf(t *testing.T) {
	infra := &configv1.Infrastructure{Status: configv1.InfrastructureStatus{PlatformStatus: &configv1.PlatformStatus{
		Type: configv1.OpenStackPlatformType,
		OpenStack: &configv1.OpenStackPlatformStatus{APIServerInternalIPs: []string{"10.196.0.5"}, IngressIPs: []string{"10.196.0.7"},
			LoadBalancer: &configv1.OpenStackPlatformLoadBalancer{Type: configv1.LoadBalancerTypeOpenShiftManagedDefault}},
	}}}
	if got := VIPsOf(infra); !reflect.DeepEqual(got, vips) {
		t.Errorf("VIPs %+v, want %+v", got, vips)
	}
	infra.Status.PlatformStatus.OpenStack.LoadBalancer.Type = configv1.LoadBalancerTypeUserManaged
	if !VIPsOf(infra).UserManagedLB {
		t.Error("a UserManaged load balancer is not seen")
	}
}

func TestUserData(t *testing.T) {
	m := machineWith(workerSpec)
	spec, _ := DecodeSpec(m.Spec.ProviderSpec)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "worker-user-data", Namespace: "openshift-machine-api"},
		Data: map[string][]byte{"userData": []byte(`{"host": "{{.Machine.Name}}", "flavor": "{{.MachineSpec.Flavor}}"}`)}}
	got, err := renderUserData(secret, m, spec)
	if err != nil || got != `{"host": "ostest-8x2kq-worker-0-abcde", "flavor": "m1.xlarge"}` {
		t.Errorf("rendered %q, %v", got, err)
	}
	secret.Data["disableTemplating"] = []byte("true")
	if got, err := renderUserData(secret, m, spec); err != nil || !strings.Contains(got, "{{.Machine.Name}}") {
		t.Errorf("disableTemplating: %q, %v", got, err)
	}
	delete(secret.Data, "userData")
	if _, err := renderUserData(secret, m, spec); err == nil || !strings.Contains(err.Error(), "did not contain key userData") {
		t.Errorf("no userData key: %v", err)
	}
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
