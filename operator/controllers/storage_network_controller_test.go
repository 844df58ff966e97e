package controllers

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// The storage network controller's sync, on fakes of what it reads and writes.
func TestStorageNetworkControllerSync(t *testing.T) {
	const storage, other = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4", "0dd482e1-3ffd-4730-b40f-0fac550c4626"
	ms := func(name string, nets ...string) runtime.Object { return machineSetOn(name, "", nets...) }
	cpms := func(state string, nets ...string) *unstructured.Unstructured {
		var entries []any
		for _, n := range nets {
			entries = append(entries, map[string]any{"uuid": n})
		}
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetName("cluster")
		_ = unstructured.SetNestedField(u.Object, state, "spec", "state")
		_ = unstructured.SetNestedSlice(u.Object, entries, "spec", "template", "machines_v1beta1_machine_openshift_io", "spec", "providerSpec", "value", "networks")
		return u
	}
	tie := &openstack.Ranking{Candidates: []openstack.Candidate{
		{Network: openstack.Network{ID: storage, Name: "a"}, Score: 10, Confidence: openstack.ConfidenceHigh},
		{Network: openstack.Network{ID: other, Name: "b"}, Score: 10, Confidence: openstack.ConfidenceHigh},
	}}
	managed := &operatorv1.OperatorSpec{ManagementState: operatorv1.Managed}
	const subnetID = "5b7a3f55-4f83-4f7e-9d64-4f2f8b4f9a10"
	fit := openstack.Subnet{ID: subnetID, Name: "s", CIDR: netip.MustParsePrefix("10.0.0.0/24"), IPVersion: 4, DHCP: true, DNS: []string{"0.0.0.0"}}
	dhcpOff, gateway := fit, fit
	dhcpOff.DHCP = false
	gateway.Gateway = netip.MustParseAddr("10.0.0.1")
	// discovered is what discovery saw: the storage network with one subnet, an export in it.
	discovered := func(s openstack.Subnet) *storageNetworks {
		return &storageNetworks{at: time.Now(), ranking: &openstack.Ranking{Candidates: []openstack.Candidate{{
			Network: openstack.Network{ID: storage, Name: "storage", Subnets: []openstack.Subnet{s}}, Score: 100, Confidence: openstack.ConfidenceHigh,
			Exports: []openstack.NetworkExport{{Address: netip.MustParseAddr("10.0.0.20"), CIDR: s.CIDR, Shares: 1, Preferred: true}},
		}}}}
	}

	tests := []struct {
		name       string
		spec       *operatorv1.OperatorSpec
		machineAPI bool
		synced     bool
		sets       []runtime.Object
		storage    *storageNetworks
		// want is "" for no status write, "-" for a write without the condition, else
		// "<status> <reason>".
		want    string
		msgHas  string
		requeue bool
		// classes are the operator's StorageClasses, by their nfs-shareClient; the workers
		// mount from the storage subnet 10.0.0.0/24 (every set attached, every machine on it).
		classes []string
		// nodes are the cached nodes; msgHasNot is what the message must not say; events how
		// the Events recorded begin, one per line.
		nodes     []*corev1.Node
		msgHasNot string
		events    string
		// controlPlane is the ControlPlaneMachineSet, nil for none.
		controlPlane *unstructured.Unstructured
	}{
		{name: "no ClusterCSIDriver", want: ""},
		{name: "Unmanaged", spec: &operatorv1.OperatorSpec{ManagementState: operatorv1.Unmanaged}, want: ""},
		{name: "Removed", spec: &operatorv1.OperatorSpec{ManagementState: operatorv1.Removed}, want: "-"},
		{name: "no Machine API", spec: managed, want: "Unknown NoMachineAPI"},
		{name: "MachineSets not cached yet", spec: managed, machineAPI: true, want: "Unknown Checking", requeue: true},
		{name: "no MachineSets", spec: managed, machineAPI: true, synced: true, want: "Unknown NoMachineSets"},
		{name: "given network, all attached", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("b", other, storage), ms("a", storage)},
			storage: &storageNetworks{given: storage}, want: "True AsExpected", msgHas: "every MachineSet (2)"},
		{name: "attached, and the classes admit the storage subnet", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("a", storage)},
			storage: &storageNetworks{given: storage}, classes: []string{"10.0.0.0/24", "10.0.0.0/24,10.196.0.0/16"}, want: "True AsExpected",
			msgHas: "the StorageClasses admit 10.0.0.0/24 and 10.0.0.0/24,10.196.0.0/16 to their shares: every worker has a port on the storage network"},
		{name: "attached, but a class admits only the machine network", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("a", storage)},
			storage: &storageNetworks{given: storage}, classes: []string{"10.0.0.0/24", "10.196.0.0/16"}, want: "False StorageClassesExcludeWorkers",
			msgHas: "StorageClasses sc1 do not admit 10.0.0.0/24, where the workers mount from"},
		{name: "given network, one not attached", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("b", other), ms("a", storage)},
			storage: &storageNetworks{given: storage}, want: "False MachineSetsNotAttached", msgHas: "MachineSets b do not attach"},
		{name: "discovery tie", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("a", storage)},
			storage: &storageNetworks{at: time.Now(), ranking: tie}, want: "Unknown StorageNetworkUnknown", msgHas: "choose one with --storage-network"},
		{name: "discovered, fit, every worker on it", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("a", storage)},
			storage: discovered(fit), nodes: []*corev1.Node{worker("w1", "10.196.0.5", "10.0.0.5"), master("m1", "10.196.0.2")},
			want: "True AsExpected", msgHas: "every MachineSet (1) attaches its machines to the storage network " + storage + " (found by discovery with high confidence: \"storage\" (" + storage + ")); the workers mount from 10.0.0.0/24 (every worker has a port on the storage network, so it mounts from its address in the export subnet (set a)). all 1 workers have an address in the storage subnets 10.0.0.0/24",
			msgHasNot: "warning"},
		{name: "discovered, DHCP off", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("a", storage)},
			storage: discovered(dhcpOff), want: "False StorageNetworkUnfit",
			msgHas: "the storage network storage (" + storage + ") cannot serve as the workers' second NIC: (1) dhcp-off: network storage (" + storage + "): no subnet has DHCP enabled"},
		{name: "discovered, a gateway: True, warned once", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("a", storage)},
			storage: discovered(gateway), nodes: []*corev1.Node{worker("w1", "10.196.0.5")},
			want: "True AsExpected", msgHas: "1 of 1 workers have no address in the storage subnets 10.0.0.0/24 yet (not attached, or their Machines predate the attachment): w1. warnings on the storage network storage (" + storage + "): (1) default-route: network storage (" + storage + "), subnet s (" + subnetID + "): its gateway 10.0.0.1 is handed out by DHCP",
			events: "Warning StorageNetworkWarnings warnings on the storage network storage (" + storage + "): (1) default-route"},
		{name: "discovered, a node IP on it", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("a", storage)},
			storage: discovered(gateway), nodes: []*corev1.Node{worker("w1", "10.0.0.9", "10.196.0.5")},
			want: "False NodeIPOnStorageNetwork", msgHas: "workers w1 (10.0.0.9 in subnet s (" + subnetID + ") 10.0.0.0/24) have their node IP (first InternalIP) on the storage network storage (" + storage + ")",
			events: "Warning StorageNetworkWarnings warnings on the storage network storage (" + storage + "): (1) default-route"},
		// A compact cluster: no MachineSet, masters that run workloads, their set judged.
		{name: "compact, the set attached", spec: managed, machineAPI: true, synced: true, controlPlane: cpms("Active", storage),
			storage: &storageNetworks{given: storage}, nodes: []*corev1.Node{schedulableMaster("m0", "10.196.0.2", "10.0.0.2")},
			want: "True AsExpected", msgHas: "the ControlPlaneMachineSet cluster attaches the masters, which run workloads, to the storage network " + storage},
		{name: "compact, the set not attached", spec: managed, machineAPI: true, synced: true, controlPlane: cpms("Active", other),
			storage: &storageNetworks{given: storage}, nodes: []*corev1.Node{schedulableMaster("m0", "10.196.0.2")},
			want: "False ControlPlaneNotAttached", msgHas: "the masters run workloads, but the ControlPlaneMachineSet cluster does not attach them to the storage network " + storage + " (given by --storage-network), so pods on the masters cannot mount Manila shares: run manila-setup controlplane patch"},
		{name: "compact, the set Inactive", spec: managed, machineAPI: true, synced: true, controlPlane: cpms("Inactive", other),
			storage: &storageNetworks{given: storage}, nodes: []*corev1.Node{schedulableMaster("m0", "10.196.0.2")},
			want: "True AsExpected", msgHas: "is not Active, so it does not replace them"},
		{name: "workers attached, schedulable masters not", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("a", storage)}, controlPlane: cpms("Active", other),
			storage: &storageNetworks{given: storage}, nodes: []*corev1.Node{schedulableMaster("m0", "10.196.0.2"), worker("w1", "10.196.0.5", "10.0.0.5")},
			want: "False ControlPlaneNotAttached", msgHas: "so pods on the masters cannot mount Manila shares: run manila-setup controlplane patch. every MachineSet (1) attaches"},
		{name: "tainted masters: the set is not judged", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("a", storage)}, controlPlane: cpms("Active", other),
			storage: &storageNetworks{given: storage}, nodes: []*corev1.Node{master("m0", "10.196.0.2"), worker("w1", "10.196.0.5", "10.0.0.5")},
			want: "True AsExpected", msgHasNot: "ControlPlaneMachineSet"},
		{name: "discovery failed", spec: managed, machineAPI: true, synced: true, sets: []runtime.Object{ms("a", storage)},
			storage: &storageNetworks{at: time.Now(), err: errors.New("Keystone timed out")}, want: "Unknown StorageNetworkUnknown", msgHas: "discovery failed: Keystone timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.storage == nil {
				tt.storage = &storageNetworks{}
			}
			var written *machinery.Status
			requeued := false
			rec := &eventLog{}
			c := &storageNetworkController{
				operands: operands{
					spec: func() *operatorv1.OperatorSpec { return tt.spec },
					applyStatus: func(_ context.Context, manager string, st *machinery.Status) error {
						if manager != storageNetworkName {
							t.Errorf("status written as %s", manager)
						}
						written = st
						return nil
					},
				},
				machineAPI:   func() bool { return tt.machineAPI },
				machineSets:  func() ([]runtime.Object, bool, error) { return tt.sets, tt.synced, nil },
				controlPlane: func() *unstructured.Unstructured { return tt.controlPlane },
				network:      tt.storage.network,
				requeueAfter: func(time.Duration) { requeued = true },
				candidate:    tt.storage.candidate,
				nodes:        func() []*corev1.Node { return tt.nodes },
				clusterNetworks: func() []netip.Prefix {
					return []netip.Prefix{netip.MustParsePrefix("10.196.0.0/16")}
				},
				recorder: rec,
				shareClients: func() (shareclient.Answer, error) {
					return shareclient.Decide(shareclient.Facts{MachineNetworks: []netip.Prefix{netip.MustParsePrefix("10.196.0.0/16")},
						ExportSubnets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}, Sets: []shareclient.Set{{Name: "a", Attached: true}}})
				},
				classes: func() []*storagev1.StorageClass {
					var out []*storagev1.StorageClass
					for i, v := range tt.classes {
						out = append(out, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sc%d", i)}, Parameters: map[string]string{"nfs-shareClient": v}})
					}
					return out
				},
			}
			if err := c.sync(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			got := ""
			switch {
			case written == nil:
			case len(written.Conditions) == 0:
				got = "-"
			default:
				cond := written.Conditions[0]
				if len(written.Conditions) != 1 || cond.Type != operator.ConditionStorageNetworkReachable {
					t.Errorf("conditions %v", written.Conditions)
				}
				got = string(cond.Status) + " " + cond.Reason
				if !strings.Contains(cond.Message, tt.msgHas) {
					t.Errorf("message %q lacks %q", cond.Message, tt.msgHas)
				}
				if tt.msgHasNot != "" && strings.Contains(cond.Message, tt.msgHasNot) {
					t.Errorf("message %q has %q", cond.Message, tt.msgHasNot)
				}
			}
			if got != tt.want || requeued != tt.requeue {
				t.Errorf("wrote %q (requeued %v), want %q (%v)", got, requeued, tt.want, tt.requeue)
			}
			if got := strings.Join(rec.events, "\n"); !strings.HasPrefix(got, tt.events) || (tt.events == "") != (got == "") {
				t.Errorf("events %q, want %q...", rec.events, tt.events)
			}
		})
	}
}

