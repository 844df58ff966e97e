package wizard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/workers"
)

func view(d *driver) string { return ansi.Strip(d.m.View()) }

func mustContain(t *testing.T, screen string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(screen, w) {
			t.Errorf("screen lacks %q:\n%s", w, screen)
		}
	}
}

func TestConnectChecksThePreselectionInTheBackground(t *testing.T) {
	b := newFakeBackend()
	d := start(t, b, false, 80, 24)
	if d.m.step != stepConnect || !d.m.screens.connect.ready() || b.connects != 1 {
		t.Fatalf("after Init: step %d ready %v connects %d", d.m.step, d.m.screens.connect.ready(), b.connects)
	}
	mustContain(t, view(d), "› mycloud", "• admin", `✓ cloud mycloud (region RegionOne) as user "demo", project "demo"`,
		"cluster https://api.ostest.example.com:6443 (context admin): 4 MachineSets", "enter next")

	// Another cloud: the old check no longer counts, enter checks the new choice.
	d.press("down")
	if d.m.screens.connect.ready() {
		t.Fatal("a changed choice still counts as checked")
	}
	mustContain(t, view(d), "The choice changed: press enter to check it.")
	d.press("tab", "down", "enter")
	if !d.m.screens.connect.ready() || d.m.conn.Cloud != "other" || d.m.conn.Context != "dev" || b.connects != 2 {
		t.Fatalf("after re-check: %+v connects %d", d.m.conn, b.connects)
	}
	d.press("enter")
	if d.m.step != stepNetwork {
		t.Fatalf("enter on a checked choice: step %d", d.m.step)
	}
}

func TestConnectFailureExplainsAndRetries(t *testing.T) {
	b := newFakeBackend()
	b.connectErr = errFake
	d := start(t, b, false, 80, 24)
	mustContain(t, view(d), "✗ fake failure", "press r to check again", "r retry")
	d.press("enter") // enter does not leave a failed screen: it checks again
	if d.m.step != stepConnect || b.connects != 2 {
		t.Fatalf("enter after a failure: step %d, connects %d", d.m.step, b.connects)
	}
	b.connectErr = nil
	d.press("r")
	if !d.m.screens.connect.ready() || b.connects != 3 {
		t.Fatalf("retry: ready %v connects %d", d.m.screens.connect.ready(), b.connects)
	}
}

func TestConnectIgnoresALateAnswer(t *testing.T) {
	m := New(Options{Backend: newFakeBackend()})
	next, _ := m.Update(targetsMsg{newFakeBackend().Targets()})
	m = next.(Model)
	next, _ = m.Update(connectedMsg{seq: m.screens.connect.seq + 5, conn: Connection{Cloud: "stale"}})
	if next.(Model).conn != nil {
		t.Fatal("an answer to an older check was taken")
	}
}

func toNetwork(t testing.TB, b *fakeBackend, dry bool, w, h int) *driver {
	t.Helper()
	d := start(t, b, dry, w, h)
	d.press("enter")
	if d.m.step != stepNetwork {
		t.Fatalf("not on the network screen: %d", d.m.step)
	}
	return d
}

