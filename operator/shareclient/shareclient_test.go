package shareclient

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, x := range s {
		out[i] = netip.MustParsePrefix(x)
	}
	return out
}

func machine(name string, addrs ...string) Machine {
	m := Machine{Name: name}
	for _, a := range addrs {
		m.Addresses = append(m.Addresses, netip.MustParseAddr(a))
	}
	return m
}

// attachedMachine is a machine whose own spec has the storage port.
func attachedMachine(name string, addrs ...string) Machine {
	m := machine(name, addrs...)
	m.Attached = true
	return m
}

// noNode is a machine whose Node has not joined.
func noNode(m Machine) Machine {
	m.NoNode = true
	return m
}

func TestDecide(t *testing.T) {
	machineNet := prefixes("10.196.0.0/16")
	storage := prefixes("10.0.0.0/24")
	tests := []struct {
		name              string
		facts             Facts
		want              string // Value(true)
		covering          string // Value(false)
		viaMachine, viaSt bool
		reason            string
	}{
		{"before the attach: the machine network",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Sets: []Set{{Name: "worker-a"}},
				Machines: []Machine{machine("w1", "10.196.0.11"), machine("w2", "10.196.0.12")}},
			"10.196.0.0/16", "10.196.0.0/16", true, false, "no worker has a port on the storage network"},
		{"after attach and rollout: the export subnet",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Sets: []Set{{Name: "worker-a", Attached: true}},
				Machines: []Machine{machine("w1", "10.196.0.11", "10.0.0.31"), machine("w2", "10.196.0.12", "10.0.0.32")}},
			"10.0.0.0/24", "10.0.0.0/24", false, true, "every worker has a port on the storage network"},
		{"set patched, rollout not begun: old machines still mount through the machine network",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Sets: []Set{{Name: "worker-a", Attached: true}},
				Machines: []Machine{machine("w1", "10.196.0.11")}},
			"10.0.0.0/24,10.196.0.0/16", "10.0.0.0/24", true, true, "two networks"},
		{"one set attached, one not",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Sets: []Set{{Name: "a", Attached: true}, {Name: "b"}},
				Machines: []Machine{machine("a1", "10.196.0.11", "10.0.0.31"), machine("b1", "10.196.0.12")}},
			"10.0.0.0/24,10.196.0.0/16", "10.0.0.0/24", true, true, "through the machine network (routed): 1 machine and set b"},
		{"export subnet unknown: the machine network",
			Facts{MachineNetworks: machineNet, Sets: []Set{{Name: "a", Attached: true}}, Machines: []Machine{machine("a1", "10.196.0.11", "10.0.0.31")}},
			"10.196.0.0/16", "10.196.0.0/16", true, false, "not known"},
		{"no machines or sets known",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage},
			"10.196.0.0/16", "10.196.0.0/16", true, false, "no worker machine or MachineSet is known"},
		{"several machine networks: only the ones the machines are on, plus all for unattached sets",
			Facts{MachineNetworks: prefixes("10.196.0.0/16", "10.197.0.0/16"), ExportSubnets: storage,
				Machines: []Machine{machine("w1", "10.197.0.5", "10.0.0.9")}},
			"10.0.0.0/24", "10.0.0.0/24", false, true, ""},
		{"the installer's default machine network holds the storage subnet: one rule covers both",
			Facts{MachineNetworks: prefixes("10.0.0.0/16"), ExportSubnets: storage, Sets: []Set{{Name: "a", Attached: true}},
				Machines: []Machine{machine("w1", "10.0.5.1")}},
			"10.0.0.0/16", "10.0.0.0/16", true, true, "two networks"},
		{"scale-up of an attached set: the new machines have no Node and no address yet, and do not count",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Sets: []Set{{Name: "worker-a", Attached: true}},
				Machines: []Machine{attachedMachine("w1", "10.196.0.11", "10.0.0.31"), attachedMachine("w2", "10.196.0.12", "10.0.0.32"),
					noNode(attachedMachine("w3")), noNode(attachedMachine("w4"))}},
			"10.0.0.0/24", "10.0.0.0/24", false, true, "every worker has a port on the storage network, so it mounts from its address in the export subnet (2 machines and set worker-a); 2 machines without a Node yet are not counted"},
		{"a new machine of an attached set whose Node joined before its storage address was reported: the export subnet",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Sets: []Set{{Name: "worker-a", Attached: true}},
				Machines: []Machine{attachedMachine("w1", "10.196.0.11", "10.0.0.31"), attachedMachine("w3", "10.196.0.13"), attachedMachine("w4")}},
			"10.0.0.0/24", "10.0.0.0/24", false, true, "every worker has a port on the storage network, so it mounts from its address in the export subnet (3 machines and set worker-a)"},
		{"a machine of an older template (its spec lacks the storage port) has a Node: routed",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Sets: []Set{{Name: "worker-a", Attached: true}},
				Machines: []Machine{attachedMachine("w1", "10.196.0.11", "10.0.0.31"), machine("old", "10.196.0.12")}},
			"10.0.0.0/24,10.196.0.0/16", "10.0.0.0/24", true, true, "through the storage network: 1 machine and set worker-a; through the machine network (routed): 1 machine"},
		{"a machine that never got a Node mounts nothing, even with addresses on the machine network",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Sets: []Set{{Name: "worker-a", Attached: true}},
				Machines: []Machine{attachedMachine("w1", "10.196.0.11", "10.0.0.31"), noNode(machine("stuck", "10.196.0.12"))}},
			"10.0.0.0/24", "10.0.0.0/24", false, true, "1 machine without a Node yet is not counted"},
		{"a machine without a Node of a set not attached: the set still counts",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Sets: []Set{{Name: "a", Attached: true}, {Name: "b"}},
				Machines: []Machine{attachedMachine("a1", "10.196.0.11", "10.0.0.31"), noNode(machine("b1"))}},
			"10.0.0.0/24,10.196.0.0/16", "10.0.0.0/24", true, true, "through the machine network (routed): set b"},
		{"only machines without a Node and no set: as if none were known",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Machines: []Machine{noNode(attachedMachine("w1"))}},
			"10.196.0.0/16", "10.196.0.0/16", true, false, "no worker machine or MachineSet is known"},
		{"a machine whose spec has the storage port, the export subnet unknown: the machine network",
			Facts{MachineNetworks: machineNet, Machines: []Machine{attachedMachine("w1", "10.196.0.11")}},
			"10.196.0.0/16", "10.196.0.0/16", true, false, "not known"},
		{"an address in the export subnet counts whatever the spec says (a port added by hand)",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Machines: []Machine{machine("w1", "10.196.0.11", "10.0.0.31")}},
			"10.0.0.0/24", "10.0.0.0/24", false, true, "every worker has a port on the storage network"},
		{"two export subnets, a machine in one of them",
			Facts{MachineNetworks: machineNet, ExportSubnets: prefixes("10.0.0.0/24", "10.0.1.0/24"),
				Sets: []Set{{Name: "a", Attached: true}}, Machines: []Machine{machine("w1", "10.196.0.1", "10.0.1.7")}},
			"10.0.0.0/24,10.0.1.0/24", "10.0.0.0/23", false, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Decide(tt.facts)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Value(true); got != tt.want {
				t.Errorf("Value(list) = %q, want %q", got, tt.want)
			}
			if got := a.Value(false); got != tt.covering {
				t.Errorf("Value(single) = %q, want %q", got, tt.covering)
			}
			if a.ViaMachineNetwork != tt.viaMachine || a.ViaStorageNetwork != tt.viaSt {
				t.Errorf("via machine %v storage %v, want %v %v", a.ViaMachineNetwork, a.ViaStorageNetwork, tt.viaMachine, tt.viaSt)
			}
			if !strings.Contains(a.Reason, tt.reason) {
				t.Errorf("reason %q does not say %q", a.Reason, tt.reason)
			}
			// Whatever the form, the value admits every network of the answer but those Left
			// names, and nothing outside them.
			for _, list := range []bool{true, false} {
				rules, err := ParseValue(a.Value(list))
				if err != nil {
					t.Fatal(err)
				}
				if m := Missing(rules, a.Clients); !slices.Equal(m, a.Left(list)) {
					t.Errorf("Value(%v) = %q leaves out %v, Left says %v", list, a.Value(list), m, a.Left(list))
				}
				for _, r := range rules {
					if !tiles(r, a.Clients) && !slices.Contains(a.Clients, r) {
						t.Errorf("Value(%v) = %q: %s admits addresses outside %v", list, a.Value(list), r, a.Clients)
					}
				}
			}
		})
	}
	if _, err := Decide(Facts{ExportSubnets: storage}); err != ErrNoMachineNetwork {
		t.Errorf("no machine network: err %v", err)
	}
}

