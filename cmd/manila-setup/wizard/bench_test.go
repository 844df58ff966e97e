package wizard

import (
	"fmt"
	"net/netip"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// BenchmarkFirstFrame is what a user waits for before the wizard shows anything: New, Init (its
// commands, which read files and talk to the network, are not run: they are in flight) and the
// first View. Target: < 100 ms.
func BenchmarkFirstFrame(b *testing.B) {
	backend := newFakeBackend()
	for b.Loop() {
		m := New(Options{Backend: backend})
		next, _ := m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		_ = next.(Model).Init()
		_ = next.View()
	}
}

// BenchmarkStepChange is one move between screens (networks -> security groups and back) with
// the frame drawn after each.
func BenchmarkStepChange(b *testing.B) {
	d := toNetwork(b, newFakeBackend(), false, 120, 40)
	m := d.m
	for b.Loop() {
		next, _ := m.Update(navMsg(1))
		_ = next.View()
		back, _ := next.Update(navMsg(-1))
		_ = back.View()
		m = back.(Model)
	}
}

// manyNetworks is a cloud with n networks, one of them the storage network.
func manyNetworks(n int) *fakeBackend {
	f := newFakeBackend()
	nets := make([]openstack.Network, 0, n)
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
		nets = append(nets, openstack.Network{ID: id, Name: fmt.Sprintf("project-net-%04d", i),
			Subnets: []openstack.Subnet{{ID: id, Name: fmt.Sprintf("subnet-%04d", i), NetworkID: id,
				CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24), IPVersion: 4}}})
	}
	f.discovery.Networks = append(nets, f.discovery.Networks...)
	return f
}

// BenchmarkFilter2000Networks is one keystroke in the filter of a list of 2,000 networks: the
// list filtered again and the frame drawn. Target: < 16 ms (one frame at 60 Hz).
func BenchmarkFilter2000Networks(b *testing.B) {
	d := toNetwork(b, manyNetworks(2000), false, 120, 40)
	d.press("/")
	m := d.m
	keys := []tea.KeyMsg{keyMsg("1"), keyMsg("2"), keyMsg("backspace"), keyMsg("backspace")}
	i := 0
	for b.Loop() {
		next, _ := m.Update(keys[i%len(keys)])
		_ = next.View()
		m = next.(Model)
		i++
	}
}