func TestNetworkPreselectsTheDiscoveredOneWithTheReason(t *testing.T) {
	d := toNetwork(t, newFakeBackend(), false, 80, 24)
	if n := d.m.screens.network.chosen(); n == nil || n.ID != fakeStorageNet {
		t.Fatalf("preselected %+v", n)
	}
	mustContain(t, view(d), "3 of 3 networks", "› * storage", "subnets: storage-subnet 10.0.0.0/24, shared",
		"✓ export addresses 10.0.0.10 (preferred), 10.0.0.20 in subnet")

	d.press("/", "d", "e", "c")
	if len(d.m.screens.network.shown) != 1 || d.m.screens.network.chosen().Name != "decoy" {
		t.Fatalf("filter dec: %v", d.m.screens.network.shown)
	}
	mustContain(t, view(d), "1 of 3 networks", "filter: dec", "! no Manila export location lies in this network's subnets")
	d.press("q") // typed into the filter, not quitting
	if d.m.quit || d.m.screens.network.filter != "decq" {
		t.Fatalf("q while filtering: quit %v filter %q", d.m.quit, d.m.screens.network.filter)
	}
	mustContain(t, view(d), "no network matches the filter")
	d.press("backspace", "enter") // leave the filter, keep it
	if d.m.screens.network.filtering || d.m.screens.network.filter != "dec" {
		t.Fatalf("after enter: filtering %v filter %q", d.m.screens.network.filtering, d.m.screens.network.filter)
	}
	d.press("esc") // clears the filter first
	if d.m.step != stepNetwork || d.m.screens.network.filter != "" || len(d.m.screens.network.shown) != 3 {
		t.Fatalf("esc with a filter: step %d filter %q", d.m.step, d.m.screens.network.filter)
	}
	d.press("/10.196", "enter") // typed fast: one read
	if d.m.screens.network.chosen().Name != "tenant" {
		t.Fatalf("filter by CIDR chose %s", d.m.screens.network.chosen().Name)
	}
	d.press("esc", "s", "t", "o") // typing without "/" filters too
	if !d.m.screens.network.filtering || d.m.screens.network.filter != "sto" || d.m.screens.network.chosen().Name != "storage" {
		t.Fatalf("type to filter: filtering %v filter %q", d.m.screens.network.filtering, d.m.screens.network.filter)
	}
	d.press("esc") // leaves and clears the filter
	if d.m.screens.network.filtering || d.m.screens.network.filter != "" || d.m.step != stepNetwork {
		t.Fatalf("esc while filtering: filtering %v filter %q step %d", d.m.screens.network.filtering, d.m.screens.network.filter, d.m.step)
	}
	d.press("esc")
	if d.m.step != stepConnect {
		t.Fatalf("esc without a filter: step %d", d.m.step)
	}
}

func toGroups(t testing.TB, b *fakeBackend, dry bool, w, h int) *driver {
	t.Helper()
	d := toNetwork(t, b, dry, w, h)
	d.press("enter")
	if d.m.step != stepGroups {
		t.Fatalf("not on the groups screen: %d", d.m.step)
	}
	return d
}

func TestGroupsSuggestThoseThatLetNFSOut(t *testing.T) {
	d := toGroups(t, newFakeBackend(), false, 80, 24)
	var order []string
	for _, r := range d.m.screens.sgs.rows {
		order = append(order, r.g.Name)
	}
	if !slices.Equal(order, []string{"nfs", "default", "block-egress"}) {
		t.Fatalf("order %v", order)
	}
	mustContain(t, view(d), "0 selected of 3", "suggested: allows NFS egress to 10.0.0.10", "no egress rule for NFS to 10.0.0.10")
	d.press("space")
	if got := d.m.screens.sgs.chosen(); !slices.Equal(got, []string{fakeNFSGroup}) {
		t.Fatalf("chosen %v", got)
	}
	mustContain(t, view(d), "[x] nfs", "together: NFS over NFSv4 is allowed by security groups nfs")
	d.press("r")
	mustContain(t, view(d), "Rules of nfs", "egress  tcp port 2049 to 10.0.0.0/24 (IPv4)")
	d.press("down", "down", "space", "space", "esc")
	if d.m.step != stepNetwork {
		t.Fatal("esc did not go back")
	}
	d.press("enter") // the same network: the selection is kept
	if got := d.m.screens.sgs.chosen(); !slices.Equal(got, []string{fakeNFSGroup}) {
		t.Fatalf("selection after going back and forth: %v", got)
	}
}

func toSets(t testing.TB, b *fakeBackend, dry bool, w, h int) *driver {
	t.Helper()
	d := toGroups(t, b, dry, w, h)
	d.press("space", "enter")
	if d.m.step != stepSets {
		t.Fatalf("not on the MachineSets screen: %d", d.m.step)
	}
	return d
}

func TestSetsPreselectWorkersAndNeverTheControlPlane(t *testing.T) {
	d := toSets(t, newFakeBackend(), false, 80, 24)
	if got := chosenKeys(d.m.screens.sets, workers.SectionMachineSets); !slices.Equal(got, []string{"ostest-x7k2p-worker-0", "ostest-x7k2p-worker-1"}) {
		t.Fatalf("preselected %v", got)
	}
	mustContain(t, view(d), "2 of 4 MachineSets selected", "[ ] ostest-x7k2p-infra-0", "control plane: never touched", "has it")
	d.press("down", "space")
	if slices.Contains(chosenKeys(d.m.screens.sets, workers.SectionMachineSets), "ostest-x7k2p-master") {
		t.Fatal("the control plane could be chosen")
	}
	mustContain(t, view(d), "MachineSet ostest-x7k2p-master cannot be chosen")
	d.press("down", "space", "down", "space")
	if len(chosenKeys(d.m.screens.sets, workers.SectionMachineSets)) != 0 {
		t.Fatalf("deselected all, still %v", chosenKeys(d.m.screens.sets, workers.SectionMachineSets))
	}
	d.press("enter")
	if d.m.step != stepSets {
		t.Fatal("went on with nothing chosen")
	}
	mustContain(t, view(d), "choose at least one MachineSet")
	d.press("space", "up", "space")
}

