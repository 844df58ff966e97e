package wizard

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// neutronDefaults makes the fake's storage subnet as Neutron makes a subnet by default: a
// gateway, and no dns_nameservers (its DHCP server announces itself).
func neutronDefaults(b *fakeBackend) *fakeBackend {
	for i := range b.nets {
		if b.nets[i].ID == fakeStorageNet {
			// The subnets are shared with the discovery and its candidate: all see the change.
			b.nets[i].Subnets[0].Gateway = netip.MustParseAddr("10.0.0.1")
			b.nets[i].Subnets[0].DNS = nil
		}
	}
	return b
}

// mustSay is mustContain on the words of the screen: lines wrap at any width.
func mustSay(t *testing.T, screen string, want ...string) {
	t.Helper()
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, w := range want {
		if !strings.Contains(flat(screen), flat(w)) {
			t.Errorf("screen does not say %q:\n%s", w, screen)
		}
	}
}

// TestReviewAppliesNothingBeforeTheWarningsAreAcknowledged: a storage subnet as Neutron makes it
// is attached only after the user acknowledged what it does to the nodes; enter alone says so
// and writes nothing; the acknowledgement is on the review and in the closing words.
func TestReviewAppliesNothingBeforeTheWarningsAreAcknowledged(t *testing.T) {
	b := neutronDefaults(newFakeBackend())
	d := toReview(t, b, false, 120, 40)
	screen := view(d)
	mustSay(t, screen, "What network storage ("+fakeStorageNet+") does to the nodes attached to it:",
		"! subnet storage-subnet (storage-subnet-id): its gateway 10.0.0.1 is handed out by DHCP: every machine gets a second default route",
		"fix: openstack subnet set --gateway none storage-subnet",
		"no dns_nameservers: its DHCP server announces itself as a DNS server",
		"fix: openstack subnet set --no-dns-nameservers --dns-nameserver 0.0.0.0 storage-subnet",
		"[ ] the 2 warnings above not acknowledged yet: a acknowledges, c changes the subnet from here",
		"! 2 warnings to acknowledge (a) before applying", "a acknowledge the warnings", "c change the subnet")

	d.press("enter")
	d.settle(200 * time.Millisecond)
	if d.m.step != stepReview || slices.ContainsFunc(b.patched, func(p string) bool { return !strings.HasPrefix(p, "dry:") }) {
		t.Fatalf("enter before the acknowledgement: step %d, patched %v", d.m.step, b.patched)
	}
	mustSay(t, view(d), "✗ nothing is applied before the warnings are acknowledged: press a")

	d.press("a", "a") // a takes the acknowledgement back
	if !d.m.screens.review.fit.blocks() {
		t.Fatal("a pressed twice still counts as acknowledged")
	}
	d.press("a")
	mustSay(t, view(d), "[x] acknowledged: the nodes are attached with the 2 warnings above", "✓ 2 warnings of the storage network acknowledged")
	if strings.Contains(view(d), "a acknowledge the warnings") {
		t.Error("the key line still asks for the acknowledgement")
	}
	d.press("enter")
	d.settle(time.Second)
	if d.m.step != stepApply || d.m.screens.apply.phase != applyDone {
		t.Fatalf("after the acknowledgement: step %d phase %s", d.m.step, d.m.screens.apply.phase)
	}
	if o := d.m.Outcome(); !strings.Contains(o.Summary, "The storage network's warnings (default-route, dns-announced) were acknowledged") {
		t.Errorf("closing words: %q", o.Summary)
	}
	if len(b.subnetUpdates) != 0 {
		t.Errorf("a subnet was changed without being asked: %+v", b.subnetUpdates)
	}
}

// TestReviewKeepsTheAcknowledgementOfTheSameWarnings: going back and coming again with the same
// network keeps it; a dry run asks for it too, and shows the change of the subnet without making
// it.
func TestReviewKeepsTheAcknowledgementOfTheSameWarnings(t *testing.T) {
	b := neutronDefaults(newFakeBackend())
	d := toReview(t, b, true, 80, 24)
	d.press("enter")
	if d.m.step != stepReview {
		t.Fatal("a dry run walked on without the acknowledgement")
	}
	d.press("c")
	mustSay(t, view(d), "Dry run: the change is shown, not made. Any key goes back.", "any key back")
	d.press("y")
	d.settle(100 * time.Millisecond)
	if len(b.subnetUpdates) != 0 || b.networkReads != 0 || d.m.screens.review.fit.asking {
		t.Fatalf("a dry run changed the subnet: %+v", b.subnetUpdates)
	}
	d.press("a", "esc", "enter")
	d.settle(200 * time.Millisecond)
	if d.m.step != stepReview || d.m.screens.review.fit.blocks() {
		t.Fatalf("back and again: step %d, still to acknowledge %v", d.m.step, d.m.screens.review.fit.blocks())
	}
}

