package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// NFSBackend is the loopback cloud's real NFS back end (test/env/openstack/nfs-backend.sh): the
// nfs-ganesha server behind Manila's shares, in network namespaces of the cloud's own, with the
// bridges that guests plug their NICs into.
type NFSBackend struct {
	// Namespace holds the storage network's bridge and the export addresses; RouterNamespace
	// holds the machine network's router, which routes nothing onwards.
	Namespace, StorageBridge       string
	RouterNamespace, MachineBridge string
	// ExportIPs are the addresses ganesha serves on, the preferred one first.
	ExportIPs []string
	// Root holds the shares' directories; GaneshaLog is the server's log.
	Root, GaneshaLog string
	script           string
}

// NFS returns the cloud's real NFS back end, failing the test when the cloud runs the
// DummyDriver (without root, or with MANILA_SETUP_NFS=dummy), which exports nothing.
func (c *Cloud) NFS(t testing.TB) *NFSBackend {
	t.Helper()
	b, err := LoadNFSBackend()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// LoadNFSBackend reads what nfs-backend.sh says of the running cloud's back end.
func LoadNFSBackend() (*NFSBackend, error) {
	mode, err := os.ReadFile(filepath.Join(OpenStackDir(), "nfs-backend"))
	if err != nil {
		return nil, fmt.Errorf("loopback OpenStack: %w: run test/env/openstack/up.sh (make test does)", err)
	}
	if m := strings.TrimSpace(string(mode)); m != "real" {
		return nil, fmt.Errorf("the loopback cloud's Manila runs the DummyDriver (back end %q), which exports nothing: the data path needs the real NFS back end (up.sh as root, MANILA_SETUP_NFS unset or real)", m)
	}
	script, err := FindAbove("test/env/openstack/nfs-backend.sh")
	if err != nil {
		return nil, err
	}
	out, err := exec.Command("bash", script, "env").Output()
	if err != nil {
		return nil, fmt.Errorf("%s env: %w", script, err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = v
		}
	}
	return &NFSBackend{
		Namespace: vars["NFS_NAMESPACE"], StorageBridge: vars["NFS_STORAGE_BRIDGE"],
		RouterNamespace: vars["NFS_ROUTER_NAMESPACE"], MachineBridge: vars["NFS_MACHINE_BRIDGE"],
		ExportIPs: strings.Fields(vars["NFS_EXPORT_IPS"]),
		Root:      vars["NFS_ROOT"], GaneshaLog: vars["NFS_GANESHA_LOG"],
		script: script,
	}, nil
}

// RestartServer stops ganesha and starts it again, as an NFS server's failover or upgrade would:
// the exports come back from the files Manila's ganesha library wrote.
func (b *NFSBackend) RestartServer(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "bash", b.script, "restart-server").CombinedOutput()
	if err != nil {
		return fmt.Errorf("restarting ganesha: %w\n%s", err, out)
	}
	return nil
}

// StoragePort plugs a guest NIC into the storage network's bridge.
func (b *NFSBackend) StoragePort(mac string, addrs ...string) GuestNIC {
	return GuestNIC{Namespace: b.Namespace, Bridge: b.StorageBridge, MAC: mac, Addrs: addrs}
}

// StorageClientAs plugs a guest NIC into the storage network's bridge with an address from
// outside the storage subnet, the address the server must see: a guest standing in for the
// kernel of a node that has that address (the host's own real node, whose kernel has no NFS
// client). The guest reaches the export subnet on-link, and the storage namespace gets a route
// back to addr on its bridge, removed by the returned function.
func (b *NFSBackend) StorageClientAs(ctx context.Context, mac string, addr netip.Addr, exportSubnet string) (GuestNIC, func(), error) {
	host := netip.PrefixFrom(addr, addr.BitLen()).String()
	if out, err := exec.CommandContext(ctx, "ip", "-n", b.Namespace, "route", "replace", host, "dev", b.StorageBridge).CombinedOutput(); err != nil {
		return GuestNIC{}, nil, fmt.Errorf("route to %s in namespace %s: %w: %s", host, b.Namespace, err, out)
	}
	undo := func() { _ = exec.Command("ip", "-n", b.Namespace, "route", "del", host, "dev", b.StorageBridge).Run() }
	return GuestNIC{Namespace: b.Namespace, Bridge: b.StorageBridge, MAC: mac, Addrs: []string{host}, Routes: []string{exportSubnet}}, undo, nil
}

// MachinePort plugs a guest NIC into the machine network's bridge, with the router as its
// default gateway.
func (b *NFSBackend) MachinePort(mac string, addrs ...string) GuestNIC {
	return GuestNIC{Namespace: b.RouterNamespace, Bridge: b.MachineBridge, MAC: mac, Addrs: addrs, Gateway: "10.196.0.1"}
}