func toReview(t testing.TB, b *fakeBackend, dry bool, w, h int) *driver {
	t.Helper()
	d := toSets(t, b, dry, w, h)
	d.press("enter")
	if d.m.step != stepReview {
		t.Fatalf("not on the review screen: %d", d.m.step)
	}
	return d
}

func TestReviewShowsTheDiffAndTheCommands(t *testing.T) {
	b := newFakeBackend()
	d := toReview(t, b, false, 80, 24)
	if !slices.Equal(b.patched, []string{"dry:ostest-x7k2p-worker-0", "dry:ostest-x7k2p-worker-1"}) {
		t.Fatalf("review wrote something: %v", b.patched)
	}
	all := ansi.Strip(strings.Join(d.m.screens.review.content(120, false), "\n"))
	mustContain(t, all, "MachineSet ostest-x7k2p-worker-0: adds network "+fakeStorageNet+", security group",
		"MachineSet ostest-x7k2p-worker-1: unchanged, already attached",
		"+- noAllowedAddressPairs: true", "+  uuid: "+fakeStorageNet,
		"manila-setup --os-cloud mycloud machinesets patch --network "+fakeStorageNet+" \\\n      --security-group "+fakeNFSGroup+" --name ostest-x7k2p-worker-0 --name ostest-x7k2p-worker-1",
		"manila-setup machinesets rollout --name ostest-x7k2p-worker-0 --name ostest-x7k2p-worker-1")
	d.press("down", "down")
	if d.m.screens.review.scroll != 2 {
		t.Fatalf("scroll %d", d.m.screens.review.scroll)
	}
	d.press("G")
	mustContain(t, view(d), "manila-setup machinesets rollout --name ostest-x7k2p-worker-0")
	d.press("down", "g")
	if d.m.screens.review.scroll != 0 {
		t.Fatalf("scroll after g: %d", d.m.screens.review.scroll)
	}
	d.press("esc")
	if d.m.step != stepSets {
		t.Fatal("esc did not go back")
	}
}

func TestApplyPatchesRollsAndVerifies(t *testing.T) {
	b := newFakeBackend()
	d := toReview(t, b, false, 80, 24)
	d.press("enter")
	d.settle(time.Second)
	if d.m.step != stepApply || d.m.screens.apply.phase != applyDone {
		t.Fatalf("apply: step %d phase %s err %s", d.m.step, d.m.screens.apply.phase, d.m.screens.apply.err)
	}
	if !slices.Contains(b.patched, "ostest-x7k2p-worker-0") || !slices.Equal(b.rolled, []string{"ostest-x7k2p-worker-0", "ostest-x7k2p-worker-1"}) {
		t.Fatalf("patched %v rolled %v", b.patched, b.rolled)
	}
	mustContain(t, view(d), "✓ every chosen MachineSet was patched", "2/2", "done", "enter verify")
	if o := d.m.Outcome(); !o.Applied || o.Err != nil || !strings.Contains(o.Summary, "Attached network "+fakeStorageNet) {
		t.Fatalf("outcome %+v", o)
	}
	d.press("esc")
	if d.m.step != stepApply {
		t.Fatal("went back after applying")
	}
	d.press("enter")
	if d.m.step != stepVerify {
		t.Fatalf("step %d", d.m.step)
	}
	mustContain(t, view(d), "✓ 2 conditions as expected: every controller Available, none Degraded", "csi-manila-default", "Press t for the multi-writer check")
	d.press("t")
	d.settle(time.Second)
	mustContain(t, view(d), "✓ both writers (nodes worker-a and worker-b)", "writer 1 on worker-a:", "writer-2 on worker-b line 1",
		"cleaned up: namespace manila-setup-rwx-check-abcde deleted")
}