// TestReviewChangesTheSubnetOnlyOnYes: c shows exactly which change on which subnet (the
// findings' own commands); anything but y changes nothing; y changes the subnet, the network is
// read again and judged anew: the warnings are gone, on the review and on the network screen.
func TestReviewChangesTheSubnetOnlyOnYes(t *testing.T) {
	b := neutronDefaults(newFakeBackend())
	d := toReview(t, b, false, 120, 40)
	for _, no := range []string{"n", "enter", "esc", "x"} {
		d.press("c")
		mustSay(t, view(d), "Change the subnets of network storage ("+fakeStorageNet+") in Neutron:", "subnet storage-subnet (storage-subnet-id):",
			"  openstack subnet set --gateway none storage-subnet", "  openstack subnet set --no-dns-nameservers --dns-nameserver 0.0.0.0 storage-subnet",
			`(sets gateway_ip null, dns_nameservers ["0.0.0.0"])`, "Every port on these subnets gets the change at its next DHCP renewal",
			"Change the subnets now? y changes them, n (the default) goes back.", "y change the subnets")
		d.press(no)
		d.settle(100 * time.Millisecond)
		if len(b.subnetUpdates) != 0 || d.m.screens.review.fit.asking || d.m.step != stepReview {
			t.Fatalf("%q at the question: updates %+v, asking %v, step %d", no, b.subnetUpdates, d.m.screens.review.fit.asking, d.m.step)
		}
	}
	d.press("c", "y")
	d.settle(time.Second)
	want := []openstack.SubnetUpdate{{SubnetID: "storage-subnet-id", NoGateway: true, NoDNS: true}}
	if !slices.Equal(b.subnetUpdates, want) || b.networkReads != 1 {
		t.Fatalf("updates %+v, network reads %d", b.subnetUpdates, b.networkReads)
	}
	screen := view(d)
	mustSay(t, screen, `✓ subnet storage-subnet (storage-subnet-id) changed: gateway_ip null, dns_nameservers ["0.0.0.0"]`,
		"read again from Neutron, hands the nodes no default route and no DNS server: nothing left to acknowledge")
	if strings.Contains(screen, "its gateway 10.0.0.1") || strings.Contains(screen, "acknowledge the warnings") || d.m.screens.review.fit.blocks() {
		t.Errorf("the warnings stayed after the change:\n%s", screen)
	}
	if s := d.m.screens.network.chosen().Subnets[0]; s.Gateway.IsValid() || !slices.Equal(s.DNS, []string{"0.0.0.0"}) {
		t.Errorf("the network screen still has the old subnet: %+v", s)
	}
	d.press("enter")
	d.settle(time.Second)
	if d.m.step != stepApply || d.m.screens.apply.phase != applyDone {
		t.Fatalf("after the change: step %d phase %s", d.m.step, d.m.screens.apply.phase)
	}
	if o := d.m.Outcome(); !strings.Contains(o.Summary, `Changed in Neutron: subnet storage-subnet (storage-subnet-id) (gateway_ip null, dns_nameservers ["0.0.0.0"]).`) ||
		strings.Contains(o.Summary, "acknowledged") {
		t.Errorf("closing words: %q", o.Summary)
	}
}

