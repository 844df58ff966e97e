//go:build integration

package datapath

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shareaccessrules"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/snapshots"

	"github.com/manila-setup/manila-setup/diagnose"
	"github.com/manila-setup/manila-setup/operator/shareclient"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestSharesAreRealNFSExports is the data path below the cluster: the loopback cloud's Manila
// creates a share on its nfs-ganesha back end, grants and revokes access rules, snapshots and
// restores, and real Linux NFS clients (guests whose NICs carry the MACs and addresses of
// Neutron ports, as a server's do) mount it, write and read. Each verdict is the kernel's or the
// NFS server's: what a worker node of a real cloud would see.
func TestSharesAreRealNFSExports(t *testing.T) {
	cloud := testenv.NewCloud(t)
	nfs := cloud.NFS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := newClients(t, ctx, cloud)
	suffix := testenv.NameSuffix()

	// Four workers, shaped as Nova would make them: a port on the machine network (primary, with
	// the default route) and, for the attached ones, a port on the storage network.
	type worker struct {
		name            string
		storage, tenant bool
	}
	workers := []worker{
		{"node-a", true, true},  // attached, admitted read-write
		{"node-b", true, true},  // attached, admitted read-write
		{"node-c", true, true},  // attached, not admitted (later read-only)
		{"node-d", false, true}, // not attached: its NFS traffic goes to the machine network's router
	}
	guests := make(map[string]*testenv.Guest, len(workers))
	storageIP, machineIP := map[string]string{}, map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for _, w := range workers {
		var nics []testenv.GuestNIC
		if w.tenant {
			mac, ip := c.port(t, ctx, cloud.Seed.Networks["tenant"], w.name+"-machine-"+suffix)
			nics = append(nics, nfs.MachinePort(mac, ip+"/16"))
			machineIP[w.name] = ip
		}
		if w.storage {
			mac, ip := c.port(t, ctx, cloud.Seed.Networks["storage"], w.name+"-storage-"+suffix)
			nics = append(nics, nfs.StoragePort(mac, ip+"/24"))
			storageIP[w.name] = ip
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := testenv.StartGuest(ctx, testenv.GuestOptions{Name: w.name, NICs: nics})
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(g.Stop)
			mu.Lock()
			guests[w.name] = g
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d guests booted in %s", len(guests), time.Since(start).Round(time.Second))
	a, b, cc, d := guests["node-a"], guests["node-b"], guests["node-c"], guests["node-d"]

	// The attached workers reach the export from their storage address: the export's subnet is
	// on-link there, so the kernel picks that NIC, not the default route.
	for _, name := range []string{"node-a", "node-b", "node-c"} {
		out := guests[name].MustRun(t, ctx, "ip route get "+nfs.ExportIPs[0])
		if !strings.Contains(out, "src "+storageIP[name]) {
			t.Errorf("%s: route to the export %s does not leave from its storage address %s:\n%s", name, nfs.ExportIPs[0], storageIP[name], out)
		}
	}

	share, export := c.share(t, ctx, "datapath-"+suffix, "")
	t.Logf("share %s exported at %s", share, export)
	c.grant(t, ctx, share, storageIP["node-a"], "rw")
	ruleB := c.grant(t, ctx, share, storageIP["node-b"], "rw")

	t.Run("admitted workers read each other's writes", func(t *testing.T) {
		for _, g := range []*testenv.Guest{a, b} {
			took := mount(t, ctx, g, export, "/mnt/share", "")
			t.Logf("%s mounted %s in %s", g.Name, export, took.Round(10*time.Millisecond))
		}
		a.MustRun(t, ctx, "echo 'line from node-a' >>/mnt/share/node-a")
		b.MustRun(t, ctx, "echo 'line from node-b' >>/mnt/share/node-b")
		if out := b.MustRun(t, ctx, "cat /mnt/share/node-a"); out != "line from node-a\n" {
			t.Errorf("node-b reads node-a's file as %q", out)
		}
		if out := a.MustRun(t, ctx, "cat /mnt/share/node-b"); out != "line from node-b\n" {
			t.Errorf("node-a reads node-b's file as %q", out)
		}
		// The mount is NFS from the export address, made from the node's storage address.
		m := a.MustRun(t, ctx, "grep ' /mnt/share ' /proc/mounts")
		for _, want := range []string{" nfs4 ", "addr=" + nfs.ExportIPs[0], "clientaddr=" + storageIP["node-a"]} {
			if !strings.Contains(m, want) {
				t.Errorf("node-a's mount lacks %q: %s", want, m)
			}
		}
		// And what the pods wrote is what the share holds on the server.
		if got, err := os.ReadFile(nfs.Root + "/shares/share-" + instanceOf(t, ctx, c, share) + "/node-a"); err != nil || string(got) != "line from node-a\n" {
			t.Errorf("the share's directory on the server holds %q, %v", got, err)
		}
	})

	t.Run("a worker the rules do not admit is refused by the NFS server", func(t *testing.T) {
		out, code := tryMount(t, ctx, cc, export, "/mnt/share", "", time.Minute)
		// NFSv4: the export is hidden from that client's pseudo file system.
		if code != 32 || !strings.Contains(out, "No such file or directory") {
			t.Errorf("node-c (%s, no rule) mounting %s: exit %d, %q; want 32 and the server's \"No such file or directory\"", storageIP["node-c"], export, code, out)
		}
		t.Logf("node-c refused: %s", strings.TrimSpace(out))
		explained(t, out, "not in the share's rules")
	})

	t.Run("a worker without a storage port times out", func(t *testing.T) {
		// The export's subnet is not on-link: the packets take the default route to the
		// machine network's router, which has no way to the storage network. A real cloud's
		// router sends them upstream, where they are dropped as here. With the kernel's defaults
		// (timeo=600,retrans=2) and mount.nfs's two minutes of retries a node waits minutes for
		// this answer; one 5 s retransmission and no retry give the same answer in about 10 s.
		began := time.Now()
		out, code := tryMount(t, ctx, d, export, "/mnt/share", "timeo=50,retrans=1,retry=0", 2*time.Minute)
		if code != 32 || !strings.Contains(out, "Connection timed out") {
			t.Errorf("node-d (no storage port) mounting %s: exit %d, %q; want 32 and \"mount.nfs: Connection timed out\"", export, code, out)
		}
		t.Logf("node-d: %q after %s", strings.TrimSpace(out), time.Since(began).Round(time.Second))
		explained(t, out, "no port on the network Manila exports on")
	})

	t.Run("a read-only rule gives read-only access", func(t *testing.T) {
		ruleC := c.grant(t, ctx, share, storageIP["node-c"], "ro")
		defer c.revoke(t, ctx, share, ruleC)
		mount(t, ctx, cc, export, "/mnt/share", "")
		defer cc.MustRun(t, ctx, "umount /mnt/share")
		if out := cc.MustRun(t, ctx, "cat /mnt/share/node-a"); out != "line from node-a\n" {
			t.Errorf("node-c (ro) reads node-a's file as %q", out)
		}
		out, code, err := cc.Run(ctx, time.Minute, "echo no >>/mnt/share/node-c")
		if err != nil || code == 0 || !strings.Contains(out, "Read-only file system") {
			t.Errorf("node-c (ro) writing: exit %d, %q, %v; want \"Read-only file system\"", code, out, err)
		}
		explained(t, out, "read-only")
	})

	t.Run("a revoked rule stops the mounted worker's I/O, and restoring it restores the I/O", func(t *testing.T) {
		c.revoke(t, ctx, share, ruleB)
		out, code, err := b.Run(ctx, time.Minute, "echo after-revoke >>/mnt/share/node-b")
		if err != nil || code == 0 {
			t.Errorf("node-b wrote after its rule was revoked: exit %d, %q, %v", code, out, err)
		}
		t.Logf("node-b after the revoke: %q", strings.TrimSpace(out))
		explained(t, out, "revoked")
		a.MustRun(t, ctx, "echo 'still here' >>/mnt/share/node-a")
		ruleB = c.grant(t, ctx, share, storageIP["node-b"], "rw")
		ok := eventually(ctx, 60*time.Second, func() bool {
			_, code, err := b.Run(ctx, 30*time.Second, "echo 'line from node-b' >>/mnt/share/node-b")
			return err == nil && code == 0
		})
		if !ok {
			t.Errorf("node-b cannot write again after its rule came back")
		}
	})

	t.Run("the NFS server restarted while both write: both resume and no line is lost", func(t *testing.T) {
		for _, g := range []*testenv.Guest{a, b} {
			g.MustRun(t, ctx, fmt.Sprintf(`rm -f /mnt/share/seq-%[1]s /tmp/stop
(i=0; while [ ! -e /tmp/stop ]; do i=$((i+1)); echo "%[1]s $i" >>/mnt/share/seq-%[1]s; sleep 0.2; done) >/tmp/writer.log 2>&1 &`, g.Name))
		}
		time.Sleep(3 * time.Second)
		began := time.Now()
		if err := nfs.RestartServer(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("ganesha restarted in %s", time.Since(began).Round(100*time.Millisecond))
		// Lines written after the restart show that the writers resumed.
		before := map[string]int{}
		for _, g := range []*testenv.Guest{a, b} {
			before[g.Name] = lines(t, ctx, a, "/mnt/share/seq-"+g.Name)
		}
		resumed := eventually(ctx, 2*time.Minute, func() bool {
			for _, g := range []*testenv.Guest{a, b} {
				if lines(t, ctx, a, "/mnt/share/seq-"+g.Name) < before[g.Name]+5 {
					return false
				}
			}
			return true
		})
		for _, g := range []*testenv.Guest{a, b} {
			g.MustRun(t, ctx, "touch /tmp/stop; sleep 1")
		}
		t.Logf("writers resumed %s after the restart: %v", time.Since(began).Round(time.Second), resumed)
		if !resumed {
			t.Errorf("the writers did not resume within 2 minutes of the restart")
		}
		for _, g := range []*testenv.Guest{a, b} {
			out := b.MustRun(t, ctx, "cat /mnt/share/seq-"+g.Name)
			want := 1
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if l != fmt.Sprintf("%s %d", g.Name, want) {
					t.Errorf("%s's lines: line %d is %q, want %q (a line lost or doubled around the restart)", g.Name, want, l, fmt.Sprintf("%s %d", g.Name, want))
					break
				}
				want++
			}
			t.Logf("%s wrote %d lines, every one in order", g.Name, want-1)
		}
	})

	t.Run("a snapshot's restore holds what was written before it, not after", func(t *testing.T) {
		a.MustRun(t, ctx, "echo before-snapshot >/mnt/share/marker")
		snap := c.snapshot(t, ctx, share)
		a.MustRun(t, ctx, "echo after-snapshot >/mnt/share/marker; echo later >/mnt/share/later")
		restored, restoredExport := c.share(t, ctx, "datapath-restore-"+suffix, snap)
		c.grant(t, ctx, restored, storageIP["node-a"], "rw")
		mount(t, ctx, a, restoredExport, "/mnt/restore", "")
		if out := a.MustRun(t, ctx, "cat /mnt/restore/marker"); out != "before-snapshot\n" {
			t.Errorf("the restore's marker is %q, want the line written before the snapshot", out)
		}
		if out, code, _ := a.Run(ctx, time.Minute, "cat /mnt/restore/later"); code == 0 {
			t.Errorf("the restore holds a file written after the snapshot: %q", out)
		}
		if out := a.MustRun(t, ctx, "cat /mnt/restore/node-a"); !strings.HasPrefix(out, "line from node-a\n") {
			t.Errorf("the restore's copy of node-a's file is %q", out)
		}
		// The restore is a share of its own: writing to it leaves the original alone.
		a.MustRun(t, ctx, "echo restored-only >/mnt/restore/marker; umount /mnt/restore")
		if out := a.MustRun(t, ctx, "cat /mnt/share/marker"); out != "after-snapshot\n" {
			t.Errorf("the original's marker is %q after writing to the restore", out)
		}
	})

	t.Run("the clients the operator's rule names admit the nodes that mount, as the NFS server judges them", func(t *testing.T) {
		// What shareclient.Decide (the operator's nfs-shareClient) says of this cluster before
		// its workers are attached, and after; the driver grants one ip rule per entry.
		machine := func(name string, attached bool) shareclient.Machine {
			m := shareclient.Machine{Name: name, Attached: attached}
			m.Addresses = append(m.Addresses, netip.MustParseAddr(machineIP[name]))
			if attached {
				m.Addresses = append(m.Addresses, netip.MustParseAddr(storageIP[name]))
			}
			return m
		}
		facts := shareclient.Facts{
			MachineNetworks: []netip.Prefix{netip.MustParsePrefix("10.196.0.0/16")},
			ExportSubnets:   []netip.Prefix{netip.MustParsePrefix(cloud.Seed.Subnets["storage-subnet"].CIDR)},
		}
		decide := func(machines ...shareclient.Machine) []string {
			f := facts
			f.Machines = machines
			a, err := shareclient.Decide(f)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, p := range a.Clients {
				out = append(out, p.String())
			}
			t.Logf("nfs-shareClient %v: %s", out, a.Reason)
			return out
		}
		// Before the attach no machine has a storage port: the rule names the machine network.
		// A node attached later mounts from its storage address, which that rule does not
		// cover: the server refuses it.
		before := decide(machine("node-a", false), machine("node-d", false))
		old, oldExport := c.share(t, ctx, "datapath-before-attach-"+suffix, "")
		for _, cidr := range before {
			c.grant(t, ctx, old, cidr, "rw")
		}
		out, code := tryMount(t, ctx, a, oldExport, "/mnt/before", "", time.Minute)
		if code == 0 || !strings.Contains(out, "No such file or directory") {
			t.Errorf("node-a (storage address %s) mounting a share whose rules are %v: exit %d, %q; want the server's refusal", storageIP["node-a"], before, code, out)
		}
		// Once a machine is attached the rule adds the storage subnet: every attached node is
		// admitted from its storage address.
		after := decide(machine("node-a", true), machine("node-b", true), machine("node-d", false))
		fresh, freshExport := c.share(t, ctx, "datapath-after-attach-"+suffix, "")
		for _, cidr := range after {
			c.grant(t, ctx, fresh, cidr, "rw")
		}
		for _, g := range []*testenv.Guest{a, b} {
			mount(t, ctx, g, freshExport, "/mnt/after", "")
			g.MustRun(t, ctx, "echo "+g.Name+" >/mnt/after/"+g.Name+" && umount /mnt/after")
		}
	})

	t.Run("an expansion: Manila records the size, the mount shows the back end's file system", func(t *testing.T) {
		dfBefore := a.MustRun(t, ctx, "df -k /mnt/share | tail -n 1")
		if err := shares.Extend(ctx, c.manila, share, shares.ExtendOpts{NewSize: 2}).ExtractErr(); err != nil {
			t.Fatal(err)
		}
		waitShare(t, ctx, c, share, func(s *shares.Share) bool { return s.Status == "available" && s.Size == 2 })
		dfAfter := a.MustRun(t, ctx, "df -k /mnt/share | tail -n 1")
		a.MustRun(t, ctx, "echo after-extend >>/mnt/share/node-a")
		// The back end's shares have no quota (their directories share the host's file system):
		// df shows that file system's size before and after, which is what the driver's
		// NodeExpandVolume (a no-op for NFS) leaves to the back end.
		t.Logf("df before: %s; after the extension to 2 GiB: %s", strings.TrimSpace(dfBefore), strings.TrimSpace(dfAfter))
	})

	for _, w := range workers {
		if rss, err := guests[w.name].RSSBytes(); err == nil {
			t.Logf("guest %s: %d MiB resident on the host", w.name, rss>>20)
		}
	}
}

// explained checks that diagnose reads the NFS client's real words as what happened.
func explained(t *testing.T, msg, want string) {
	t.Helper()
	if got := diagnose.ExplainMountError(msg); !strings.Contains(got, want) {
		t.Errorf("diagnose reads %q as %q; want it to say %q", strings.TrimSpace(msg), got, want)
	}
}

// mount mounts export at dir in the guest (NFSv4.1, the kernel's defaults otherwise, as the CSI
// NFS node plugin does with a class that has no mountOptions) and returns how long it took.
func mount(t *testing.T, ctx context.Context, g *testenv.Guest, export, dir, opts string) time.Duration {
	t.Helper()
	began := time.Now()
	out, code := tryMount(t, ctx, g, export, dir, opts, time.Minute)
	if code != 0 {
		t.Fatalf("%s: mounting %s: exit %d: %s", g.Name, export, code, out)
	}
	return time.Since(began)
}

func tryMount(t *testing.T, ctx context.Context, g *testenv.Guest, export, dir, opts string, timeout time.Duration) (string, int) {
	t.Helper()
	o := "vers=4.1"
	if opts != "" {
		o += "," + opts
	}
	out, code, err := g.Run(ctx, timeout, fmt.Sprintf("mkdir -p %s && mount.nfs %s %s -o %s", dir, export, dir, o))
	if err != nil {
		t.Fatalf("%s: %v", g.Name, err)
	}
	return out, code
}

// lines counts the lines of a file in the guest (0 when it cannot be read).
func lines(t *testing.T, ctx context.Context, g *testenv.Guest, path string) int {
	out, code, err := g.Run(ctx, 30*time.Second, "wc -l <"+path)
	if err != nil || code != 0 {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(out))
	return n
}

func eventually(ctx context.Context, timeout time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if ok() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(time.Second)
	}
}

type clients struct {
	manila, network *gophercloud.ServiceClient
}

func newClients(t testing.TB, ctx context.Context, cloud *testenv.Cloud) *clients {
	t.Helper()
	manila, err := testenv.ManilaClient(ctx, testenv.CloudDemo)
	if err != nil {
		t.Fatal(err)
	}
	network, err := testenv.NetworkClient(ctx, testenv.CloudDemo)
	if err != nil {
		t.Fatal(err)
	}
	return &clients{manila: manila, network: network}
}

// port makes a Neutron port on the network, as Nova would for a server, and returns its MAC and
// fixed IP. It is deleted at the end of the test.
func (c *clients) port(t testing.TB, ctx context.Context, network, name string) (string, string) {
	t.Helper()
	p, err := ports.Create(ctx, c.network, ports.CreateOpts{NetworkID: network, Name: name}).Extract()
	if err != nil {
		t.Fatalf("port %s on network %s: %v", name, network, err)
	}
	t.Cleanup(func() { _ = ports.Delete(context.Background(), c.network, p.ID).ExtractErr() })
	if len(p.FixedIPs) == 0 {
		t.Fatalf("port %s has no fixed IP", name)
	}
	return p.MACAddress, p.FixedIPs[0].IPAddress
}

// share creates a 1 GiB NFS share of type default (from snapshot, if set), waits for it to be
// available and returns its ID and its preferred export location. It is deleted at the end.
func (c *clients) share(t testing.TB, ctx context.Context, name, snapshot string) (string, string) {
	t.Helper()
	s, err := shares.Create(ctx, c.manila, shares.CreateOpts{ShareProto: "NFS", Size: 1, ShareType: "default", Name: name, SnapshotID: snapshot}).Extract()
	if err != nil {
		t.Fatalf("creating share %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = shares.Delete(ctx, c.manila, s.ID).ExtractErr()
		_ = eventually(ctx, time.Minute, func() bool {
			_, err := shares.Get(ctx, c.manila, s.ID).Extract()
			return gophercloud.ResponseCodeIs(err, 404)
		})
	})
	waitShare(t, ctx, c, s.ID, func(s *shares.Share) bool { return s.Status == "available" })
	locs, err := shares.ListExportLocations(ctx, c.manila, s.ID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range locs {
		if l.Preferred {
			return s.ID, l.Path
		}
	}
	t.Fatalf("share %s has no preferred export location: %+v", name, locs)
	return "", ""
}

func waitShare(t testing.TB, ctx context.Context, c *clients, id string, ok func(*shares.Share) bool) {
	t.Helper()
	var last *shares.Share
	if !eventually(ctx, 2*time.Minute, func() bool {
		s, err := shares.Get(ctx, c.manila, id).Extract()
		if err != nil {
			return false
		}
		last = s
		if s.Status == "error" {
			t.Fatalf("share %s went to error", id)
		}
		return ok(s)
	}) {
		t.Fatalf("share %s: not as wanted after 2 minutes: %+v", id, last)
	}
}

// instanceOf returns the ID of the share's instance: the back end names its directory after it.
func instanceOf(t testing.TB, ctx context.Context, c *clients, share string) string {
	t.Helper()
	var body struct {
		ShareInstances []struct {
			ID string `json:"id"`
		} `json:"share_instances"`
	}
	admin, err := testenv.ManilaClient(ctx, testenv.CloudAdmin)
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Get(ctx, admin.ServiceURL("shares", share, "instances"), &body, nil)
	if err != nil || len(body.ShareInstances) != 1 {
		t.Fatalf("instances of share %s: %+v, %v", share, body, err)
	}
	return body.ShareInstances[0].ID
}

// grant adds an ip rule for addr (an address or a CIDR) and waits until Manila reports it active: the back end has
// applied it to the export.
func (c *clients) grant(t testing.TB, ctx context.Context, share, addr, level string) string {
	t.Helper()
	if _, err := netip.ParsePrefix(addr); err != nil {
		if _, err := netip.ParseAddr(addr); err != nil {
			t.Fatalf("rule for %q: neither an address nor a CIDR", addr)
		}
	}
	r, err := shares.GrantAccess(ctx, c.manila, share, shares.GrantAccessOpts{AccessType: "ip", AccessTo: addr, AccessLevel: level}).Extract()
	if err != nil {
		t.Fatalf("granting %s %s on %s: %v", level, addr, share, err)
	}
	if !eventually(ctx, time.Minute, func() bool { return c.ruleState(ctx, share, r.ID) == "active" }) {
		t.Fatalf("rule %s (%s %s) on share %s: %s, not active after a minute", r.ID, level, addr, share, c.ruleState(ctx, share, r.ID))
	}
	return r.ID
}

func (c *clients) revoke(t testing.TB, ctx context.Context, share, rule string) {
	t.Helper()
	if err := shares.RevokeAccess(ctx, c.manila, share, shares.RevokeAccessOpts{AccessID: rule}).ExtractErr(); err != nil {
		t.Fatalf("revoking rule %s on %s: %v", rule, share, err)
	}
	if !eventually(ctx, time.Minute, func() bool { return c.ruleState(ctx, share, rule) == "" }) {
		t.Fatalf("rule %s on share %s still %s a minute after its revocation", rule, share, c.ruleState(ctx, share, rule))
	}
}

// ruleState is the rule's state, or "" when the share has no such rule.
func (c *clients) ruleState(ctx context.Context, share, rule string) string {
	rules, err := shareaccessrules.List(ctx, c.manila, share).Extract()
	if err != nil {
		return "unknown: " + err.Error()
	}
	for _, r := range rules {
		if r.ID == rule {
			return r.State
		}
	}
	return ""
}

func (c *clients) snapshot(t testing.TB, ctx context.Context, share string) string {
	t.Helper()
	s, err := snapshots.Create(ctx, c.manila, snapshots.CreateOpts{ShareID: share, Name: "datapath-" + share[:8]}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = snapshots.Delete(ctx, c.manila, s.ID).ExtractErr()
		_ = eventually(ctx, time.Minute, func() bool {
			_, err := snapshots.Get(ctx, c.manila, s.ID).Extract()
			return gophercloud.ResponseCodeIs(err, 404)
		})
	})
	if !eventually(ctx, time.Minute, func() bool {
		got, err := snapshots.Get(ctx, c.manila, s.ID).Extract()
		return err == nil && got.Status == "available"
	}) {
		t.Fatalf("snapshot %s of share %s not available after a minute", s.ID, share)
	}
	return s.ID
}