func TestApplyStopsOnlyWhenConfirmed(t *testing.T) {
	b := newFakeBackend()
	b.rolloutGate = make(chan struct{})
	d := toReview(t, b, false, 80, 24)
	d.press("enter")
	d.settle(200 * time.Millisecond)
	if d.m.screens.apply.phase != applyRolling {
		t.Fatalf("phase %s", d.m.screens.apply.phase)
	}
	mustContain(t, view(d), "replacing machines", "waiting for new Machine ostest-x7k2p-worker-0-abcde")
	d.press("ctrl+c")
	if d.m.quit || !d.m.screens.apply.confirmStop {
		t.Fatal("ctrl+c during the rollout did not ask")
	}
	mustContain(t, view(d), "Stop the rollout?", "Running the wizard")
	d.press("n")
	if d.m.screens.apply.confirmStop || d.m.screens.apply.stopping {
		t.Fatal("n did not keep going")
	}
	d.press("q", "y")
	d.settle(time.Second)
	if d.m.screens.apply.phase != applyStopped {
		t.Fatalf("after y: phase %s", d.m.screens.apply.phase)
	}
	if o := d.m.Outcome(); !o.Interrupted || !strings.Contains(o.Summary, "0 of 4 machines replaced") ||
		!strings.Contains(o.Summary, "Run `manila-setup machinesets rollout --name ostest-x7k2p-worker-0 --name ostest-x7k2p-worker-1` (or the wizard) to resume") {
		t.Fatalf("outcome %+v", o)
	}
	// The screen says where it stopped, no longer what it was waiting for.
	screen := view(d)
	mustContain(t, screen, "Stopped: 0 of 4 machines replaced", "stopped after 0 of")
	if strings.Contains(screen, "waiting for new Machine") {
		t.Errorf("the stopped screen still says it is waiting:\n%s", screen)
	}
	if len(b.rolled) != 0 {
		t.Fatalf("rolled %v after stopping", b.rolled)
	}
	next, cmd := d.m.Update(keyMsg("q"))
	if _, ok := quickMsg(cmd).(tea.QuitMsg); !ok || !next.(Model).quit {
		t.Fatal("q after stopping did not quit")
	}
}

func quickMsg(c tea.Cmd) tea.Msg {
	if c == nil {
		return nil
	}
	return c()
}

func TestApplyReportsAPatchFailure(t *testing.T) {
	b := newFakeBackend()
	d := toReview(t, b, false, 80, 24)
	b.patchErr = errFake
	d.press("enter")
	if d.m.screens.apply.phase != applyFailed || len(b.rolled) != 0 {
		t.Fatalf("phase %s rolled %v", d.m.screens.apply.phase, b.rolled)
	}
	mustContain(t, view(d), "✗ fake failure")
	if o := d.m.Outcome(); o.Err == nil {
		t.Fatalf("outcome %+v", o)
	}
}

func TestDryRunWalksEverythingAndWritesNothing(t *testing.T) {
	b := newFakeBackend()
	d := toReview(t, b, true, 80, 24)
	mustContain(t, view(d), "dry run", "enter continue (dry run)")
	d.press("enter")
	mustContain(t, view(d), "Dry run: nothing was patched and no machine was replaced.")
	d.press("enter")
	if d.m.step != stepVerify {
		t.Fatalf("step %d", d.m.step)
	}
	d.press("t")
	mustContain(t, view(d), "Dry run: the multi-writer check creates a volume and pods, so it is not offered.")
	for _, p := range b.patched {
		if !strings.HasPrefix(p, "dry:") {
			t.Errorf("dry run patched %s", p)
		}
	}
	if len(b.rolled) != 0 || d.m.screens.verify.result != nil {
		t.Fatalf("dry run rolled %v / checked %+v", b.rolled, d.m.screens.verify.result)
	}
}

func TestHelpQuitAndResize(t *testing.T) {
	b := newFakeBackend()
	d := toGroups(t, b, false, 80, 24)
	d.press("?")
	mustContain(t, view(d), "Help: Security groups", "space", "Any key closes this help.")
	d.press("x") // closes the help, selects nothing
	if d.m.help || len(d.m.screens.sgs.chosen()) != 0 {
		t.Fatal("the key that closed the help did something")
	}
	for _, size := range [][2]int{{80, 24}, {120, 40}, {100, 30}, {60, 15}} {
		next, _ := d.m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		d.m = next.(Model)
		lines := strings.Split(d.m.View(), "\n")
		if len(lines) != size[1] {
			t.Errorf("%dx%d: %d lines", size[0], size[1], len(lines))
		}
		for _, l := range lines {
			if ansi.StringWidth(l) > size[0] {
				t.Errorf("%dx%d: line wider than the screen: %q", size[0], size[1], l)
			}
		}
	}
	next, cmd := d.m.Update(keyMsg("q"))
	if _, ok := quickMsg(cmd).(tea.QuitMsg); !ok || next.(Model).Outcome().Summary != "Nothing was changed." {
		t.Fatalf("q: %+v", next.(Model).Outcome())
	}
}

