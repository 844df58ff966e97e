package wizard

import (
	"net/netip"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// TestNetworkScreenSaysWhatTheNetworkDoesToNodes: the details of a network whose subnet hands
// out a gateway and itself as DNS server say so, with the fixes (the findings the commands
// print); a network whose subnets give no address is questioned before it is taken, and the
// equivalent command then needs --force.
func TestNetworkScreenSaysWhatTheNetworkDoesToNodes(t *testing.T) {
	defaults := openstack.Subnet{ID: "sub-id", Name: "storage-subnet", CIDR: netip.MustParsePrefix("10.0.0.0/24"), IPVersion: 4, DHCP: true,
		Gateway: netip.MustParseAddr("10.0.0.1")}
	storage := openstack.Network{ID: fakeStorageNet, Name: "storage", Subnets: []openstack.Subnet{defaults}}
	cand := openstack.Candidate{Network: storage, Exports: []openstack.NetworkExport{{Address: netip.MustParseAddr("10.0.0.10")}}, Reasons: []string{"1 share is exported on it"}}
	d := &openstack.Discovery{Networks: []openstack.Network{storage}, Ranking: openstack.Ranking{Candidates: []openstack.Candidate{cand}}}
	n := networkModel{}.withDiscovery(d, "")
	details := strings.Join(strings.Fields(strings.Join(n.details(200), " ")), " ") // the pane wraps
	for _, want := range []string{"its gateway 10.0.0.1 is handed out by DHCP", "openstack subnet set --gateway none storage-subnet",
		"its DHCP server announces itself as a DNS server", "--dns-nameserver 0.0.0.0 storage-subnet"} {
		if !strings.Contains(details, want) {
			t.Errorf("details do not say %q:\n%s", want, details)
		}
	}
	if n.problem(storage) != "" || n.needsForce([]string{storage.ID}) {
		t.Errorf("warnings must not question the network: %q", n.problem(storage))
	}

	noDHCP := defaults
	noDHCP.DHCP = false
	storage.Subnets = []openstack.Subnet{noDHCP}
	cand.Network = storage
	d = &openstack.Discovery{Networks: []openstack.Network{storage}, Ranking: openstack.Ranking{Candidates: []openstack.Candidate{cand}}}
	n = networkModel{}.withDiscovery(d, "")
	n, _ = n.key(&session{}, tea.KeyMsg{Type: tea.KeyEnter})
	if !strings.Contains(n.confirming, "no subnet has DHCP enabled") || !n.needsForce([]string{storage.ID}) {
		t.Errorf("a network that gives no address: confirming %q, needs --force %v", n.confirming, n.needsForce([]string{storage.ID}))
	}
}
