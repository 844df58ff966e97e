package operator

import (
	"regexp"
	"strings"
	"testing"
)

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestStorageClassNames(t *testing.T) {
	long := strings.Repeat("very-long-share-type-", 5)
	tests := []struct {
		name     string
		types    []string
		existing map[string]string
		taken    map[string]bool
		want     map[string]string
	}{
		{"plain", []string{"default", "cephfs-fast"}, nil, nil,
			map[string]string{"default": "csi-manila-default", "cephfs-fast": "csi-manila-cephfs-fast"}},
		{"invalid characters", []string{"Gold_Tier", "nfs.ssd", "  x  ", "Ünïcode type!"}, nil, nil,
			map[string]string{"Gold_Tier": "csi-manila-gold-tier", "nfs.ssd": "csi-manila-nfs-ssd", "  x  ": "csi-manila-x", "Ünïcode type!": "csi-manila-n-code-type"}},
		{"collision: the valid name keeps it, the other gets a hash", []string{"gold-tier", "Gold_Tier"}, nil, nil,
			map[string]string{"gold-tier": "csi-manila-gold-tier", "Gold_Tier": "csi-manila-gold-tier-" + shortHash("Gold_Tier")}},
		{"collision of two sanitized names: both hashed", []string{"Gold_Tier", "GOLD.TIER"}, nil, nil,
			map[string]string{"Gold_Tier": "csi-manila-gold-tier-" + shortHash("Gold_Tier"), "GOLD.TIER": "csi-manila-gold-tier-" + shortHash("GOLD.TIER")}},
		{"names stay with their type when a colliding type appears", []string{"Gold_Tier", "gold-tier"}, map[string]string{"csi-manila-gold-tier": "Gold_Tier"}, nil,
			map[string]string{"Gold_Tier": "csi-manila-gold-tier", "gold-tier": "csi-manila-gold-tier-" + shortHash("gold-tier")}},
		{"a name taken by a user's class", []string{"default"}, nil, map[string]bool{"csi-manila-default": true},
			map[string]string{"default": "csi-manila-default-" + shortHash("default")}},
		{"a name kept by a vanished type", []string{"a_b"}, map[string]string{"csi-manila-a-b": "a-b"}, nil,
			map[string]string{"a_b": "csi-manila-a-b-" + shortHash("a_b")}},
		{"nothing left after sanitizing", []string{"___"}, nil, nil, map[string]string{"___": "csi-manila-" + shortHash("___")}},
		{"length limit", []string{long}, nil, nil, map[string]string{long: "csi-manila-very-long-share-type-very-long-share-type-very-long"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StorageClassNames(tt.types, tt.existing, tt.taken)
			for typ, want := range tt.want {
				if got[typ] != want {
					t.Errorf("%q -> %q, want %q", typ, got[typ], want)
				}
			}
			seen := map[string]string{}
			for typ, name := range got {
				if len(name) > 63 || !dns1123Label.MatchString(name) {
					t.Errorf("%q -> %q is not a DNS-1123 label of at most 63 characters", typ, name)
				}
				if other, dup := seen[name]; dup {
					t.Errorf("%q and %q both get %q", typ, other, name)
				}
				seen[name] = typ
			}
		})
	}
}

func TestStorageClassNamesStableUnderOrderAndLength(t *testing.T) {
	types := []string{"b_x", "B-X", "b.x", strings.Repeat("Z", 100), strings.Repeat("z", 100)}
	a := StorageClassNames(types, nil, nil)
	b := StorageClassNames([]string{types[4], types[2], types[0], types[3], types[1]}, nil, nil)
	for k := range a {
		if a[k] != b[k] {
			t.Errorf("%q: %q vs %q depending on order", k, a[k], b[k])
		}
		if len(a[k]) > 63 || !dns1123Label.MatchString(a[k]) {
			t.Errorf("%q -> %q invalid", k, a[k])
		}
	}
	if a[types[3]] == a[types[4]] {
		t.Errorf("long colliding names must differ")
	}
}

func TestBuildStorageClass(t *testing.T) {
	sc := BuildStorageClass("csi-manila-x", ShareType{Name: "x", DHSS: true}, StorageClassParams{Namespace: "ns", ShareClients: "10.0.0.0/16", ShareNetworkID: "sn1"})
	p := sc.Parameters
	if p["type"] != "x" || p["nfs-shareClient"] != "10.0.0.0/16" || p["shareNetworkID"] != "sn1" ||
		p["csi.storage.k8s.io/provisioner-secret-name"] != DriverSecretName || p["csi.storage.k8s.io/node-stage-secret-namespace"] != "ns" ||
		p["csi.storage.k8s.io/node-publish-secret-name"] != DriverSecretName {
		t.Errorf("parameters: %v", p)
	}
	if sc.Provisioner != DriverName || *sc.ReclaimPolicy != "Delete" || !*sc.AllowVolumeExpansion {
		t.Errorf("class: %+v", sc)
	}
	if _, ok := BuildStorageClass("n", ShareType{Name: "y"}, StorageClassParams{ShareNetworkID: "sn1"}).Parameters["shareNetworkID"]; ok {
		t.Errorf("shareNetworkID must only be set for DHSS=true types")
	}
}
