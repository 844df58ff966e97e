package controllers

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
)

// eventLog records Events as "<type> <reason> <message>".
type eventLog struct{ events []string }

func (e *eventLog) Eventf(reason, f string, args ...any) {
	e.events = append(e.events, "Normal "+reason+" "+fmt.Sprintf(f, args...))
}

func (e *eventLog) Warningf(reason, f string, args ...any) {
	e.events = append(e.events, "Warning "+reason+" "+fmt.Sprintf(f, args...))
}

func (e *eventLog) WarningOn(_ corev1.ObjectReference, reason, f string, args ...any) {
	e.Warningf(reason, f, args...)
}

// node is a Node with these labels and InternalIPs, in order, and its host name.
func node(name string, labels map[string]string, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

func worker(name string, ips ...string) *corev1.Node {
	return node(name, map[string]string{"node-role.kubernetes.io/worker": ""}, ips...)
}

// master is a master Node as OpenShift taints it; schedulableMaster one of a compact cluster.
func master(name string, ips ...string) *corev1.Node {
	n := schedulableMaster(name, ips...)
	n.Spec.Taints = []corev1.Taint{{Key: "node-role.kubernetes.io/master", Effect: corev1.TaintEffectNoSchedule}}
	return n
}

func schedulableMaster(name string, ips ...string) *corev1.Node {
	return node(name, map[string]string{"node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": ""}, ips...)
}

// The message parts and the status the report adds to the MachineSets' verdict.
func TestStorageReportApply(t *testing.T) {
	const netID, subnetID = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4", "5b7a3f55-4f83-4f7e-9d64-4f2f8b4f9a10"
	fit := openstack.Subnet{ID: subnetID, Name: "storage-subnet", CIDR: netip.MustParsePrefix("10.0.0.0/24"), IPVersion: 4, DHCP: true, DNS: []string{"0.0.0.0"}}
	withGateway := fit
	withGateway.Gateway = netip.MustParseAddr("10.0.0.1")
	dhcpOff := fit
	dhcpOff.DHCP = false
	network := func(s ...openstack.Subnet) openstack.Network {
		return openstack.Network{ID: netID, Name: "storage", Subnets: s}
	}
	const base = "every MachineSet (1) attaches its machines"
	const label = "storage (" + netID + ")"
	var many []*corev1.Node
	for i := range 8 {
		many = append(many, worker(fmt.Sprintf("w%d", i), fmt.Sprintf("10.196.0.%d", 10+i)))
	}

	tests := []struct {
		name     string
		network  openstack.Network
		nodes    []*corev1.Node
		clusterN []netip.Prefix
		status   operatorv1.ConditionStatus
		reason   string
		// want is the whole message.
		want string
	}{
		{name: "fit, no nodes: nothing added", network: network(fit), status: operatorv1.ConditionTrue, reason: "AsExpected", want: base},
		{name: "fit, every worker attached; control-plane nodes do not count", network: network(fit),
			nodes:  []*corev1.Node{worker("w2", "10.196.0.7", "10.0.0.7"), worker("w1", "10.196.0.5", "10.0.0.5"), master("m0", "10.196.0.2")},
			status: operatorv1.ConditionTrue, reason: "AsExpected",
			want: base + ". all 2 workers have an address in the storage subnets 10.0.0.0/24"},
		{name: "a compact cluster: its schedulable masters count as workers", network: network(fit),
			nodes:  []*corev1.Node{schedulableMaster("m0", "10.196.0.2", "10.0.0.2"), schedulableMaster("m1", "10.196.0.3"), schedulableMaster("m2", "10.196.0.4", "10.0.0.4")},
			status: operatorv1.ConditionTrue, reason: "AsExpected",
			want: base + ". 1 of 3 workers have no address in the storage subnets 10.0.0.0/24 yet (not attached, or their Machines predate the attachment): m1"},
		{name: "eight workers not reached: five named", network: network(fit), nodes: many, status: operatorv1.ConditionTrue, reason: "AsExpected",
			want: base + ". 8 of 8 workers have no address in the storage subnets 10.0.0.0/24 yet (not attached, or their Machines predate the attachment): w0, w1, w2, w3, w4 and 3 more"},
		{name: "a gateway: a warning, the status kept", network: network(withGateway), status: operatorv1.ConditionTrue, reason: "AsExpected",
			want: base + ". warnings on the storage network " + label + ": (1) default-route: network " + label + ", subnet storage-subnet (" + subnetID + "): its gateway 10.0.0.1 is handed out by DHCP: " +
				"every machine gets a second default route through it; when the API and ingress VIPs are not on-link, OpenShift's node-IP selection takes the interface with the lowest-metric default route and the node may take its InternalIP from the storage network (logs, exec and the node's br-ex move); " +
				"fix: openstack subnet set --gateway none storage-subnet"},
		{name: "DHCP off: False", network: network(dhcpOff), status: operatorv1.ConditionFalse, reason: reasonStorageNetworkUnfit,
			want: "the storage network " + label + " cannot serve as the workers' second NIC: (1) dhcp-off: network " + label + ": no subnet has DHCP enabled: the machines' port on it gets no address, and the shares stay unreachable; fix: openstack subnet set --dhcp storage-subnet. " + base},
		{name: "overlap with the install-config's networks: False", network: network(fit), clusterN: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")},
			status: operatorv1.ConditionFalse, reason: reasonStorageNetworkUnfit,
			want: "the storage network " + label + " cannot serve as the workers' second NIC: (1) overlap: network " + label + ", subnet storage-subnet (" + subnetID + "): its range 10.0.0.0/24 overlaps the cluster's network 10.0.0.0/16: the nodes would route part of the cluster's traffic to the storage network. " + base},
		{name: "a node IP on the storage network comes first, with an unfit network", network: network(dhcpOff),
			nodes:  []*corev1.Node{worker("w1", "10.0.0.9", "10.196.0.5"), worker("w2", "10.196.0.6", "10.0.0.6"), worker("w3", "10.196.0.7")},
			status: operatorv1.ConditionFalse, reason: reasonNodeIPOnStorageNetwork,
			want: "workers w1 (10.0.0.9 in subnet storage-subnet (" + subnetID + ") 10.0.0.0/24) have their node IP (first InternalIP) on the storage network " + label +
				": logs, exec and port-forward to them break and their br-ex follows the storage NIC; fix: give the storage subnet no default route (openstack subnet set --gateway none storage-subnet), which the node-IP selection falls back to, then delete their Machines so that the replacements take their node IP on the machine network. " +
				"the storage network " + label + " cannot serve as the workers' second NIC: (1) dhcp-off: network " + label + ": no subnet has DHCP enabled: the machines' port on it gets no address, and the shares stay unreachable; fix: openstack subnet set --dhcp storage-subnet. " +
				base + ". 1 of 3 workers have no address in the storage subnets 10.0.0.0/24 yet (not attached, or their Machines predate the attachment): w3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := judgeStorageNetwork(tt.network, nil, tt.clusterN, tt.nodes)
			status, reason, msg := r.apply(operatorv1.ConditionTrue, "AsExpected", base)
			if status != tt.status || reason != tt.reason {
				t.Errorf("%s %s, want %s %s", status, reason, tt.status, tt.reason)
			}
			if msg != tt.want {
				t.Errorf("message\n%s\nwant\n%s", msg, tt.want)
			}
		})
	}
}