// A new discovery tells the controller only when its answer changes.
func TestStorageNetworksNotify(t *testing.T) {
	s := &storageNetworks{}
	n := 0
	s.listen(func() { n++ })
	one := &openstack.Ranking{Candidates: []openstack.Candidate{{Network: openstack.Network{ID: "x"}, Score: 3, Confidence: openstack.ConfidenceHigh}}}
	var src ManilaSource
	if !s.due(src, time.Hour) {
		t.Error("discovery not due before it ever ran")
	}
	s.discovered(src, one, nil)
	s.discovered(src, one, nil)
	if n != 1 {
		t.Errorf("%d notifications for one answer, want 1", n)
	}
	if s.due(src, time.Hour) {
		t.Error("discovery due again at once")
	}
	s.discovered(src, nil, errors.New("refused"))
	if n != 2 {
		t.Errorf("%d notifications after a failure, want 2", n)
	}
	// The failure keeps the last answer: the driver's runtime configuration and the classes
	// follow it through a blip; the condition says it is an earlier one.
	if id, how, _ := s.network(); id != "x" || !strings.Contains(how, "the latest one failed") {
		t.Errorf("after a failed discovery: network %q (%s), want x from the earlier discovery", id, how)
	}
	if !s.due(src, time.Hour) {
		t.Error("discovery not due again after a failure")
	}
	s.discovered(src, nil, errors.New("refused again"))
	if n != 2 {
		t.Errorf("%d notifications after a second failure, want 2", n)
	}
	s.discovered(src, one, nil)
	if id, how, _ := s.network(); id != "x" || strings.Contains(how, "failed") || n != 3 {
		t.Errorf("after the cloud came back: network %q (%s), %d notifications, want x, 3", id, how, n)
	}
	// With --storage-network discovery still runs: the classes follow the subnets it exports in.
	if given := (&storageNetworks{given: "x"}); !given.due(src, time.Hour) {
		t.Error("discovery never due with --storage-network")
	}
}