// GuestNIC is one network interface of a guest: a tap on a bridge of the cloud's namespaces,
// with the MAC and addresses of the Neutron port it stands for.
type GuestNIC struct {
	Namespace, Bridge string
	MAC               string
	// Addrs in CIDR form (10.0.0.121/24); Gateway, if set, is the default route; Routes are
	// CIDRs reached on-link through this NIC.
	Addrs   []string
	Gateway string
	Routes  []string
}

// GuestOptions shape one guest.
type GuestOptions struct {
	// Name is the guest's host name (and its NFSv4 client identity).
	Name string
	NICs []GuestNIC
	// MemoryMiB defaults to 256.
	MemoryMiB int
}

// Guest is a real Linux kernel under QEMU (TCG): an NFS client with its own addresses on the
// cloud's networks, driven over a virtio control port (test/env/guest/init).
type Guest struct {
	Name    string
	Console string // the serial console's log: the kernel's and init's messages

	cmd  *exec.Cmd
	done chan struct{}

	mu   sync.Mutex
	conn net.Conn
	r    *bufio.Reader
	next int
}

// BootGuest starts a guest and waits until it answers on its control port (boot takes 8-10 s on
// an idle machine, longer under load). The guest is stopped at the end of the test.
func BootGuest(t testing.TB, ctx context.Context, opts GuestOptions) *Guest {
	t.Helper()
	g, err := StartGuest(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Stop()
		if t.Failed() {
			t.Logf("guest %s console (last lines):\n%s", g.Name, tail(g.Console, 20))
		}
	})
	return g
}

