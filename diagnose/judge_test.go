package diagnose

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

func TestParseTarget(t *testing.T) {
	for in, want := range map[string]Target{
		"pod/app-0":                    {Kind: "pod", Namespace: "ns", Name: "app-0"},
		"pods/app-0":                   {Kind: "pod", Namespace: "ns", Name: "app-0"},
		"pvc/data":                     {Kind: "pvc", Namespace: "ns", Name: "data"},
		"PersistentVolumeClaim/data":   {Kind: "pvc", Namespace: "ns", Name: "data"},
		"persistentvolumeclaims/data2": {Kind: "pvc", Namespace: "ns", Name: "data2"},
		"volumesnapshot/daily":         {Kind: "volumesnapshot", Namespace: "ns", Name: "daily"},
		"VolumeSnapshots/daily":        {Kind: "volumesnapshot", Namespace: "ns", Name: "daily"},
		"vs/daily":                     {Kind: "volumesnapshot", Namespace: "ns", Name: "daily"},
	} {
		got, err := ParseTarget(in, "ns")
		if err != nil || got != want {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"app-0":                           `target: Invalid value: "app-0": want pod/NAME, pvc/NAME or volumesnapshot/NAME`,
		"pod/":                            `want pod/NAME, pvc/NAME or volumesnapshot/NAME`,
		"deploy/app":                      `"deploy" is not pod, pvc or volumesnapshot`,
		"pod/a/b":                         `want pod/NAME, pvc/NAME or volumesnapshot/NAME`,
		"pod/" + strings.Repeat("a", 254): `a name has at most 253 characters`,
	} {
		if _, err := ParseTarget(in, "ns"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTarget(%q): %v, want %q", in, err, want)
		}
	}
}

func node(addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: "worker-0"})
	return n
}

// Where a node mounts from: its address in an export subnet, else (export subnets unknown) its
// address outside the machine network, else its node IP.
func TestMountAddress(t *testing.T) {
	exports := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}
	machine := []netip.Prefix{netip.MustParsePrefix("10.196.0.0/16")}
	tests := []struct {
		name             string
		n                *corev1.Node
		exports, machine []netip.Prefix
		want, how        string
	}{
		{"on the storage network", node("10.196.0.12", "10.0.0.23"), exports, machine, "10.0.0.23", "export subnet 10.0.0.0/24"},
		{"not attached", node("10.196.0.12"), exports, machine, "10.196.0.12", "its node IP"},
		{"no cloud: the second NIC", node("10.196.0.12", "10.0.0.23"), nil, machine, "10.0.0.23", "outside the machine network 10.196.0.0/16"},
		{"no cloud, one NIC", node("10.196.0.12"), nil, machine, "10.196.0.12", "its node IP"},
		{"nothing known", node("10.196.0.12", "10.0.0.23"), nil, nil, "10.196.0.12", "its node IP"},
		{"no address", node(), exports, machine, "invalid IP", "no InternalIP"},
	}
	for _, tt := range tests {
		got, how := mountAddress(tt.n, tt.exports, tt.machine)
		if got.String() != tt.want || !strings.Contains(how, tt.how) {
			t.Errorf("%s: %s (%s), want %s (%s)", tt.name, got, how, tt.want, tt.how)
		}
	}
}

// The access rule check: passed only for an active rw ip rule admitting the address; a missing,
// read-only, queued or failed rule each fails with its own words and fix.
func TestJudgeAccess(t *testing.T) {
	addr := netip.MustParseAddr("10.0.0.23")
	sub := netip.MustParsePrefix("10.0.0.0/24")
	rule := func(to, level, state string) openstack.AccessRule {
		return openstack.AccessRule{ID: "r-" + state, Type: "ip", To: to, Level: level, State: state}
	}
	tests := []struct {
		name   string
		rules  []openstack.AccessRule
		sub    netip.Prefix
		status Status
		want   []string
	}{
		{"active rw subnet", []openstack.AccessRule{rule("10.196.0.0/16", "rw", "active"), rule("10.0.0.0/24", "rw", "active")}, sub, Passed,
			[]string{"rule r-active (ip 10.0.0.0/24, rw, active) admits 10.0.0.23 (how)"}},
		{"the working rule wins over a failed one", []openstack.AccessRule{rule("10.0.0.23", "rw", "error"), rule("10.0.0.0/24", "rw", "active")}, sub, Passed, []string{"admits"}},
		{"none admits", []openstack.AccessRule{rule("10.196.0.0/16", "rw", "active"), {Type: "cephx", To: "alice", Level: "rw", State: "active"}}, sub, Failed,
			[]string{"no ip rule admits 10.0.0.23 (how); the share's rules: ip 10.196.0.0/16 rw active; cephx alice rw active",
				"openstack --os-cloud c share access create s1 ip 10.0.0.0/24 --access-level rw"}},
		{"no rule at all, no export subnet", nil, netip.Prefix{}, Failed, []string{"rules: none; a pod that mounted it before its last rule went sees \"Stale file handle\"", "share access create s1 ip 10.0.0.23/32 --access-level rw"}},
		{"read-only", []openstack.AccessRule{rule("10.0.0.0/24", "ro", "active")}, sub, Failed,
			[]string{"read-only: writes fail", "share access delete s1 r-active && openstack --os-cloud c share access create s1 ip 10.0.0.0/24"}},
		{"error", []openstack.AccessRule{rule("10.0.0.0/24", "rw", "error")}, sub, Failed, []string{"is in error", "share access delete s1 r-error"}},
		{"queued", []openstack.AccessRule{rule("10.0.0.0/24", "rw", "queued_to_apply")}, sub, Failed,
			[]string{"(ip 10.0.0.0/24, rw, queued_to_apply) is not active yet: the driver does not wait", "share access list s1"}},
	}
	for _, tt := range tests {
		c := judgeAccess("s1", "worker-0", addr, "how", tt.rules, "c", tt.sub)
		text := c.Evidence + " | " + c.Fix
		if c.Status != tt.status {
			t.Errorf("%s: %s (%s), want %s", tt.name, c.Status, text, tt.status)
		}
		for _, w := range tt.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: %q lacks %q", tt.name, text, w)
			}
		}
		if (c.Fix == "") != (c.Status == Passed) {
			t.Errorf("%s: status %s with fix %q", tt.name, c.Status, c.Fix)
		}
	}
}

