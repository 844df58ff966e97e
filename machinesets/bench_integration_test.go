//go:build integration

package machinesets

import (
	"context"
	"fmt"
	"testing"
	"time"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/test/testenv"
)

const fleetSize = 200

// networkSeq numbers the networks the benchmark attaches, so that every iteration changes
// every set.
var networkSeq int

// newFleet creates n worker MachineSets as the installer writes them, on a fresh apiserver, and
// returns a counting client.
func newFleet(tb testing.TB, n int) (machineclient.Interface, *requestCounter) {
	tb.Helper()
	api := testenv.NewAPIServer(tb)
	ctx := context.Background()
	createNamespace(tb, ctx, api.Config)
	mc, counter := countingClient(tb, api.Config)
	for i := 0; i < n; i++ {
		createCorpus(tb, ctx, mc, "installer-default", fmt.Sprintf("ostest-8x2kq-worker-%03d", i), "")
	}
	// One read first, so that the apiserver's watch cache for MachineSets is warm: a cold
	// cache answers the first LIST with 429 "storage is (re)initializing" and client-go retries.
	if _, err := List(ctx, mc, attach.Attachment{}); err != nil {
		tb.Fatal(err)
	}
	counter.reset()
	return mc, counter
}

// TestPatch200MachineSets holds the performance target of `make test`: patching 200 MachineSets
// is one LIST plus one PATCH per set, and a second run is the LIST alone.
func TestPatch200MachineSets(t *testing.T) {
	mc, counter := newFleet(t, fleetSize)
	ctx := context.Background()

	start := time.Now()
	results, err := Patch(ctx, mc, Selection{}, attach.Options{Attachment: storageWant})
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != fleetSize || counter.get("LIST machinesets") != 1 || counter.get("PATCH machinesets") != fleetSize || counter.total() != fleetSize+1 {
		t.Errorf("patching %d sets: %d results, requests %s; want 1 LIST and %d PATCH", fleetSize, len(results), counter, fleetSize)
	}
	t.Logf("patch %d MachineSets: %d requests (%s) in %s", fleetSize, counter.total(), counter, wall.Round(time.Millisecond))

	counter.reset()
	start = time.Now()
	if _, err := Patch(ctx, mc, Selection{}, attach.Options{Attachment: storageWant}); err != nil {
		t.Fatal(err)
	}
	if counter.total() != 1 {
		t.Errorf("second run: requests %s, want the LIST alone", counter)
	}
	t.Logf("second run (nothing to do): %d request in %s", counter.total(), time.Since(start).Round(time.Millisecond))
}

// BenchmarkPatch200MachineSets measures patching 200 MachineSets on envtest. Each iteration
// attaches a new network, so every set changes every time.
//
//	go test -tags integration -run '^$' -bench Patch200 -benchtime 5x ./machinesets/
func BenchmarkPatch200MachineSets(b *testing.B) {
	mc, counter := newFleet(b, fleetSize)
	ctx := context.Background()
	run := func(b *testing.B, dryRun, fresh bool, concurrency int) {
		counter.reset()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			want := storageWant
			if fresh {
				networkSeq++
				want = attach.Attachment{Networks: []string{fmt.Sprintf("%08x-0000-4000-8000-000000000000", networkSeq)}}
			}
			if _, err := Patch(ctx, mc, Selection{}, attach.Options{Attachment: want, DryRun: dryRun, Concurrency: concurrency}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(counter.total())/float64(b.N), "requests/op")
		b.ReportMetric(float64(counter.get("PATCH machinesets"))/float64(b.N), "patches/op")
		b.ReportMetric(float64(counter.get("LIST machinesets"))/float64(b.N), "lists/op")
	}
	b.Run("all-change", func(b *testing.B) { run(b, false, true, 0) })
	b.Run("all-change-sequential", func(b *testing.B) { run(b, false, true, 1) })
	b.Run("dry-run", func(b *testing.B) { run(b, true, true, 0) })
	b.Run("already-attached", func(b *testing.B) {
		if _, err := Patch(ctx, mc, Selection{}, attach.Options{Attachment: storageWant}); err != nil {
			b.Fatal(err)
		}
		run(b, false, false, 0)
	})
}