func TestQuitDuringTheCheckCleansUpFirst(t *testing.T) {
	b := newFakeBackend()
	b.rwxGate = make(chan struct{})
	d := toReview(t, b, false, 80, 24)
	d.press("enter")
	d.settle(time.Second)
	d.press("enter", "t")
	d.settle(100 * time.Millisecond)
	if !d.m.screens.verify.running {
		t.Fatal("the check is not running")
	}
	mustContain(t, view(d), "q stop the check (it cleans up), then quit")
	next, cmd := d.m.Update(keyMsg("q"))
	d.m = next.(Model)
	if d.m.quit || !d.m.screens.verify.quitting {
		t.Fatal("q quit at once, before the check cleaned up")
	}
	d.run(cmd)
	d.settle(time.Second)
	if d.m.screens.verify.running || d.m.screens.verify.result == nil || !d.m.screens.verify.result.CleanedUp {
		t.Fatalf("after q: running %v result %+v", d.m.screens.verify.running, d.m.screens.verify.result)
	}
}

func TestNetworkWithoutACandidateSaysSo(t *testing.T) {
	b := newFakeBackend()
	b.discovery.Candidates = nil
	b.discovery.Notes = []string{"Manila (sharev2) is not in the catalog of region RegionOne"}
	d := toNetwork(t, b, false, 120, 40)
	mustContain(t, view(d), "! Discovery found no network Manila exports on: Manila (sharev2) is not in the catalog", "storage network yourself, or ask")
	if n := d.m.screens.network.chosen(); n == nil || n.Name != "decoy" {
		t.Fatalf("cursor on %+v", n)
	}
}

