//go:build integration

package datapath

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// BenchmarkGuestNFS measures the data path's costs on this machine: one guest (TCG) with a
// storage port, a share of the loopback cloud's nfs-ganesha back end admitting it.
//
//	go test -tags integration -run '^$' -bench GuestNFS -benchtime 20x ./test/datapath/
func BenchmarkGuestNFS(b *testing.B) {
	cloud := testenv.NewCloud(b)
	nfs := cloud.NFS(b)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := newClients(b, ctx, cloud)
	suffix := testenv.NameSuffix()
	mac, ip := c.port(b, ctx, cloud.Seed.Networks["storage"], "bench-storage-"+suffix)
	began := time.Now()
	g := testenv.BootGuest(b, ctx, testenv.GuestOptions{Name: "bench", NICs: []testenv.GuestNIC{nfs.StoragePort(mac, ip+"/24")}})
	b.Logf("guest booted in %s", time.Since(began).Round(100*time.Millisecond))
	share, export := c.share(b, ctx, "bench-"+suffix, "")
	c.grant(b, ctx, share, ip, "rw")

	b.Run("control port round trip", func(b *testing.B) {
		for b.Loop() {
			if _, code, err := g.Run(ctx, time.Minute, "true"); err != nil || code != 0 {
				b.Fatal(code, err)
			}
		}
	})
	b.Run("mount and unmount", func(b *testing.B) {
		for b.Loop() {
			if out, code, err := g.Run(ctx, time.Minute, fmt.Sprintf("mkdir -p /mnt/b && mount.nfs %s /mnt/b -o vers=4.1 && umount /mnt/b", export)); err != nil || code != 0 {
				b.Fatal(code, out, err)
			}
		}
	})
	g.MustRun(b, ctx, fmt.Sprintf("mkdir -p /mnt/b && mount.nfs %s /mnt/b -o vers=4.1", export))
	// Appends as the demo's writers make them (open, write a line, close), timed inside the
	// guest: the control port's round trip is not in the figure.
	b.Run("append a line (open, write, close)", func(b *testing.B) {
		// busybox's date has no nanoseconds: /proc/uptime counts hundredths of a second.
		out := g.MustRun(b, ctx, fmt.Sprintf(`cs() { read u _ </proc/uptime; echo "${u%%.*}${u#*.}"; }
s=$(cs); i=0; while [ $i -lt %d ]; do echo "line $i" >>/mnt/b/bench; i=$((i+1)); done; echo $(( $(cs) - s ))`, b.N))
		var cs int64
		if _, err := fmt.Sscan(out, &cs); err != nil {
			b.Fatalf("%q: %v", out, err)
		}
		b.ReportMetric(float64(cs)*1e7/float64(b.N), "guest-ns/op")
	})
	if rss, err := g.RSSBytes(); err == nil {
		b.Logf("guest resident on the host: %d MiB", rss>>20)
	}
}
