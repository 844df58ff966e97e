//go:build integration

package openstack

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

// BenchmarkDiscover measures one CLI run's worth of work (Connect + Discover) in a project
// holding MS_BENCH_NETWORKS networks (default 2000, each with a subnet) and MS_BENCH_SHARES
// shares (default 500) besides the seed, and reports HTTP requests and token requests per run.
//
//	go test -tags integration -run '^$' -bench Discover -benchtime 5x ./internal/openstack/
func BenchmarkDiscover(b *testing.B) {
	cloud := testenv.NewCloud(b)
	nNets, nShares := envInt("MS_BENCH_NETWORKS", 2000), envInt("MS_BENCH_SHARES", 500)
	p := ostest.NewProject(b, cloud, "ms-bench")
	start := time.Now()
	p.CreateNetworks("bench", nNets)
	b.Logf("created %d networks with subnets in %s", nNets, time.Since(start).Round(time.Second))
	start = time.Now()
	p.CreateShares("bench", nShares)
	b.Logf("created %d shares in %s", nShares, time.Since(start).Round(time.Second))

	for _, mode := range []struct {
		name     string
		exact    bool
		pageSize int
	}{
		{"bulk", false, 0},
		{"bulk-pages-of-500", false, 500},
		{"exact", true, 0},
	} {
		b.Run(mode.name, func(b *testing.B) {
			var requests, auths, networks, shares int
			for b.Loop() {
				c, cnt := connect(b, cloud, ostest.CloudName, func(cfg *Config) {
					cfg.CloudsFile = p.CloudsFile
					cfg.PageSize = mode.pageSize
				})
				d, err := c.Discover(testContext(b, 10*time.Minute), DiscoverOptions{ExactExports: mode.exact})
				if err != nil {
					b.Fatal(err)
				}
				if d.Best() == nil || d.Best().Network.Name != "storage" {
					b.Fatalf("best candidate %+v", d.Best())
				}
				total, detail := cnt.snapshot()
				requests += total
				auths += cnt.auths()
				networks, shares = d.NetworksSeen, d.SharesSeen
				if b.N == 1 || requests == total {
					b.Logf("%s: %d networks, %d shares, %d requests:\n%s", mode.name, networks, shares, total, detail)
				}
			}
			b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
			b.ReportMetric(float64(auths)/float64(b.N), "auths/op")
			b.ReportMetric(float64(networks), "networks")
			b.ReportMetric(float64(shares), "shares")
		})
	}
}