func TestParseValueAndMissing(t *testing.T) {
	rules, err := ParseValue("10.0.0.0/24, 10.196.0.7")
	if err != nil {
		t.Fatal(err)
	}
	if got := Join(rules); got != "10.0.0.0/24, 10.196.0.7/32" {
		t.Errorf("ParseValue = %s", got)
	}
	if m := Missing(rules, prefixes("10.0.0.0/25", "10.196.0.0/16")); Join(m) != "10.196.0.0/16" {
		t.Errorf("Missing = %v", m)
	}
	if _, err := ParseValue("10.0.0.0/24,nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("bad entry: err %v", err)
	}
	if Covers(netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("fd00::/64")) {
		t.Error("an IPv4 rule covers an IPv6 network")
	}
}

// The clusters of real clouds: the director's StorageNFS network beside the machine network,
// and dual-stack machine networks.
func TestDecideOnCloudShapes(t *testing.T) {
	for _, tt := range []struct {
		name         string
		facts        Facts
		list, single string
		left, reason string
	}{
		{"the director's layout half-way through a rollout: one rule is the storage subnet, never 0.0.0.0/0",
			Facts{MachineNetworks: prefixes("10.196.0.0/16"), ExportSubnets: prefixes("172.17.5.0/24"),
				Sets: []Set{{Name: "worker-0", Attached: true}}, Machines: []Machine{machine("old", "10.196.0.9"), attachedMachine("new", "10.196.0.10", "172.17.5.30")}},
			"10.196.0.0/16,172.17.5.0/24", "172.17.5.0/24", "10.196.0.0/16", "two networks"},
		{"dual-stack machine network, IPv4 exports: the IPv6 subnet is no client",
			Facts{MachineNetworks: prefixes("10.196.0.0/16", "fd2e:6f44:5dd8:c956::/64"), ExportSubnets: prefixes("10.0.0.0/24"),
				Sets: []Set{{Name: "worker-0"}}, Machines: []Machine{machine("w", "10.196.0.9", "fd2e:6f44:5dd8:c956::9")}},
			"10.196.0.0/16", "10.196.0.0/16", "", "fd2e:6f44:5dd8:c956::/64 left out: Manila exports on IPv4 only"},
		{"dual-stack machine network, exports unknown: no IPv6 rule, which the driver cannot grant",
			Facts{MachineNetworks: prefixes("10.196.0.0/16", "fd2e:6f44:5dd8:c956::/64"), Sets: []Set{{Name: "worker-0"}}},
			"10.196.0.0/16", "10.196.0.0/16", "", "the driver cannot grant IPv6 rules"},
		{"IPv6 exports only: the IPv6 storage subnet stays (claims fail on Manila's refusal, no open share)",
			Facts{MachineNetworks: prefixes("10.196.0.0/16", "fd2e:6f44:5dd8:c956::/64"), ExportSubnets: prefixes("fd00:17:5::/64"),
				Sets: []Set{{Name: "worker-0", Attached: true}}},
			"fd00:17:5::/64", "fd00:17:5::/64", "", ""},
		{"adjacent storage subnets: one rule covers both exactly",
			Facts{MachineNetworks: prefixes("10.196.0.0/16"), ExportSubnets: prefixes("172.17.4.0/24", "172.17.5.0/24"),
				Sets: []Set{{Name: "worker-0", Attached: true}}},
			"172.17.4.0/24,172.17.5.0/24", "172.17.4.0/23", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Decide(tt.facts)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.Value(true); got != tt.list {
				t.Errorf("Value(list) = %q, want %q", got, tt.list)
			}
			if got := a.Value(false); got != tt.single {
				t.Errorf("Value(single) = %q, want %q", got, tt.single)
			}
			if got := Join(a.Left(false)); got != tt.left {
				t.Errorf("Left(single) = %q, want %q", got, tt.left)
			}
			if !strings.Contains(a.Reason, tt.reason) {
				t.Errorf("reason %q does not say %q", a.Reason, tt.reason)
			}
			for _, v := range []string{a.Value(true), a.Value(false)} {
				if strings.Contains(v, "/0") {
					t.Errorf("a share open to everyone: %q", v)
				}
			}
		})
	}
}

