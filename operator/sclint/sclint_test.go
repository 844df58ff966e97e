package sclint

import (
	"net/netip"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func class(name string, params map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "manila.csi.openstack.org", Parameters: params}
}

// good is a class as the operator writes it.
func good() map[string]string {
	return map[string]string{
		"type": "default", "nfs-shareClient": "10.196.0.0/16",
		"csi.storage.k8s.io/provisioner-secret-name": "csi-manila-secrets", "csi.storage.k8s.io/provisioner-secret-namespace": "ns",
		"csi.storage.k8s.io/node-stage-secret-name": "csi-manila-secrets", "csi.storage.k8s.io/node-stage-secret-namespace": "ns",
		"csi.storage.k8s.io/node-publish-secret-name": "csi-manila-secrets", "csi.storage.k8s.io/node-publish-secret-namespace": "ns",
		"csi.storage.k8s.io/controller-expand-secret-name": "csi-manila-secrets", "csi.storage.k8s.io/controller-expand-secret-namespace": "ns",
	}
}

func with(m map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(m, kv[i])
		} else {
			m[kv[i]] = kv[i+1]
		}
	}
	return m
}

func TestCheck(t *testing.T) {
	facts := Facts{
		ShareTypes: []string{"default", "cephfs-fast"},
		SecretExists: func(ns, name string) (bool, bool) {
			if ns == "other" {
				return false, false // cannot be read
			}
			return ns == "ns" && name == "csi-manila-secrets", true
		},
		MachineNetworks: []netip.Prefix{netip.MustParsePrefix("10.196.0.0/16")},
	}
	for _, tt := range []struct {
		name   string
		params map[string]string
		want   []string // "parameter: words of the problem or fix", one per finding
	}{
		{"as the operator writes it", good(), nil},
		{"OpenShift's documentation example: nfs-ShareClient", with(good(), "nfs-shareClient", "", "nfs-ShareClient", "10.196.0.0/16"),
			[]string{"nfs-ShareClient: spell it nfs-shareClient", "nfs-shareClient: open to any address"}},
		{"typo", with(good(), "shareNetworkId", "x"), []string{"shareNetworkId: spell it shareNetworkID"}},
		{"near miss", with(good(), "apendShareMetadata", "x"), []string{"apendShareMetadata: did you mean appendShareMetadata"}},
		{"unknown key", with(good(), "color", "blue"), []string{"color: no such parameter"}},
		{"CSI key typo", with(good(), "csi.storage.k8s.io/fsType", "nfs"), []string{"csi.storage.k8s.io/fsType: spell it csi.storage.k8s.io/fstype"}},
		{"missing Secret", with(good(), "csi.storage.k8s.io/node-stage-secret-name", "nope"), []string{"node-stage-secret-name: Secret ns/nope does not exist"}},
		{"Secret in a namespace that cannot be read", with(good(), "csi.storage.k8s.io/provisioner-secret-namespace", "other"), nil},
		{"templated Secret", with(good(), "csi.storage.k8s.io/provisioner-secret-name", "${pvc.name}"), nil},
		{"no provisioner Secret", with(good(), "csi.storage.k8s.io/provisioner-secret-name", ""), []string{"provisioner-secret-name: missing"}},
		{"share type not offered", with(good(), "type", "gold"), []string{`type: no share type "gold"`}},
		{"default share type", with(good(), "type", ""), nil},
		{"share client excludes the machine network", with(good(), "nfs-shareClient", "192.168.0.0/24"), []string{"nfs-shareClient: leaves out the machine network 10.196.0.0/16"}},
		{"share client too narrow", with(good(), "nfs-shareClient", "10.196.4.0/24"), []string{"nfs-shareClient: leaves out"}},
		{"share client one address", with(good(), "nfs-shareClient", "10.196.0.7"), []string{"nfs-shareClient: leaves out"}},
		{"share client wider", with(good(), "nfs-shareClient", "10.0.0.0/8"), nil},
		{"share client list", with(good(), "nfs-shareClient", "10.196.0.0/16,10.197.0.0/16"), []string{"nfs-shareClient: is a list"}},
		{"share client garbage", with(good(), "nfs-shareClient", "all"), []string{`nfs-shareClient: "all" is not an address or a CIDR`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(class("sc1", tt.params), facts)
			if len(got) != len(tt.want) {
				t.Fatalf("%d findings, want %d: %v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				param, words, _ := strings.Cut(w, ": ")
				if !strings.HasSuffix(got[i].Parameter, param) || !strings.Contains(got[i].Problem+"; "+got[i].Fix, words) {
					t.Errorf("finding %d = %v, want %q", i, got[i], w)
				}
			}
		})
	}
	if f := Check(&storagev1.StorageClass{Provisioner: "cinder.csi.openstack.org", Parameters: map[string]string{"color": "x"}}, facts); f != nil {
		t.Errorf("another driver's class: %v", f)
	}
	// Unknown facts skip their checks.
	if f := Check(class("sc1", with(good(), "type", "gold", "nfs-shareClient", "192.168.0.0/24")), Facts{}); len(f) != 0 {
		t.Errorf("without facts: %v", f)
	}
}