// TestReviewSaysWhenTheRoleDoesNotAllowTheChange: a subnet of another project is refused; the
// review says so plainly with the administrator's commands, the warnings stay, and the user can
// still acknowledge them and go on. Quitting then says what was not changed.
func TestReviewSaysWhenTheRoleDoesNotAllowTheChange(t *testing.T) {
	b := neutronDefaults(newFakeBackend())
	b.subnetDenied = map[string]bool{"storage-subnet-id": true}
	d := toReview(t, b, false, 120, 40)
	d.press("c", "y")
	d.settle(time.Second)
	mustSay(t, view(d), "✗ Your role does not allow this change: updating subnet storage-subnet-id: project \"demo\" can see the subnet but may not change it",
		"The cloud's administrator can make the change:", "  openstack subnet set --gateway none storage-subnet-id",
		"  openstack subnet set --no-dns-nameservers --dns-nameserver 0.0.0.0 storage-subnet-id",
		"You can still acknowledge the warnings (a) and go on", "its gateway 10.0.0.1 is handed out by DHCP")
	if len(b.subnetUpdates) != 0 || !d.m.screens.review.fit.blocks() {
		t.Fatalf("after the refusal: updates %+v, still to acknowledge %v", b.subnetUpdates, d.m.screens.review.fit.blocks())
	}
	d.press("a", "enter")
	d.settle(time.Second)
	if d.m.step != stepApply {
		t.Fatalf("acknowledged after the refusal: step %d", d.m.step)
	}
	if o := d.m.Outcome(); strings.Contains(o.Summary, "Changed in Neutron") {
		t.Errorf("closing words claim a change: %q", o.Summary)
	}
}

// TestQuitAfterChangingTheSubnetSaysSo: the subnet changed even if nothing else is.
func TestQuitAfterChangingTheSubnetSaysSo(t *testing.T) {
	d := toReview(t, neutronDefaults(newFakeBackend()), false, 80, 24)
	d.press("c", "y")
	d.settle(time.Second)
	d.press("q")
	if o := d.m.Outcome(); !strings.HasPrefix(o.Summary, "The cluster was not changed. Changed in Neutron: subnet storage-subnet (storage-subnet-id)") {
		t.Errorf("closing words: %q", o.Summary)
	}
}

// TestSubnetFixesFollowTheFindings: a default host route is removed and the other routes kept;
// an IPv6 subnet without router advertisements cannot be changed here (no c), only
// acknowledged.
func TestSubnetFixesFollowTheFindings(t *testing.T) {
	routed := openstack.Subnet{ID: "r-id", Name: "routed", CIDR: netip.MustParsePrefix("10.9.0.0/24"), IPVersion: 4, DHCP: true, DNS: []string{"0.0.0.0"},
		HostRoutes: []openstack.Route{{Destination: netip.MustParsePrefix("0.0.0.0/0"), NextHop: netip.MustParseAddr("10.9.0.254")},
			{Destination: netip.MustParsePrefix("192.168.7.0/24"), NextHop: netip.MustParseAddr("10.9.0.253")}}}
	v6 := openstack.Subnet{ID: "v6-id", Name: "v6", CIDR: netip.MustParsePrefix("fd00:9::/64"), IPVersion: 6, DHCP: true, DNS: []string{"0.0.0.0"}}
	nw := openstack.Network{ID: "net-id", Name: "store", Subnets: []openstack.Subnet{routed, v6}}
	f := newFitnessModel(&nw, fitnessModel{})
	fixes, rest := f.fixes()
	if len(fixes) != 1 || fixes[0].update != (openstack.SubnetUpdate{SubnetID: "r-id", DropDefaultRoutes: true}) ||
		len(fixes[0].findings) != 1 || fixes[0].findings[0].Fix != "openstack subnet unset --host-route destination=0.0.0.0/0,gateway=10.9.0.254 routed" {
		t.Errorf("fixes %+v", fixes)
	}
	if len(rest) != 1 || rest[0].ID != attach.FindingIPv6NoRA {
		t.Errorf("not fixable here: %+v", rest)
	}
	q := strings.Join(f.question(200, 40, false), "\n")
	mustSay(t, q, "(sets host_routes without the default ones)", "! not changed here: subnet v6 (v6-id): recreate the subnet with --ipv6-ra-mode slaac")

	nw.Subnets = []openstack.Subnet{v6}
	f = newFitnessModel(&nw, fitnessModel{})
	if f.fixable() || !f.blocks() {
		t.Errorf("only IPv6 without RA: fixable %v, blocks %v", f.fixable(), f.blocks())
	}
	if f, _, handled := f.key(keyMsg("c"), nil, nil, false); handled || f.asking {
		t.Error("c offered a change that cannot be made here")
	}
}
