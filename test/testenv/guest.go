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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	// run is the cloud's MANILA_SETUP_RUN.
	run string
}

// NFS returns the cloud's real NFS back end, failing the test when the cloud runs the
// DummyDriver (without root, or with MANILA_SETUP_NFS=dummy), which exports nothing.
func (c *Cloud) NFS(t testing.TB) *NFSBackend {
	t.Helper()
	run := c.runDir
	if run == "" {
		run = runDir()
	}
	b, err := loadNFSBackendOf(run)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// LoadNFSBackend reads what nfs-backend.sh says of the running cloud's back end.
func LoadNFSBackend() (*NFSBackend, error) { return loadNFSBackendOf(runDir()) }

// loadNFSBackendOf reads the back end of the cloud whose MANILA_SETUP_RUN is run.
func loadNFSBackendOf(run string) (*NFSBackend, error) {
	mode, err := os.ReadFile(filepath.Join(run, "openstack", "nfs-backend"))
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
	cmd := exec.Command("bash", script, "env")
	cmd.Env = append(os.Environ(), "MANILA_SETUP_RUN="+run)
	out, err := cmd.Output()
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
		script: script, run: run,
	}, nil
}

// RestartServer stops ganesha and starts it again, as an NFS server's failover or upgrade would:
// the exports come back from the files Manila's ganesha library wrote.
func (b *NFSBackend) RestartServer(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, "bash", b.script, "restart-server")
	cmd.Env = append(os.Environ(), "MANILA_SETUP_RUN="+b.run)
	out, err := cmd.CombinedOutput()
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
	// HostRoot shares the host's root read-only with the guest (9p), mounted on /host: the
	// programs of a guest node (containerd, runc, the kubelet) are the host's own.
	HostRoot bool
	// HostLink, if set, adds a NIC of QEMU's user-mode network on a link-local range no cloud
	// network uses: the guest reaches the host's 127.0.0.1 at HostLinkHost, and each host
	// loopback port of Forwards reaches the guest's port it maps to.
	HostLink *HostLink
}

// tcgCacheMiB bounds each guest's cache of translated code (QEMU's tb-size).
const tcgCacheMiB = 128

// HostLink is a guest's way to and from the host's loopback servers (GuestOptions.HostLink).
type HostLink struct {
	// Forwards maps ports of the host's 127.0.0.1 to the guest's ports they reach.
	Forwards map[int]int
}

// The user-mode network of HostLink: the guest's address, and the host's loopback as the guest
// reaches it. Link-local, so that no cloud subnet a test shapes overlaps it.
const (
	HostLinkGuest = "169.254.100.15"
	HostLinkHost  = "169.254.100.2"
)