// TestVerifyShowsWhatNeedsAttention: healthy conditions fold into one line; a Degraded or
// Progressing controller and the informative conditions are listed with their messages.
func TestVerifyShowsWhatNeedsAttention(t *testing.T) {
	v := verifyModel{loaded: true, status: StorageStatus{Driver: true, Conditions: []Condition{
		{Type: "DriverSecretAvailable", Status: "True", Reason: "AsExpected"},
		{Type: "DriverSecretDegraded", Status: "False", Reason: "AsExpected"},
		{Type: "ManilaControllerDisabled", Status: "False", Reason: "ManilaAvailable", Message: "Manila is in the Keystone catalog with 2 share types"},
		{Type: "ManilaDriverNodeServiceDegraded", Status: "True", Reason: "SyncFailed", Message: "DaemonSet manila-csi-driver-node: 1 of 3 pods available"},
		{Type: "ManilaDriverNodeServiceProgressing", Status: "True", Reason: "Rolling"},
		{Type: "ManilaDriverNodeServiceAvailable", Status: "False", Reason: "Deploying"},
		{Type: "StorageNetworkReachable", Status: "False", Reason: "NotAttached", Message: "run manila-setup networks attach"},
	}}}
	got := ansi.Strip(strings.Join(v.conditionLines(80, "*"), "\n"))
	want := `  ✓ 2 other conditions as expected
  • ManilaControllerDisabled=False (ManilaAvailable)
      Manila is in the Keystone catalog with 2 share types
  ✗ ManilaDriverNodeServiceDegraded=True (SyncFailed)
      DaemonSet manila-csi-driver-node: 1 of 3 pods available
  * ManilaDriverNodeServiceProgressing=True (Rolling)
  ✗ ManilaDriverNodeServiceAvailable=False (Deploying)
  ✗ StorageNetworkReachable=False (NotAttached)
      run manila-setup networks attach`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestApplyFitsManyMachineSets: with more MachineSets than lines, the set being rolled keeps its
// phase, the others are counted, and the stop question stays on screen.
func TestApplyFitsManyMachineSets(t *testing.T) {
	now := time.Now()
	a := applyModel{phase: applyRolling, started: now, now: now, confirmStop: true, sets: map[string]rollout.SetProgress{}}
	for i := 0; i < 14; i++ {
		n := fmt.Sprintf("ostest-x7k2p-worker-%d", i)
		p := rollout.SetProgress{Name: n, Total: 3, State: rollout.Pending, Phase: "waiting"}
		switch {
		case i < 5:
			p.State, p.Replaced, p.Phase = rollout.Done, 3, "done: 3 of 3 replaced"
		case i == 5:
			p.State, p.Replaced, p.Phase = rollout.Running, 1, "waiting for new Machine ostest-x7k2p-worker-5-abcde to become a Ready Node"
		}
		a.order = append(a.order, n)
		a.sets[n] = p
		a.results = append(a.results, attach.Result{Kind: "MachineSet", Namespace: machinesets.Namespace, Name: n, Action: attach.ActionPatched, AddedNetworks: []string{fakeStorageNet}})
	}
	got := ansi.Strip(strings.Join(a.view(&session{width: 80, height: 20, spin: "*"}), "\n"))
	if n := len(a.view(&session{width: 80, height: 20, spin: "*"})); n > 20 {
		t.Errorf("%d lines for a height of 20:\n%s", n, got)
	}
	mustContain(t, got, "ostest-x7k2p-worker-5", "waiting for new Machine ostest-x7k2p-worker-5-abcde", "… and 13 more MachineSets: 5 finished, 8 waiting", "Stop the rollout?", "y: stop, n: keep going")

	// Enough room: every set with its phase, and one line for the identical patches.
	a.confirmStop = false
	got = ansi.Strip(strings.Join(a.view(&session{width: 120, height: 60, spin: "*"}), "\n"))
	mustContain(t, got, "ostest-x7k2p-worker-13", "done: 3 of 3 replaced", "patched 14 MachineSets (")
}

// TestCommandsCarryTheWizardsFlags: the equivalent commands act on the cluster and clouds.yaml
// the wizard was started with, quoted so that they run as copied.
func TestCommandsCarryTheWizardsFlags(t *testing.T) {
	conn := &Connection{Cloud: "my cloud", Flags: []string{"--kubeconfig", "/tmp/a b/kubeconfig", "--os-client-config-file", "/etc/openstack/clouds.yaml"}}
	lines := commandLines(conn, attach.Attachment{Networks: []string{fakeStorageNet}}, workers.Selection{MachineSets: &machinesets.Selection{Names: []string{"w-0"}}}, false)
	want := []string{
		"  manila-setup --kubeconfig '/tmp/a b/kubeconfig' --os-client-config-file /etc/openstack/clouds.yaml --os-cloud 'my cloud' machinesets patch --network " + fakeStorageNet + " --name w-0",
		"  manila-setup --kubeconfig '/tmp/a b/kubeconfig' --os-client-config-file /etc/openstack/clouds.yaml machinesets rollout --name w-0",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote: %s", got)
	}
}

// TestNetworkGuardAsksBeforeAWrongNetwork: a network without a Manila export location, or the
// machines' own, is taken only after an explicit yes; the default is no.
func TestNetworkGuardAsksBeforeAWrongNetwork(t *testing.T) {
	d := toNetwork(t, newFakeBackend(), false, 80, 24)
	d.press("/", "d", "e", "c", "enter", "enter")
	if d.m.step != stepNetwork || d.m.screens.network.confirming == "" {
		t.Fatalf("enter on decoy went on without asking (step %d)", d.m.step)
	}
	mustContain(t, view(d), "✗ No Manila export location lies in the subnets of network", "Attach the workers to it anyway?")
	mustContain(t, d.m.screens.network.confirming, `network "decoy"`, `Manila exports on network "storage"`)
	d.press("enter") // the default: no
	if d.m.step != stepNetwork || d.m.screens.network.confirming != "" {
		t.Fatalf("enter at the question went on (step %d)", d.m.step)
	}
	d.press("enter", "y")
	if d.m.step != stepGroups || d.m.screens.network.chosen().Name != "decoy" {
		t.Fatalf("y did not go on with decoy (step %d)", d.m.step)
	}
	if !d.m.screens.network.needsForce([]string{fakeDecoyNet}) || d.m.screens.network.needsForce([]string{fakeStorageNet}) {
		t.Error("needsForce: the equivalent command of a questioned network must carry --force, and only then")
	}
	d.press("esc")
	d.press("esc", "/", "t", "e", "n", "enter", "enter")
	mustContain(t, d.m.screens.network.confirming, `network "tenant"`, "is the machines' own network", "holds the node address 10.196.0.11")
	d.press("n")
	if d.m.step != stepNetwork {
		t.Fatalf("n went on (step %d)", d.m.step)
	}
	d.press("esc", "/", "s", "t", "o", "enter", "enter")
	if d.m.step != stepGroups || d.m.screens.network.chosen().ID != fakeStorageNet {
		t.Fatalf("the storage network asked or did not go on (step %d, confirming %q)", d.m.step, d.m.screens.network.confirming)
	}
}
