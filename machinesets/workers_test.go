package machinesets

import "testing"

func TestServerIDFromProviderID(t *testing.T) {
	for in, want := range map[string]string{
		"openstack:///6f1c9a8e-1111-4000-8000-000000000001":          "6f1c9a8e-1111-4000-8000-000000000001",
		"openstack://RegionOne/6f1c9a8e-1111-4000-8000-000000000001": "6f1c9a8e-1111-4000-8000-000000000001",
		"aws:///us-east-1a/i-0123":                                   "",
		"":                                                           "",
	} {
		if got := ServerIDFromProviderID(in); got != want {
			t.Errorf("ServerIDFromProviderID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsControlPlaneObject(t *testing.T) {
	tests := []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"machine.openshift.io/cluster-api-machine-role": "master"}, true},
		{map[string]string{"machine.openshift.io/cluster-api-machine-role": "worker"}, false},
		{map[string]string{"machine.openshift.io/cluster-api-machine-role": "infra"}, false},
		{map[string]string{"node-role.kubernetes.io/control-plane": ""}, true},
		{map[string]string{"node-role.kubernetes.io/worker": ""}, false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := IsControlPlaneObject(tt.labels); got != tt.want {
			t.Errorf("IsControlPlaneObject(%v) = %v", tt.labels, got)
		}
	}
}