// StartGuest is BootGuest for callers that stop the guest themselves.
func StartGuest(ctx context.Context, opts GuestOptions) (*Guest, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("guest: needs root (taps in the cloud's network namespaces)")
	}
	if len(opts.NICs) == 0 {
		return nil, fmt.Errorf("guest %s: no NIC", opts.Name)
	}
	assets, err := BuiltFolder(ctx, "MANILA_SETUP_GUEST", "test/env/guest/build.sh", "initrd.img")
	if err != nil {
		return nil, err
	}
	// Short: a unix socket's path has at most 107 bytes, and t.TempDir's can be longer.
	dir, err := os.MkdirTemp("", "guest-")
	if err != nil {
		return nil, err
	}
	if opts.MemoryMiB == 0 {
		opts.MemoryMiB = 256
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	// no_timer_check: under TCG on a loaded host the kernel's check of the IO-APIC timer can
	// miss its ticks and panic ("IO-APIC + timer doesn't work"), seen during a parallel build.
	cmdline := []string{"console=ttyS0", "panic=-1", "loglevel=4", "no_timer_check", "ms.hostname=" + opts.Name}
	args := []string{"netns", "exec", opts.NICs[0].Namespace, "qemu-system-x86_64",
		"-accel", "tcg,thread=multi", "-cpu", "max", "-smp", "1", "-m", strconv.Itoa(opts.MemoryMiB),
		"-nodefaults", "-nographic", "-no-reboot", "-display", "none",
		"-kernel", filepath.Join(assets, "vmlinuz"), "-initrd", filepath.Join(assets, "initrd.img"),
		"-serial", "file:" + filepath.Join(dir, "console.log"),
		"-device", "virtio-serial-pci",
		"-chardev", "socket,id=ctl,path=" + filepath.Join(dir, "ctl.sock") + ",server=on,wait=off",
		"-device", "virtserialport,chardev=ctl,name=ms.ctl",
	}
	taps := make([]string, len(opts.NICs))
	for i, nic := range opts.NICs {
		taps[i] = fmt.Sprintf("msg%s%d", hex.EncodeToString(id), i)
		args = append(args,
			"-netdev", fmt.Sprintf("tap,id=n%d,ifname=%s,script=no,downscript=no", i, taps[i]),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=n%d,mac=%s,romfile=", i, nic.MAC))
		spec := append([]string{nic.MAC}, nic.Addrs...)
		if nic.Gateway != "" {
			spec = append(spec, "gw="+nic.Gateway)
		}
		for _, r := range nic.Routes {
			spec = append(spec, "route="+r)
		}
		cmdline = append(cmdline, "ms.if="+strings.Join(spec, ","))
	}
	args = append(args, "-append", strings.Join(cmdline, " "))
	logf, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("guest %s: starting QEMU: %w", opts.Name, err)
	}
	g := &Guest{Name: opts.Name, Console: filepath.Join(dir, "console.log"), cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(g.done)
	}()
	fail := func(err error) (*Guest, error) {
		g.Stop()
		q, _ := os.ReadFile(filepath.Join(dir, "qemu.log"))
		return nil, fmt.Errorf("guest %s: %w\nQEMU: %s\nconsole: %s", opts.Name, err, q, tail(g.Console, 10))
	}
	// QEMU makes each tap in the first NIC's namespace; a tap keeps working when moved, so the
	// others go to their own network's namespace, and each joins its bridge.
	for i, nic := range opts.NICs {
		if err := g.plug(ctx, opts.NICs[0].Namespace, taps[i], nic); err != nil {
			return fail(err)
		}
	}
	boot, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	for {
		if err := g.connect(filepath.Join(dir, "ctl.sock")); err == nil {
			if _, code, err := g.run(boot, 5*time.Second, "true"); err == nil && code == 0 {
				return g, nil
			}
		}
		select {
		case <-g.done:
			return fail(errors.New("QEMU exited during boot"))
		case <-boot.Done():
			return fail(fmt.Errorf("no answer on the control port: %w", boot.Err()))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (g *Guest) plug(ctx context.Context, qemuNS, tap string, nic GuestNIC) error {
	deadline := time.Now().Add(30 * time.Second)
	for exec.CommandContext(ctx, "ip", "-n", qemuNS, "link", "show", tap).Run() != nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("tap %s did not appear in namespace %s", tap, qemuNS)
		}
		select {
		case <-g.done:
			return errors.New("QEMU exited before making its taps")
		case <-time.After(100 * time.Millisecond):
		}
	}
	steps := [][]string{}
	if nic.Namespace != qemuNS {
		steps = append(steps, []string{"-n", qemuNS, "link", "set", tap, "netns", nic.Namespace})
	}
	steps = append(steps, []string{"-n", nic.Namespace, "link", "set", tap, "master", nic.Bridge, "up"})
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, "ip", s...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}

func (g *Guest) connect(sock string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conn != nil {
		return nil
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		return err
	}
	g.conn, g.r = c, bufio.NewReaderSize(c, 1<<20)
	return nil
}

// Run runs script with sh in the guest and returns its output (standard output and error) and
// exit code. The script is killed, with everything it started, after timeout (exit code 137);
// what it starts in the background with & outlives it.
func (g *Guest) Run(ctx context.Context, timeout time.Duration, script string) (string, int, error) {
	return g.run(ctx, timeout, script)
}

// MustRun is Run that fails the test unless the script exits 0.
func (g *Guest) MustRun(t testing.TB, ctx context.Context, script string) string {
	t.Helper()
	out, code, err := g.Run(ctx, time.Minute, script)
	if err != nil {
		t.Fatalf("guest %s: %s: %v", g.Name, script, err)
	}
	if code != 0 {
		t.Fatalf("guest %s: %s: exit code %d:\n%s", g.Name, script, code, out)
	}
	return out
}

func (g *Guest) run(ctx context.Context, timeout time.Duration, script string) (string, int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conn == nil {
		return "", 0, fmt.Errorf("guest %s: not connected", g.Name)
	}
	g.next++
	id := strconv.Itoa(g.next)
	secs := int(timeout.Seconds())
	if secs < 1 {
		secs = 1
	}
	// The reply comes at most a few seconds after the guest's own deadline.
	deadline := time.Now().Add(timeout + 15*time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = g.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = g.conn.SetDeadline(time.Now()) })
	defer stop()
	if _, err := fmt.Fprintf(g.conn, "%s %d %s\n", id, secs, base64.StdEncoding.EncodeToString([]byte(script))); err != nil {
		return "", 0, g.broken(err)
	}
	for {
		line, err := g.r.ReadString('\n')
		if err != nil {
			return "", 0, g.broken(err)
		}
		f := strings.Fields(line)
		// Replies to earlier requests (a ping sent before init listened) are skipped.
		if len(f) < 3 || f[0] != "__MS__" || f[1] != id {
			continue
		}
		code, _ := strconv.Atoi(f[2])
		var out []byte
		if len(f) > 3 {
			if out, err = base64.StdEncoding.DecodeString(f[3]); err != nil {
				return "", 0, fmt.Errorf("guest %s: reply: %w", g.Name, err)
			}
		}
		return string(out), code, nil
	}
}

// broken drops a connection whose request or reply failed half-way: the next Run on it would
// read the rest of the old reply.
func (g *Guest) broken(err error) error {
	g.conn.Close()
	g.conn = nil
	return fmt.Errorf("guest %s: control port: %w", g.Name, err)
}

// RSSBytes is the resident memory of the guest's QEMU process on this host.
func (g *Guest) RSSBytes() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kib * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// Stop ends the guest (QEMU is killed: a guest has nothing to save).
func (g *Guest) Stop() {
	g.mu.Lock()
	if g.conn != nil {
		g.conn.Close()
		g.conn = nil
	}
	g.mu.Unlock()
	if g.cmd.Process != nil {
		_ = g.cmd.Process.Kill()
	}
	<-g.done
}

// tail returns the last n lines of a file, or why it could not be read.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
