package shareclient

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const share = "5f2a1c3e-7d4b-4e8a-9c1f-2b3a4d5e6f70"

func TestVolumeOf(t *testing.T) {
	pv := func(driver, handle string, attrs map[string]string, claim *corev1.ObjectReference) *corev1.PersistentVolume {
		p := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"}}
		p.Spec.ClaimRef = claim
		if driver != "" {
			p.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle, VolumeAttributes: attrs}
		}
		return p
	}
	claim := &corev1.ObjectReference{Namespace: "app", Name: "data"}
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want Volume
		ok   bool
	}{
		{"provisioned", pv("manila.csi.openstack.org", share, map[string]string{"shareID": share, "shareAccessID": "a1"}, claim),
			Volume{Name: "pvc-1", Claim: "app/data", ShareID: share}, true},
		{"handle only", pv("manila.csi.openstack.org", share, nil, nil), Volume{Name: "pvc-1", ShareID: share}, true},
		{"static, by ID", pv("manila.csi.openstack.org", "my-volume", map[string]string{"shareID": share}, claim),
			Volume{Name: "pvc-1", Claim: "app/data", ShareID: share}, true},
		{"static, by name", pv("manila.csi.openstack.org", "my-volume", map[string]string{"shareName": "legacy"}, claim),
			Volume{Name: "pvc-1", Claim: "app/data", ShareName: "legacy"}, true},
		{"another driver", pv("cinder.csi.openstack.org", share, nil, claim), Volume{}, false},
		{"not CSI", pv("", "", nil, claim), Volume{}, false},
	}
	for _, tt := range tests {
		got, ok := VolumeOf(tt.pv, "manila.csi.openstack.org")
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %+v %v, want %+v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestCheckVolume(t *testing.T) {
	vol := Volume{Name: "pvc-1", Claim: "app/data", ShareID: share}
	attached := Answer{Clients: prefixes("10.0.0.0/24"), ViaStorageNetwork: true, Reason: "every worker has a port on the storage network"}
	both := Answer{Clients: prefixes("10.0.0.0/24", "10.196.0.0/16"), Reason: "the workers mount from two networks"}
	rule := func(id, to, level, state string) AccessRule {
		return AccessRule{ID: id, Type: "ip", To: to, Level: level, State: state}
	}
	tests := []struct {
		name    string
		vol     Volume
		rules   []AccessRule
		answer  Answer
		admits  []string
		missing []string
		fix     []string
		skipped bool
		finding string
	}{
		{"made before the attach", vol, []AccessRule{rule("r1", "10.196.0.0/16", "rw", "active")}, attached,
			[]string{"10.196.0.0/16"}, []string{"10.0.0.0/24"},
			[]string{"openstack share access create " + share + " ip 10.0.0.0/24 --access-level rw"}, false,
			"volume pvc-1 (share " + share + ", claim app/data): its access rules admit 10.196.0.0/16 but not 10.0.0.0/24, where the workers mount from (every worker has a port on the storage network)"},
		{"rule added", vol, []AccessRule{rule("r1", "10.196.0.0/16", "rw", "active"), rule("r2", "10.0.0.0/24", "rw", "queued_to_apply")}, attached,
			[]string{"10.196.0.0/16", "10.0.0.0/24"}, nil, nil, false, ""},
		{"a wider rule covers it", vol, []AccessRule{rule("r1", "10.0.0.0/8", "rw", "applying")}, both,
			[]string{"10.0.0.0/8"}, nil, nil, false, ""},
		{"single addresses do not cover a network", vol, []AccessRule{rule("r1", "10.0.0.5", "rw", "active")}, attached,
			[]string{"10.0.0.5/32"}, []string{"10.0.0.0/24"},
			[]string{"openstack share access create " + share + " ip 10.0.0.0/24 --access-level rw"}, false,
			"volume pvc-1 (share " + share + ", claim app/data): its access rules admit 10.0.0.5/32 but not 10.0.0.0/24, where the workers mount from (every worker has a port on the storage network)"},
		{"no rules, half-way", Volume{Name: "pvc-2", ShareID: share}, nil, both,
			nil, []string{"10.0.0.0/24", "10.196.0.0/16"},
			[]string{"openstack share access create " + share + " ip 10.0.0.0/24 --access-level rw", "openstack share access create " + share + " ip 10.196.0.0/16 --access-level rw"}, false,
			"volume pvc-2 (share " + share + "): its access rules admit none of 10.0.0.0/24, 10.196.0.0/16, where the workers mount from (the workers mount from two networks)"},
		{"ro, errored and denied rules admit nothing; the ro and errored ones are in the way", vol, []AccessRule{
			rule("r1", "10.196.0.0/16", "rw", "active"), rule("r2", "10.0.0.0/24", "ro", "active"),
			rule("r3", "10.196.0.0/16", "rw", "error"), {ID: "r4", Type: "user", To: "10.0.0.0/24", Level: "rw", State: "active"}}, attached,
			[]string{"10.196.0.0/16"}, []string{"10.0.0.0/24"},
			[]string{"openstack share access delete " + share + " r2", "openstack share access create " + share + " ip 10.0.0.0/24 --access-level rw"}, false, "volume pvc-1"},
		{"errored rule for the network", vol, []AccessRule{rule("r2", "10.0.0.0/24", "rw", "error")}, attached,
			nil, []string{"10.0.0.0/24"},
			[]string{"openstack share access delete " + share + " r2", "openstack share access create " + share + " ip 10.0.0.0/24 --access-level rw"}, false, "admit none of 10.0.0.0/24"},
		{"being denied", vol, []AccessRule{rule("r2", "10.0.0.0/24", "rw", "denying")}, attached,
			nil, []string{"10.0.0.0/24"}, []string{"openstack share access create " + share + " ip 10.0.0.0/24 --access-level rw"}, false, "admit none"},
		{"old server: new is on its way", vol, []AccessRule{rule("r1", "10.0.0.0/24", "RW", "new")}, attached,
			[]string{"10.0.0.0/24"}, nil, nil, false, ""},
		{"CephFS", vol, []AccessRule{{ID: "c1", Type: "cephx", To: "alice", Level: "rw", State: "active"}}, attached, nil, nil, nil, true, ""},
		{"by name", Volume{Name: "pv-static", ShareName: "legacy"}, nil, attached, nil, nil, nil, true, ""},
	}
	for _, tt := range tests {
		v := CheckVolume(tt.vol, tt.rules, tt.answer)
		if v.Volume != tt.vol || !slices.Equal(v.Admits, prefixes(tt.admits...)) || !slices.Equal(v.Missing, prefixes(tt.missing...)) ||
			!slices.Equal(v.Fix, tt.fix) || (v.Skipped != "") != tt.skipped {
			t.Errorf("%s: %+v\nwant admits %v, missing %v, fix %q, skipped %v", tt.name, v, tt.admits, tt.missing, tt.fix, tt.skipped)
		}
		got := v.Finding(tt.answer.Reason)
		if (tt.finding == "") != (got == "") || (tt.finding != "" && !strings.Contains(got, tt.finding)) {
			t.Errorf("%s: finding %q, want %q", tt.name, got, tt.finding)
		}
	}
}

// The report's volumes section: prefixes as strings, empty lists as [], never null.
func TestVolumeVerdictJSON(t *testing.T) {
	v := CheckVolume(Volume{Name: "pvc-1", Claim: "app/data", ShareID: share},
		[]AccessRule{{ID: "r1", Type: "ip", To: "10.196.0.0/16", Level: "rw", State: "active"}}, Answer{Clients: prefixes("10.196.0.0/16")})
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"pvc-1","claim":"app/data","share":"` + share + `","admits":["10.196.0.0/16"],"missing":[]}`
	if string(b) != want {
		t.Errorf("%s\nwant %s", b, want)
	}
}
