package wizard

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

// updateFlag is -update: rewrite the golden View() snapshots under testdata/. teatest's golden
// package, linked into the integration build, defines the same flag; then that one is used.
var updateFlag = func() flag.Value {
	if f := flag.Lookup("update"); f != nil {
		return f.Value
	}
	flag.Bool("update", false, "rewrite the golden View() snapshots under testdata/")
	return flag.Lookup("update").Value
}()

func update() bool { return updateFlag.String() == "true" }

// TestMain fixes the color profile: snapshots and assertions do not depend on the terminal the
// tests run in.
func TestMain(m *testing.M) {
	lipgloss.SetColorProfile(termenv.Ascii)
	os.Exit(m.Run())
}

// goldenScreens reach each screen (and some states of it) from a fresh wizard on the fake backend.
var goldenScreens = []struct {
	name string
	get  func(t *testing.T, w, h int) *driver
}{
	{"1-connect", func(t *testing.T, w, h int) *driver { return start(t, newFakeBackend(), false, w, h) }},
	{"1-connect-error", func(t *testing.T, w, h int) *driver {
		b := newFakeBackend()
		b.connectErr = fmt.Errorf(`cloud "mycloud": authenticating to cloud "mycloud" at http://keystone.example.com:5000/v3 failed: the credentials were rejected (401): check username and password in clouds.yaml`)
		return start(t, b, false, w, h)
	}},
	{"2-network", func(t *testing.T, w, h int) *driver { return toNetwork(t, newFakeBackend(), false, w, h) }},
	{"2-network-filter", func(t *testing.T, w, h int) *driver {
		d := toNetwork(t, newFakeBackend(), false, w, h)
		d.press("/", "d", "e", "c")
		return d
	}},
	{"2-network-guard", func(t *testing.T, w, h int) *driver {
		d := toNetwork(t, newFakeBackend(), false, w, h)
		d.press("/", "d", "e", "c", "enter", "enter")
		return d
	}},
	{"3-groups-rules", func(t *testing.T, w, h int) *driver {
		d := toGroups(t, newFakeBackend(), false, w, h)
		d.press("space", "r")
		return d
	}},
	{"4-machinesets", func(t *testing.T, w, h int) *driver { return toSets(t, newFakeBackend(), false, w, h) }},
	{"5-review", func(t *testing.T, w, h int) *driver { return toReview(t, newFakeBackend(), false, w, h) }},
	{"5-review-dry-run", func(t *testing.T, w, h int) *driver { return toReview(t, newFakeBackend(), true, w, h) }},
	// A storage subnet as Neutron makes it: the warnings to acknowledge, the change of the
	// subnet shown before it is made, and a role that does not allow it.
	{"5-review-warnings", func(t *testing.T, w, h int) *driver {
		return toReview(t, neutronDefaults(newFakeBackend()), false, w, h)
	}},
	{"5-review-warnings-change", func(t *testing.T, w, h int) *driver {
		d := toReview(t, neutronDefaults(newFakeBackend()), false, w, h)
		d.press("c")
		return d
	}},
	{"5-review-warnings-refused", func(t *testing.T, w, h int) *driver {
		b := neutronDefaults(newFakeBackend())
		b.subnetDenied = map[string]bool{"storage-subnet-id": true}
		d := toReview(t, b, false, w, h)
		d.press("c", "y")
		d.settle(time.Second)
		return d
	}},
	{"6-apply-rolling", rolling},
	{"6-apply-confirm-stop", func(t *testing.T, w, h int) *driver {
		d := rolling(t, w, h)
		d.press("ctrl+c")
		return d
	}},
	{"6-apply-stopped", func(t *testing.T, w, h int) *driver {
		d := rolling(t, w, h)
		d.press("q", "y")
		d.settle(time.Second)
		return d
	}},
	{"7-verify-rwx", func(t *testing.T, w, h int) *driver {
		d := toReview(t, newFakeBackend(), false, w, h)
		d.press("enter")
		d.settle(time.Second)
		d.press("enter", "t")
		d.settle(time.Second)
		return d
	}},
	{"7-verify-no-logs", func(t *testing.T, w, h int) *driver {
		b := newFakeBackend()
		b.storage = StorageStatus{Driver: false, StorageClasses: []string{"csi-manila-default"}}
		b.rwx = RWXResult{StorageClass: "csi-manila-default", Namespace: "manila-setup-rwx-check-x1y2z", Nodes: [2]string{"worker-0", "worker-1"},
			Problem:   "the writer pods produced no logs within 1m0s, so nothing can be said about the volume. On a cluster without a container runtime (a simulation) pods never run; on a real cluster look at `oc describe pod` for image pull or mount errors",
			CleanedUp: true}
		d := toReview(t, b, false, w, h)
		d.press("enter")
		d.settle(time.Second)
		d.press("enter", "t")
		d.settle(time.Second)
		return d
	}},
	// A HyperShift management cluster: its own MachineSets and its hosted clusters' NodePools.
	{"1-connect-management", func(t *testing.T, w, h int) *driver { return start(t, newManagementBackend(true), false, w, h) }},
	{"4-nodepools-mixed", func(t *testing.T, w, h int) *driver { return toSets(t, newManagementBackend(true), false, w, h) }},
	{"4-nodepools-only", func(t *testing.T, w, h int) *driver { return toSets(t, newManagementBackend(false), false, w, h) }},
	{"5-review-nodepools-mixed", func(t *testing.T, w, h int) *driver { return toReview(t, newManagementBackend(true), false, w, h) }},
	{"5-review-nodepools-commands", func(t *testing.T, w, h int) *driver {
		d := toReview(t, newManagementBackend(true), false, w, h)
		d.press("G")
		return d
	}},
	{"6-apply-nodepools-only", func(t *testing.T, w, h int) *driver {
		d := toReview(t, newManagementBackend(false), false, w, h)
		d.press("enter")
		d.settle(200 * time.Millisecond)
		return d
	}},
	{"6-apply-nodepools-mixed", func(t *testing.T, w, h int) *driver {
		d := toReview(t, newManagementBackend(true), false, w, h)
		d.press("enter")
		d.settle(time.Second)
		return d
	}},
	{"7-verify-nodepools-only", func(t *testing.T, w, h int) *driver {
		d := toReview(t, newManagementBackend(false), false, w, h)
		d.press("enter")
		d.settle(200 * time.Millisecond)
		d.press("enter")
		return d
	}},
	{"4-sets-clusterapi", func(t *testing.T, w, h int) *driver { return toSets(t, newClusterAPIBackend(), false, w, h) }},
	{"4-sets-clusterapi-authoritative", func(t *testing.T, w, h int) *driver {
		// Only the copy of worker-1: the screen keeps its MachineSets-only form.
		b := newClusterAPIBackend()
		b.capi = b.capi[:2]
		return toSets(t, b, false, w, h)
	}},
	{"5-review-clusterapi", func(t *testing.T, w, h int) *driver { return toReview(t, newClusterAPIBackend(), false, w, h) }},
	{"6-apply-clusterapi-done", func(t *testing.T, w, h int) *driver {
		d := toReview(t, newClusterAPIBackend(), false, w, h)
		d.press("enter")
		d.settle(200 * time.Millisecond)
		return d
	}},
	// Masters that run workloads: the ControlPlaneMachineSet as a row of its own, never
	// preselected, chosen here alone (the cursor's row: worker-0, worker-1 unchosen).
	{"4-sets-controlplane", func(t *testing.T, w, h int) *driver { return toSets(t, newControlPlaneBackend(), false, w, h) }},
	{"4-sets-controlplane-ondelete", func(t *testing.T, w, h int) *driver {
		b := newControlPlaneBackend()
		b.controlPlane.Strategy = "OnDelete"
		d := toSets(t, b, false, w, h)
		d.press("down", "down", "down", "space")
		return d
	}},
	{"5-review-controlplane", func(t *testing.T, w, h int) *driver { return toControlPlaneReview(t, w, h) }},
	{"6-apply-controlplane-done", func(t *testing.T, w, h int) *driver {
		d := toControlPlaneReview(t, w, h)
		d.press("enter")
		d.settle(200 * time.Millisecond)
		return d
	}},
	{"help-network", func(t *testing.T, w, h int) *driver {
		d := toNetwork(t, newFakeBackend(), false, w, h)
		d.press("?")
		return d
	}},
}