// The export subnets the classes follow: those of the network --storage-network names, else of
// the one discovery's rule names.
func TestStorageNetworksExportSubnets(t *testing.T) {
	const storage, other = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4", "0dd482e1-3ffd-4730-b40f-0fac550c4626"
	export := func(cidr string, preferred bool) openstack.NetworkExport {
		p := netip.MustParsePrefix(cidr)
		return openstack.NetworkExport{Address: p.Addr().Next(), CIDR: p, Shares: 1, Preferred: preferred}
	}
	ranking := &openstack.Ranking{Candidates: []openstack.Candidate{
		{Network: openstack.Network{ID: storage}, Score: 300, Confidence: openstack.ConfidenceHigh,
			Exports: []openstack.NetworkExport{export("10.0.0.0/24", true), export("10.0.1.0/24", false), export("10.0.0.0/24", false)}},
		{Network: openstack.Network{ID: other}, Score: 50, Confidence: openstack.ConfidenceLow, Exports: []openstack.NetworkExport{export("192.168.5.0/24", true)}},
	}}
	around := &openstack.Ranking{Candidates: []openstack.Candidate{
		{Network: openstack.Network{ID: storage}, Score: 300, Confidence: openstack.ConfidenceHigh,
			Exports: []openstack.NetworkExport{export("10.0.0.0/24", true), export("10.0.3.0/24", false)}},
		{Network: openstack.Network{ID: other}, Score: 50, Confidence: openstack.ConfidenceLow, Exports: []openstack.NetworkExport{export("10.0.2.0/24", true)}},
	}}
	// The director's StorageNFS with an IPv4 and an IPv6 subnet, Manila preferring the IPv6
	// export: the driver grants IPv4 rules only, so the plugin must mount the IPv4 export.
	director := &openstack.Ranking{Candidates: []openstack.Candidate{
		{Network: openstack.Network{ID: storage}, Score: 300, Confidence: openstack.ConfidenceHigh,
			Exports: []openstack.NetworkExport{export("fd00:fd00:fd00:7000::/64", true), export("172.17.5.0/24", false)}},
	}}
	ipv6Only := &openstack.Ranking{Candidates: []openstack.Candidate{
		{Network: openstack.Network{ID: storage}, Score: 300, Confidence: openstack.ConfidenceHigh,
			Exports: []openstack.NetworkExport{export("fd00:fd00:fd00:7000::/64", true)}},
	}}
	for _, tt := range []struct {
		name       string
		s          *storageNetworks
		want, main string
	}{
		{"IPv4 and IPv6 exports, IPv6 preferred", &storageNetworks{at: time.Now(), ranking: director}, "fd00:fd00:fd00:7000::/64, 172.17.5.0/24", "172.17.5.0/24"},
		{"IPv6 exports only", &storageNetworks{at: time.Now(), ranking: ipv6Only}, "fd00:fd00:fd00:7000::/64", "fd00:fd00:fd00:7000::/64"},
		// The driver matches one CIDR: the one that covers both export subnets.
		{"discovered", &storageNetworks{at: time.Now(), ranking: ranking}, "10.0.0.0/24, 10.0.1.0/24", "10.0.0.0/23"},
		// A covering that would take in another network's exports: the preferred subnet.
		{"two export subnets around another network's", &storageNetworks{at: time.Now(), ranking: around}, "10.0.0.0/24, 10.0.3.0/24", "10.0.0.0/24"},
		{"given, the other candidate", &storageNetworks{given: other, at: time.Now(), ranking: ranking}, "192.168.5.0/24", "192.168.5.0/24"},
		{"given, not among the candidates", &storageNetworks{given: "7f000001-0000-4000-8000-000000000000", at: time.Now(), ranking: ranking}, "", ""},
		{"discovery failed", &storageNetworks{at: time.Now(), err: errors.New("refused")}, "", ""},
		{"the latest discovery failed, an earlier one answered", &storageNetworks{at: time.Now(), ranking: ranking, err: errors.New("refused")}, "10.0.0.0/24, 10.0.1.0/24", "10.0.0.0/23"},
	} {
		if got := shareclient.Join(tt.s.exportSubnets()); got != tt.want {
			t.Errorf("%s: exportSubnets %q, want %q", tt.name, got, tt.want)
		}
		if got := tt.s.exportSubnet(); got != tt.main {
			t.Errorf("%s: exportSubnet %q, want %q", tt.name, got, tt.main)
		}
	}
}