func TestCovering(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{
		{[]string{"10.196.0.0/16"}, "10.196.0.0/16"},
		{[]string{"10.196.3.7/16"}, "10.196.0.0/16"},
		{[]string{"10.196.0.0/16", "10.197.0.0/16"}, "10.196.0.0/15"},
		{[]string{"10.0.0.0/24", "10.196.0.0/16"}, "10.0.0.0/8"},
		{[]string{"10.0.0.0/24", "192.168.0.0/24"}, "0.0.0.0/0"},
		{[]string{"10.196.0.0/16", "fd00::/64"}, "10.196.0.0/16"},
	} {
		if got := Covering(prefixes(tt.in...)).String(); got != tt.want {
			t.Errorf("Covering(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestDecideThroughTheMachineLifecycle follows the Machine API's lifecycle of a machine
// (created: no address, no Node; Provisioned: the server's addresses; Running: its Node) through
// a scale-up and the second half of a rollout, and counts how often the value changes.
func TestDecideThroughTheMachineLifecycle(t *testing.T) {
	base := Facts{MachineNetworks: prefixes("10.196.0.0/16"), ExportSubnets: prefixes("10.0.0.0/24"), Sets: []Set{{Name: "worker-a", Attached: true}}}
	rolled := func(name, last string) Machine { return attachedMachine(name, "10.196.0."+last, "10.0.0."+last) }
	old := func(name, last string) Machine { return machine(name, "10.196.0."+last) }
	created := func(name string) Machine { return noNode(attachedMachine(name)) }
	provisioned := func(name, last string) Machine { return noNode(rolled(name, last)) }
	// joinedEarly: the Node joined before the provider reported the storage address.
	joinedEarly := func(name, last string) Machine { return attachedMachine(name, "10.196.0."+last) }
	values := func(steps [][]Machine) []string {
		var out []string
		for _, ms := range steps {
			f := base
			f.Machines = ms
			a, err := Decide(f)
			if err != nil {
				t.Fatal(err)
			}
			if v := a.Value(true); len(out) == 0 || out[len(out)-1] != v {
				out = append(out, v)
			}
		}
		return out
	}

	three := []Machine{rolled("w1", "11"), rolled("w2", "12"), rolled("w3", "13")}
	scaleUp := [][]Machine{
		three,
		append(slices.Clone(three), created("w4"), created("w5")),
		append(slices.Clone(three), provisioned("w4", "14"), created("w5")),
		append(slices.Clone(three), joinedEarly("w4", "14"), provisioned("w5", "15")),
		append(slices.Clone(three), rolled("w4", "14"), rolled("w5", "15")),
	}
	if got := values(scaleUp); !slices.Equal(got, []string{"10.0.0.0/24"}) {
		t.Errorf("scale-up 3 to 5 of an attached set: values %q, want one, 10.0.0.0/24", got)
	}
	// A machine health check replaces w2: the new machine never joins.
	replace := [][]Machine{
		three,
		{rolled("w1", "11"), rolled("w3", "13")},
		{rolled("w1", "11"), rolled("w3", "13"), created("w6")},
		{rolled("w1", "11"), rolled("w3", "13"), provisioned("w6", "16")},
	}
	if got := values(replace); !slices.Equal(got, []string{"10.0.0.0/24"}) {
		t.Errorf("machine replacement: values %q, want one, 10.0.0.0/24", got)
	}

	// The rollout half-way: w1 replaced, o2 and o3 of the old template still there.
	rollout := [][]Machine{
		{rolled("w1", "11"), old("o2", "12"), old("o3", "13")},
		{rolled("w1", "11"), old("o2", "12"), old("o3", "13"), created("w2")},
		{rolled("w1", "11"), old("o2", "12"), old("o3", "13"), provisioned("w2", "22")},
		{rolled("w1", "11"), old("o2", "12"), old("o3", "13"), rolled("w2", "22")},
		{rolled("w1", "11"), old("o3", "13"), rolled("w2", "22"), created("w3")},
		{rolled("w1", "11"), old("o3", "13"), rolled("w2", "22"), joinedEarly("w3", "23")},
		{rolled("w1", "11"), rolled("w2", "22"), rolled("w3", "23")},
	}
	if got := values(rollout); !slices.Equal(got, []string{"10.0.0.0/24,10.196.0.0/16", "10.0.0.0/24"}) {
		t.Errorf("rollout from half-way to done: values %q, want two: both networks, then the export subnet", got)
	}
}
