package sclint

import (
	"net/netip"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/operator/shareclient"
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
		MountFrom: mountFrom(t, shareclient.Facts{MachineNetworks: prefixes("10.196.0.0/16"), ExportSubnets: prefixes("10.0.0.0/24"),
			Sets: []shareclient.Set{{Name: "worker"}}}),
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
		{"share client excludes the machine network", with(good(), "nfs-shareClient", "192.168.0.0/24"), []string{"nfs-shareClient: leaves out 10.196.0.0/16, where the workers mount from"}},
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

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, x := range s {
		out[i] = netip.MustParsePrefix(x)
	}
	return out
}

func mountFrom(t *testing.T, f shareclient.Facts) *shareclient.Answer {
	t.Helper()
	a, err := shareclient.Decide(f)
	if err != nil {
		t.Fatal(err)
	}
	return &a
}

// TestCheckShareClientByWhereWorkersMount: the lint on hand-made classes with each of the three
// answers of the rule (machine network, storage network, both), for a driver that takes a list.
func TestCheckShareClientByWhereWorkersMount(t *testing.T) {
	machine, storage := prefixes("10.196.0.0/16"), prefixes("10.0.0.0/24")
	beforeAttach := shareclient.Facts{MachineNetworks: machine, ExportSubnets: storage, Sets: []shareclient.Set{{Name: "worker"}}}
	attached := shareclient.Facts{MachineNetworks: machine, ExportSubnets: storage, Sets: []shareclient.Set{{Name: "worker", Attached: true}},
		Machines: []shareclient.Machine{{Name: "w1", Addresses: []netip.Addr{netip.MustParseAddr("10.196.0.5"), netip.MustParseAddr("10.0.0.55")}}}}
	halfWay := shareclient.Facts{MachineNetworks: machine, ExportSubnets: storage, Sets: []shareclient.Set{{Name: "worker", Attached: true}},
		Machines: []shareclient.Machine{{Name: "w1", Addresses: []netip.Addr{netip.MustParseAddr("10.196.0.5")}}}}
	for _, tt := range []struct {
		name   string
		facts  shareclient.Facts
		client string
		want   string // fragments of the one finding, "|"-separated; "" for no finding
	}{
		{"before the attach, the machine network", beforeAttach, "10.196.0.0/16", ""},
		{"before the attach, the storage subnet", beforeAttach, "10.0.0.0/24", "leaves out 10.196.0.0/16|set it to 10.196.0.0/16 (no worker has a port"},
		{"attached, the machine network (the old premise)", attached, "10.196.0.0/16", "leaves out 10.0.0.0/24, where the workers mount from|set it to 10.0.0.0/24 (every worker has a port on the storage network"},
		{"attached, the storage subnet", attached, "10.0.0.0/24", ""},
		{"attached, one worker's address only", attached, "10.0.0.55", "leaves out 10.0.0.0/24"},
		{"half-way, the storage subnet only", halfWay, "10.0.0.0/24", "leaves out 10.196.0.0/16|set it to 10.0.0.0/24,10.196.0.0/16 (the workers mount from two networks"},
		{"half-way, both as a list", halfWay, "10.0.0.0/24,10.196.0.0/16", ""},
		{"half-way, a covering prefix", halfWay, "10.0.0.0/8", ""},
		{"half-way, a list with garbage", halfWay, "10.0.0.0/24,everyone", `"everyone" is not an address or a CIDR`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			facts := Facts{MountFrom: mountFrom(t, tt.facts), ListAllowed: true}
			got := Check(class("sc1", with(good(), "nfs-shareClient", tt.client)), facts)
			if tt.want == "" {
				if len(got) != 0 {
					t.Fatalf("findings %v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Parameter != "nfs-shareClient" {
				t.Fatalf("findings %v, want one on nfs-shareClient", got)
			}
			for _, w := range strings.Split(tt.want, "|") {
				if !strings.Contains(got[0].Problem+"; "+got[0].Fix, w) {
					t.Errorf("finding %v does not say %q", got[0], w)
				}
			}
		})
	}
}

// TestCheckSecretOutsideTheDriverNamespace: the driver's controller may read Secrets of its own
// namespace only (its Role), so a class naming a Secret elsewhere fails at the first claim.
func TestCheckSecretOutsideTheDriverNamespace(t *testing.T) {
	facts := Facts{SecretNamespace: "ns"}
	if f := Check(class("sc1", good()), facts); len(f) != 0 {
		t.Errorf("Secrets in the driver's namespace: %v", f)
	}
	f := Check(class("sc1", with(good(), "csi.storage.k8s.io/provisioner-secret-name", "tenant-b", "csi.storage.k8s.io/provisioner-secret-namespace", "demo-app")), facts)
	if len(f) != 1 || !strings.HasSuffix(f[0].Parameter, "provisioner-secret-namespace") ||
		!strings.Contains(f[0].Problem, "Secret demo-app/tenant-b is outside namespace ns") || !strings.Contains(f[0].Fix, "create the Secret in ns") {
		t.Errorf("a Secret in another namespace: %v", f)
	}
	if f := Check(class("sc1", with(good(), "csi.storage.k8s.io/provisioner-secret-namespace", "${pvc.namespace}")), facts); len(f) != 0 {
		t.Errorf("a templated namespace cannot be judged: %v", f)
	}
}