func TestCapNames(t *testing.T) {
	for n, want := range map[int]string{
		0: "", 1: "n0", 5: "n0, n1, n2, n3, n4", 6: "n0, n1, n2, n3, n4 and 1 more", 12: "n0, n1, n2, n3, n4 and 7 more",
	} {
		var names []string
		for i := range n {
			names = append(names, fmt.Sprintf("n%d", i))
		}
		if got := capNames(names); got != want {
			t.Errorf("%d names: %q, want %q", n, got, want)
		}
	}
}

// Whether the MachineSets give their machines' port on the storage network security groups:
// the machine's groups go to every port whose entry leaves port security on.
func TestSecurityGroupsAsked(t *testing.T) {
	const storage = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4"
	set := func(value map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		_ = unstructured.SetNestedField(u.Object, value, "spec", "template", "spec", "providerSpec", "value")
		return u
	}
	groups := []any{map[string]any{"name": "ostest-worker"}}
	for _, tt := range []struct {
		name  string
		value map[string]any
		want  bool
	}{
		{"networks[] entry, machine groups", map[string]any{"networks": []any{map[string]any{"uuid": storage}}, "securityGroups": groups}, true},
		{"by filter.id, upper case", map[string]any{"networks": []any{map[string]any{"filter": map[string]any{"id": strings.ToUpper(storage)}}}, "securityGroups": groups}, true},
		{"portSecurity: false", map[string]any{"networks": []any{map[string]any{"uuid": storage, "portSecurity": false}}, "securityGroups": groups}, false},
		{"no groups at all", map[string]any{"networks": []any{map[string]any{"uuid": storage}}}, false},
		{"ports[] entry with its own groups", map[string]any{"ports": []any{map[string]any{"networkID": storage, "securityGroups": []any{"sg"}}}}, true},
		{"ports[] entry, portSecurity: false", map[string]any{"ports": []any{map[string]any{"networkID": storage, "portSecurity": false}}, "securityGroups": groups}, false},
		{"groups, but no port on the network", map[string]any{"networks": []any{map[string]any{"uuid": "0dd482e1-3ffd-4730-b40f-0fac550c4626"}}, "securityGroups": groups}, false},
	} {
		if got := securityGroupsAsked([]*unstructured.Unstructured{set(tt.value)}, storage); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestClusterNetworksFromInstallConfig(t *testing.T) {
	ic := `networking:
  clusterNetwork:
  - cidr: 10.128.0.0/14
    hostPrefix: 23
  machineNetwork:
  - cidr: 10.196.0.0/16
  - cidr: " 192.168.1.7/24 "
  serviceNetwork:
  - 172.30.0.0/16
  - not-a-cidr
`
	got := operator.ParseInstallConfigNetworks([]byte(ic + "platform:\n  openstack:\n    apiVIPs: [10.196.0.5]\n    ingressVIPs: [10.196.0.7]\n    apiVIP: 10.196.0.5\n"))
	if want := "[10.196.0.0/16 192.168.1.0/24 10.128.0.0/14 172.30.0.0/16]"; fmt.Sprint(got.All()) != want {
		t.Errorf("%v, want %s", got.All(), want)
	}
	if want := "[10.196.0.5 10.196.0.7]"; fmt.Sprint(got.VIPs) != want {
		t.Errorf("VIPs %v, want %s", got.VIPs, want)
	}
	if got := operator.ParseInstallConfigNetworks([]byte("{not yaml")).All(); got != nil {
		t.Errorf("unparsable: %v", got)
	}
}

// The warnings are recorded once per change, not at every sync.
func TestWarnOnce(t *testing.T) {
	rec := &eventLog{}
	c := &storageNetworkController{recorder: rec}
	gw := openstack.Subnet{ID: "s1", CIDR: netip.MustParsePrefix("10.0.0.0/24"), DHCP: true, DNS: []string{"0.0.0.0"}, Gateway: netip.MustParseAddr("10.0.0.1")}
	fit := gw
	fit.Gateway = netip.Addr{}
	for _, s := range []openstack.Subnet{gw, gw, fit, gw} {
		c.warnOnce(judgeStorageNetwork(openstack.Network{ID: "n", Subnets: []openstack.Subnet{s}}, nil, nil, nil))
	}
	if len(rec.events) != 2 || !strings.HasPrefix(rec.events[0], "Warning StorageNetworkWarnings warnings on the storage network n: (1) default-route") || rec.events[1] != rec.events[0] {
		t.Errorf("events %q, want the gateway's warning twice (it went away and came back)", rec.events)
	}
}