func TestJudgeShareClient(t *testing.T) {
	addr := netip.MustParseAddr("10.0.0.23")
	for value, want := range map[string]Status{"10.0.0.0/24": Passed, "10.196.0.0/16,10.0.0.0/24": Passed, "": Passed, "10.196.0.0/16": Failed, "not-a-cidr": Failed} {
		c := judgeShareClient("csi-manila-default", "worker-0", addr, "how", value)
		if c.Status != want {
			t.Errorf("nfs-shareClient %q: %s (%s), want %s", value, c.Status, c.Evidence, want)
		}
		if want == Failed && c.Fix == "" {
			t.Errorf("nfs-shareClient %q: failed without a fix", value)
		}
	}
}

func TestJudgePodAndClaim(t *testing.T) {
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "worker-0"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	if c := judgePod(running, ""); c.Status != Passed || !strings.Contains(c.Evidence, "on worker-0") {
		t.Errorf("running pod: %+v", c)
	}
	stuck := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "worker-0"},
		Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}
	c := judgePod(stuck, "FailedMount: mount.nfs: Connection timed out")
	if c.Status != Failed || c.Evidence != "Pending on worker-0, container app ContainerCreating; newest warning: FailedMount: mount.nfs: Connection timed out"+
		" (the node's NFS traffic never reaches the export: no port on the network Manila exports on, or a route or security group that drops it)" {
		t.Errorf("stuck pod: %+v", c)
	}
	class := "csi-manila-gold"
	pending := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}}
	if c := judgeClaim(pending, "ProvisioningFailed: share type gold not found"); c.Status != Failed ||
		c.Evidence != "Pending (class csi-manila-gold); newest warning: ProvisioningFailed: share type gold not found" {
		t.Errorf("pending claim: %+v", c)
	}
	bound := pending.DeepCopy()
	bound.Status.Phase, bound.Spec.VolumeName = corev1.ClaimBound, "pvc-1"
	if c := judgeClaim(bound, ""); c.Status != Passed || c.Evidence != "Bound to PersistentVolume pvc-1 (class csi-manila-gold)" {
		t.Errorf("bound claim: %+v", c)
	}
}

func TestServerID(t *testing.T) {
	for id, want := range map[string]string{"openstack:///a1b2": "a1b2", "openstack://RegionOne/a1b2": "a1b2", "aws:///i-1": "", "": ""} {
		if got := serverID(&corev1.Node{Spec: corev1.NodeSpec{ProviderID: id}}); got != want {
			t.Errorf("serverID(%q) = %q, want %q", id, got, want)
		}
	}
}

// The words here are the NFS client's own, as test/datapath's guests print them against the
// loopback cloud's nfs-ganesha (TestSharesAreRealNFSExports checks the same readings on them).
func TestExplainMountError(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"mount.nfs: mounting 10.0.0.10:/share_1 failed, reason given by server: No such file or directory", "not in the share's rules; the path itself is right"},
		{"mount.nfs: access denied by server while mounting 10.0.0.10:/share_1", "not in the share's access rules"},
		{"MountVolume.MountDevice failed ... mount.nfs: Connection timed out", "no port on the network Manila exports on"},
		{"sh: can't create /mnt/share/node-c: Read-only file system", "read-only"},
		{"sh: can't create /mnt/share/node-b: Permission denied", "revoked"},
		{"sh: can't create /mnt/test/probe: Stale file handle", "last access rule was revoked"},
		{"mount failed: no such device", "no NFS client"},
		{"rpc error: code = Internal desc = mount failed: time out after 1m30s", "does not reach the export"},
		// The Manila node plugin v1.35.0's own words on a share whose IPv6 export is preferred
		// (TestJourneyOnTheDirectorLayout, test/e2e).
		{"rpc error: code = InvalidArgument desc = failed to build volume context for volume 593a775f: failed to choose an export location: " +
			"matchExportLocationAddress filter '172.17.5.0/24': IP '[fd00:fd00:fd00:7000::10]' in export location path [fd00:fd00:fd00:7000::10]:/share_593a775f is invalid",
			"list and prefer its IPv4 export address first"},
		{"something else entirely", ""},
	} {
		got := ExplainMountError(tc.msg)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("ExplainMountError(%q) = %q, want it to say %q", tc.msg, got, tc.want)
		}
	}
}
