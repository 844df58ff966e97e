package shareclient

import (
	"net/netip"
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
			"10.0.0.0/24,10.196.0.0/16", "10.0.0.0/8", true, true, "two networks"},
		{"one set attached, one not",
			Facts{MachineNetworks: machineNet, ExportSubnets: storage, Sets: []Set{{Name: "a", Attached: true}, {Name: "b"}},
				Machines: []Machine{machine("a1", "10.196.0.11", "10.0.0.31"), machine("b1", "10.196.0.12")}},
			"10.0.0.0/24,10.196.0.0/16", "10.0.0.0/8", true, true, "through the machine network (routed): 1 machine and set b"},
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
			// Whatever the form, the value admits every network of the answer.
			for _, list := range []bool{true, false} {
				rules, err := ParseValue(a.Value(list))
				if err != nil {
					t.Fatal(err)
				}
				if m := Missing(rules, a.Clients); len(m) > 0 {
					t.Errorf("Value(%v) = %q leaves out %v", list, a.Value(list), m)
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