// A storage network whose shares prefer their IPv6 export beside an IPv4 one: the driver
// cannot stage them (TestJourneyOnTheDirectorLayout sees its refusal), so the condition says
// so; IPv4 preferred, or IPv6 exports only, leave it as it was.
func TestExportsVerdict(t *testing.T) {
	export := func(addr string, preferred bool) openstack.NetworkExport {
		return openstack.NetworkExport{Address: netip.MustParseAddr(addr), Shares: 1, Preferred: preferred}
	}
	network := openstack.Network{ID: "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4"}
	for _, tt := range []struct {
		name    string
		exports []openstack.NetworkExport
		want    operatorv1.ConditionStatus
	}{
		{"IPv4 preferred", []openstack.NetworkExport{export("172.17.5.10", true), export("fd00:fd00:fd00:7000::10", false)}, operatorv1.ConditionTrue},
		{"IPv6 preferred", []openstack.NetworkExport{export("172.17.5.10", false), export("fd00:fd00:fd00:7000::10", true)}, operatorv1.ConditionFalse},
		{"IPv6 only", []openstack.NetworkExport{export("fd00:fd00:fd00:7000::10", true)}, operatorv1.ConditionTrue},
	} {
		status, reason, msg := exportsVerdict(&openstack.Candidate{Network: network, Exports: tt.exports}, operatorv1.ConditionTrue, "AsExpected", "all attached")
		if status != tt.want || !strings.HasSuffix(msg, "all attached") {
			t.Errorf("%s: %s %s %q, want status %s keeping the message", tt.name, status, reason, msg, tt.want)
		}
		if status == operatorv1.ConditionFalse && (reason != reasonIPv6ExportPreferred || !strings.Contains(msg, "fd00:fd00:fd00:7000::10") || !strings.Contains(msg, "prefer its IPv4 export")) {
			t.Errorf("%s: %s %q", tt.name, reason, msg)
		}
	}
}