// Guest is a real Linux kernel under QEMU (TCG): an NFS client with its own addresses on the
// cloud's networks, driven over a virtio control port (test/env/guest/init).
type Guest struct {
	Name    string
	Console string // the serial console's log: the kernel's and init's messages

	dir  string // QEMU's sockets and logs, removed by Stop
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
		if t.Failed() {
			t.Logf("guest %s console (last lines):\n%s", g.Name, tail(g.Console, 20))
		}
		g.Stop()
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
	started := false // from then on, Stop removes dir
	defer func() {
		if !started {
			_ = os.RemoveAll(dir)
		}
	}()
	if opts.MemoryMiB == 0 {
		opts.MemoryMiB = 256
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	// no_timer_check: under TCG on a loaded host the kernel's check of the IO-APIC timer can
	// miss its ticks and panic ("IO-APIC + timer doesn't work"), seen during a parallel build.
	cmdline := []string{"console=ttyS0", "panic=-1", "loglevel=4", "no_timer_check", "ms.hostname=" + opts.Name}
	// tb-size: TCG's cache of translated code, 1 GiB by default, fills with a kubelet's and
	// containerd's code and is host memory: a guest node's QEMU was 1476 MiB resident with it.
	args := []string{"-accel", "tcg,thread=multi,tb-size=" + strconv.Itoa(tcgCacheMiB), "-cpu", "max", "-smp", "1", "-m", strconv.Itoa(opts.MemoryMiB),
		"-nodefaults", "-nographic", "-no-reboot", "-display", "none",
		"-kernel", filepath.Join(assets, "vmlinuz"), "-initrd", filepath.Join(assets, "initrd.img"),
		"-serial", "file:" + filepath.Join(dir, "console.log"),
		"-device", "virtio-serial-pci",
		"-chardev", "socket,id=ctl,path=" + filepath.Join(dir, "ctl.sock") + ",server=on,wait=off",
		"-device", "virtserialport,chardev=ctl,name=ms.ctl",
	}
	if opts.HostRoot {
		args = append(args, "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap")
		cmdline = append(cmdline, "ms.hostroot")
	}
	// QEMU runs in the host's network namespace (its user-mode network reaches the host's
	// loopback from there); each tap is made in its own network's namespace and handed to QEMU
	// as an open file, so that no interface of a guest ever appears in the host's namespace.
	taps := make([]string, len(opts.NICs))
	var tapFiles []*os.File
	defer func() {
		for _, f := range tapFiles {
			f.Close() // QEMU holds its own copies
		}
	}()
	for i, nic := range opts.NICs {
		taps[i] = fmt.Sprintf("msg%s%d", hex.EncodeToString(id), i)
		f, err := openTap(nic.Namespace, taps[i])
		if err != nil {
			return nil, fmt.Errorf("guest %s: %w", opts.Name, err)
		}
		tapFiles = append(tapFiles, f)
		args = append(args,
			"-netdev", fmt.Sprintf("tap,id=n%d,fd=%d", i, 2+len(tapFiles)), // ExtraFiles start at 3
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
	if opts.HostLink != nil {
		netdev := "user,id=host,net=169.254.100.0/24,host=" + HostLinkHost + ",dhcpstart=" + HostLinkGuest
		for hostPort, guestPort := range opts.HostLink.Forwards {
			netdev += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", hostPort, guestPort)
		}
		mac := fmt.Sprintf("52:54:%02x:%02x:%02x:fe", id[0], id[1], id[2])
		args = append(args, "-netdev", netdev, "-device", "virtio-net-pci,netdev=host,mac="+mac+",romfile=")
		cmdline = append(cmdline, "ms.if="+mac+","+HostLinkGuest+"/32,route="+HostLinkHost+"/32")
	}
	args = append(args, "-append", strings.Join(cmdline, " "))
	logf, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("qemu-system-x86_64", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = tapFiles
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("guest %s: starting QEMU: %w", opts.Name, err)
	}
	started = true
	g := &Guest{Name: opts.Name, Console: filepath.Join(dir, "console.log"), dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(g.done)
	}()
	fail := func(err error) (*Guest, error) {
		_ = g.cmd.Process.Kill()
		<-g.done
		q, _ := os.ReadFile(filepath.Join(dir, "qemu.log"))
		err = fmt.Errorf("guest %s: %w\nQEMU: %s\nconsole: %s", opts.Name, err, q, tail(g.Console, 10))
		g.Stop()
		return nil, err
	}
	for i, nic := range opts.NICs {
		if err := plug(ctx, taps[i], nic); err != nil {
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

// openTap makes the tap name in the network namespace ns and returns its open file. The tap
// lasts while the file (or QEMU's copy of it) is open.
func openTap(ns, name string) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread enters ns and comes back; if it cannot come back it stays locked, and ends
		// with this goroutine, so that no other goroutine runs in ns. Ending a thread is not
		// the way out every time: a process started from it (QEMU, with Pdeathsig) would be
		// killed with it, and the runtime hands its idle threads to any goroutine.
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			done <- result{nil, err}
			return
		}
		defer home.Close()
		f, err := func() (*os.File, error) {
			nsFile, err := os.Open(filepath.Join("/run/netns", ns))
			if err != nil {
				return nil, fmt.Errorf("network namespace %s: %w", ns, err)
			}
			defer nsFile.Close()
			if err := unix.Setns(int(nsFile.Fd()), unix.CLONE_NEWNET); err != nil {
				return nil, fmt.Errorf("entering network namespace %s: %w", ns, err)
			}
			defer func() {
				if unix.Setns(int(home.Fd()), unix.CLONE_NEWNET) == nil {
					runtime.UnlockOSThread()
				}
			}()
			fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil, fmt.Errorf("/dev/net/tun: %w", err)
			}
			ifr, err := unix.NewIfreq(name)
			if err != nil {
				unix.Close(fd)
				return nil, err
			}
			ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
			if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
				unix.Close(fd)
				return nil, fmt.Errorf("making tap %s in namespace %s: %w", name, ns, err)
			}
			return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
		}()
		done <- result{f, err}
	}()
	r := <-done
	return r.f, r.err
}

// plug joins a guest's tap to its network's bridge.
func plug(ctx context.Context, tap string, nic GuestNIC) error {
	args := []string{"-n", nic.Namespace, "link", "set", tap, "master", nic.Bridge, "up"}
	if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
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

// Stop ends the guest (QEMU is killed: a guest has nothing to save) and removes its folder,
// console log included.
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
	_ = os.RemoveAll(g.dir)
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
