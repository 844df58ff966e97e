package deploy

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestParseInstallConfigMachineNetworks(t *testing.T) {
	for _, tt := range []struct {
		name, installConfig string
		want                []netip.Prefix
	}{
		{"the install-config's machineNetwork, masked", "networking:\n  machineNetwork:\n  - cidr: 10.196.0.0/16\n  - cidr: 10.0.0.5/24\n",
			[]netip.Prefix{netip.MustParsePrefix("10.196.0.0/16"), netip.MustParsePrefix("10.0.0.0/24")}},
		{"no machineNetwork", "networking: {}\n", nil},
		{"not YAML", "networking: [", nil},
		{"not a CIDR", "networking: {machineNetwork: [{cidr: nope}]}\n", nil},
		{"one of two not a CIDR: none, as the operator reads it", "networking: {machineNetwork: [{cidr: 10.0.0.0/24}, {cidr: nope}]}\n", nil},
		{"no install-config", "", nil},
	} {
		if got := ParseInstallConfig([]byte(tt.installConfig)).MachineNetworks; !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestReadInstallConfig(t *testing.T) {
	ctx := context.Background()
	if ic, err := ReadInstallConfig(ctx, nil); err != nil || ic.Networks.All() != nil || ic.MachineNetworks != nil {
		t.Errorf("without a cluster: %+v, %v; want nothing and no error", ic, err)
	}
	if _, err := ReadInstallConfig(ctx, fake.NewClientset()); err == nil {
		t.Error("no error without kube-system/cluster-config-v1")
	}
	kube := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "cluster-config-v1"},
		Data: map[string]string{"install-config": "networking:\n  machineNetwork: [{cidr: 10.196.0.0/16}]\n  serviceNetwork: [172.30.0.0/16]\n" +
			"platform: {openstack: {apiVIPs: [10.196.0.5]}}\n"},
	})
	ic, err := ReadInstallConfig(ctx, kube)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.196.0.0/16")}
	if !slices.Equal(ic.MachineNetworks, want) || !slices.Equal(ic.Networks.Machine, want) {
		t.Errorf("machine networks %v and %v, want %v", ic.MachineNetworks, ic.Networks.Machine, want)
	}
	if !slices.Equal(ic.Networks.Service, []netip.Prefix{netip.MustParsePrefix("172.30.0.0/16")}) || !slices.Equal(ic.Networks.VIPs, []netip.Addr{netip.MustParseAddr("10.196.0.5")}) {
		t.Errorf("networks %+v", ic.Networks)
	}
}