// Beside the platform's driver the classes hold one rule. Half-way through a rollout on the
// director's layout the rule is the storage subnet, not the 0.0.0.0/0 that would cover the
// machine network too: the condition stays True and names the workers left out, instead of
// saying the classes are wrong and recreating them for ever.
func TestClassesVerdictOneRule(t *testing.T) {
	answer, err := shareclient.Decide(shareclient.Facts{MachineNetworks: []netip.Prefix{netip.MustParsePrefix("10.196.0.0/16")},
		ExportSubnets: []netip.Prefix{netip.MustParsePrefix("172.17.5.0/24")},
		Sets:          []shareclient.Set{{Name: "worker-0", Attached: true}},
		Machines:      []shareclient.Machine{{Name: "old", Addresses: []netip.Addr{netip.MustParseAddr("10.196.0.9")}}}})
	if err != nil {
		t.Fatal(err)
	}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-default"}, Parameters: map[string]string{"nfs-shareClient": answer.Value(false)}}
	status, reason, msg := classesVerdict(func() (shareclient.Answer, error) { return answer, nil }, []*storagev1.StorageClass{class}, "attached", false)
	if status != operatorv1.ConditionTrue || reason != "AsExpected" ||
		!strings.Contains(msg, "the shares admit 172.17.5.0/24 only, so workers that mount from 10.196.0.0/16 (not attached yet) cannot mount shares made until they are") {
		t.Errorf("one rule: %s %s %q", status, reason, msg)
	}
	// With a list the same class leaves the machine network out: that is wrong.
	if status, reason, _ := classesVerdict(func() (shareclient.Answer, error) { return answer, nil }, []*storagev1.StorageClass{class}, "attached", true); status != operatorv1.ConditionFalse || reason != "StorageClassesExcludeWorkers" {
		t.Errorf("a list driver, the storage subnet only: %s %s", status, reason)
	}
}