// toControlPlaneReview is the review of worker-0 and the ControlPlaneMachineSet: worker-1
// (attached already) left out, the set chosen.
func toControlPlaneReview(t *testing.T, w, h int) *driver {
	d := toSets(t, newControlPlaneBackend(), false, w, h)
	d.press("down", "down", "space", "down", "space", "enter")
	if d.m.step != stepReview {
		t.Fatalf("not on the review screen: %d", d.m.step)
	}
	return d
}

// rolling is the apply screen with a rollout that does not finish (the fake's gate stays shut).
func rolling(t *testing.T, w, h int) *driver {
	b := newFakeBackend()
	b.rolloutGate = make(chan struct{})
	t.Cleanup(func() { close(b.rolloutGate) })
	d := toReview(t, b, false, w, h)
	d.press("enter")
	d.settle(200 * time.Millisecond)
	return d
}

func TestGoldenViews(t *testing.T) {
	for _, s := range goldenScreens {
		for _, size := range [][2]int{{60, 20}, {80, 24}, {120, 40}} {
			name := fmt.Sprintf("%s-%dx%d", s.name, size[0], size[1])
			t.Run(name, func(t *testing.T) {
				d := s.get(t, size[0], size[1])
				got := d.m.View()
				lines := strings.Split(got, "\n")
				if len(lines) != size[1] {
					t.Errorf("%d lines, want %d", len(lines), size[1])
				}
				// The keys are wrapped, never cut: no key may be lost at a narrow width.
				rule := len(lines) - 1
				for rule > 1 && !strings.HasPrefix(ansi.Strip(lines[rule]), "────") {
					rule--
				}
				if rule > 1 {
					for _, l := range lines[rule+1:] {
						if strings.Contains(l, "…") {
							t.Errorf("a key line is cut: %q", ansi.Strip(l))
						}
					}
				}
				// Trailing spaces are not part of what a person sees; drop them so that the
				// files stay diffable.
				for i, l := range lines {
					lines[i] = strings.TrimRight(l, " ")
				}
				got = strings.Join(lines, "\n") + "\n"
				path := filepath.Join("testdata", name+".golden")
				if update() {
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./cmd/manila-setup/wizard -run TestGoldenViews -update)", err)
				}
				if got != string(want) {
					t.Errorf("View() differs from %s (-update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
				}
			})
		}
	}
}

// TestDiffIsColored checks the review's colors with a color profile (the snapshots have none).
func TestDiffIsColored(t *testing.T) {
	lipgloss.SetColorProfile(termenv.ANSI256)
	defer lipgloss.SetColorProfile(termenv.Ascii)
	for line, want := range map[string]bool{"+  uuid: x": true, "-  uuid: y": true, "@@ -1 +1 @@": true, " context": false} {
		colored := colorDiff(line) != line
		if colored != want {
			t.Errorf("%q colored %v, want %v", line, colored, want)
		}
	}
}
