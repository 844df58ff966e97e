package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standintest"
)

// startPlugin serves the plugin in this process on a socket in a short folder.
func startPlugin(t *testing.T, o *options) *grpc.ClientConn {
	t.Helper()
	socket := filepath.Join(standintest.SocketDir(t), "csi.sock")
	lis, err := listen("unix://" + socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(o)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return standintest.Dial(t, socket)
}

func defaultOptions() *options {
	return &options{driverName: "nfs.csi.k8s.io", nodeID: "node-1", mountPermissions: 0o777}
}

func TestIdentityAnswersAsUpstream(t *testing.T) {
	c := csi.NewIdentityClient(startPlugin(t, defaultOptions()))
	ctx := context.Background()
	info, err := c.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != "nfs.csi.k8s.io" || info.GetVendorVersion() == "" {
		t.Fatalf("GetPluginInfo: %v, %v", info, err)
	}
	probe, err := c.Probe(ctx, &csi.ProbeRequest{})
	if err != nil || probe.GetReady() == nil || !probe.GetReady().GetValue() {
		t.Fatalf("Probe: %v, %v; want ready true", probe, err)
	}
	caps, err := c.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
	if err != nil || len(caps.GetCapabilities()) != 1 ||
		caps.GetCapabilities()[0].GetService().GetType() != csi.PluginCapability_Service_CONTROLLER_SERVICE {
		t.Fatalf("GetPluginCapabilities: %v, %v; want CONTROLLER_SERVICE only", caps, err)
	}
}

func TestControllerAnswersAsUpstreamButCreatesNothing(t *testing.T) {
	c := csi.NewControllerClient(startPlugin(t, defaultOptions()))
	ctx := context.Background()
	caps, err := c.ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []csi.ControllerServiceCapability_RPC_Type
	for _, cap := range caps.GetCapabilities() {
		got = append(got, cap.GetRpc().GetType())
	}
	want := []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
	}
	if !slices.Equal(got, want) {
		t.Errorf("controller capabilities %v, want %v", got, want)
	}
	_, err = c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-1"})
	if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "Manila creates the shares") {
		t.Errorf("CreateVolume: %v, want Unimplemented saying Manila creates the shares", err)
	}
	mountCap := []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}}
	v, err := c.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v", VolumeCapabilities: mountCap})
	if err != nil || v.GetConfirmed() == nil {
		t.Errorf("ValidateVolumeCapabilities of a mount capability: %v, %v; want confirmed", v, err)
	}
	blockCap := []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}}
	if _, err := c.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v", VolumeCapabilities: blockCap}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("ValidateVolumeCapabilities of a block capability: %v, want InvalidArgument", err)
	}
}

func TestNodeInfoAndCapabilities(t *testing.T) {
	c := csi.NewNodeClient(startPlugin(t, defaultOptions()))
	ctx := context.Background()
	info, err := c.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || info.GetNodeId() != "node-1" {
		t.Fatalf("NodeGetInfo: %v, %v; want node-1", info, err)
	}
	caps, err := c.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []csi.NodeServiceCapability_RPC_Type
	for _, cap := range caps.GetCapabilities() {
		got = append(got, cap.GetRpc().GetType())
	}
	want := []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.NodeServiceCapability_RPC_UNKNOWN,
	}
	if !slices.Equal(got, want) {
		t.Errorf("node capabilities %v, want %v (no STAGE_UNSTAGE_VOLUME, as upstream)", got, want)
	}
	if _, err := c.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "v"}); status.Code(err) != codes.Unimplemented {
		t.Errorf("NodeStageVolume: %v, want Unimplemented", err)
	}
}

func mountCapability(flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
}

func TestPublishRequestParsesVolumeContextAsUpstream(t *testing.T) {
	for _, c := range []struct {
		name        string
		readonly    bool
		flags       []string
		context     map[string]string
		wantSource  string
		wantOptions []string
		wantPerm    uint64
		wantCode    codes.Code
	}{
		{name: "manila's keys", flags: []string{"nfsvers=4.1"},
			context:    map[string]string{"server": "192.0.2.10", "share": "/shares/share-1"},
			wantSource: "192.0.2.10:/shares/share-1", wantOptions: []string{"nfsvers=4.1"}, wantPerm: 0o777},
		{name: "keys are case-insensitive, read-only adds ro", readonly: true,
			context:    map[string]string{"Server": "nfs.example.test", "SHARE": "/export"},
			wantSource: "nfs.example.test:/export", wantOptions: []string{"ro"}, wantPerm: 0o777},
		{name: "IPv6 server is bracketed",
			context:    map[string]string{"server": "2001:db8::1", "share": "/export"},
			wantSource: "[2001:db8::1]:/export", wantPerm: 0o777},
		{name: "subdir with metadata, mount options and permissions",
			context: map[string]string{"server": "192.0.2.10", "share": "/export/", "subdir": "${pvc.metadata.namespace}/${pvc.metadata.name}",
				"csi.storage.k8s.io/pvc/namespace": "ns1", "csi.storage.k8s.io/pvc/name": "data",
				"mountOptions": "hard,timeo=600", "mountPermissions": "0750"},
			wantSource: "192.0.2.10:/export/ns1/data", wantOptions: []string{"hard,timeo=600"}, wantPerm: 0o750},
		{name: "server missing", context: map[string]string{"share": "/export"}, wantCode: codes.InvalidArgument},
		{name: "share missing", context: map[string]string{"server": "192.0.2.10"}, wantCode: codes.InvalidArgument},
		{name: "bad permissions", context: map[string]string{"server": "s", "share": "/e", "mountpermissions": "9"}, wantCode: codes.InvalidArgument},
	} {
		p, err := parsePublishRequest(&csi.NodePublishVolumeRequest{
			VolumeId: "v", TargetPath: "/t", Readonly: c.readonly, VolumeCapability: mountCapability(c.flags...), VolumeContext: c.context,
		}, 0o777)
		if c.wantCode != codes.OK {
			if status.Code(err) != c.wantCode {
				t.Errorf("%s: %v, want code %s", c.name, err, c.wantCode)
			}
			continue
		}
		if err != nil || p.source != c.wantSource || !slices.Equal(p.options, c.wantOptions) || p.permissions != c.wantPerm {
			t.Errorf("%s: %+v, %v; want source %s, options %v, permissions %o", c.name, p, err, c.wantSource, c.wantOptions, c.wantPerm)
		}
	}
}

func TestKernelMountSplitsFlagsFromNFSData(t *testing.T) {
	km := kernelMountFor([]string{"nfsvers=4.1,hard", "ro", "_netdev,nosuid", "x-systemd.automount"}, "192.0.2.10")
	if km.flags != syscall.MS_RDONLY|syscall.MS_NOSUID || km.data != "nfsvers=4.1,hard,addr=192.0.2.10" {
		t.Errorf("flags %#x data %q, want MS_RDONLY|MS_NOSUID and nfsvers=4.1,hard,addr=192.0.2.10", km.flags, km.data)
	}
	km = kernelMountFor([]string{"ro,rw", "addr=198.51.100.1"}, "192.0.2.10")
	if km.flags != 0 || km.data != "addr=198.51.100.1" {
		t.Errorf("flags %#x data %q, want rw (no flags) and the given addr only", km.flags, km.data)
	}
}

// nfsInKernel tells whether this kernel has an NFS client: then a publish would try to reach
// the (made-up) server instead of failing at once.
func nfsInKernel(t *testing.T) bool {
	t.Helper()
	fss, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines(fss) {
		if f := bytes.Fields(line); len(f) > 0 && string(f[len(f)-1]) == "nfs" {
			return true
		}
	}
	return false
}

// NodePublishVolume makes the target and calls mount(2), and the error carries the kernel's
// answer with the source, target and options: ENODEV on a kernel without NFS (the test
// machines'), else ECONNREFUSED (no NFS server listens on 127.0.0.1).
func TestPublishMountsWithTheKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("mount(2) needs root (without it the kernel answers EPERM before it looks for NFS): make test runs as root, as the real node needs")
	}
	kernelSays := syscall.ENODEV.Error()
	if nfsInKernel(t) {
		kernelSays = syscall.ECONNREFUSED.Error()
	}
	c := csi.NewNodeClient(startPlugin(t, defaultOptions()))
	target := filepath.Join(t.TempDir(), "pods", "uid", "volumes", "mount")
	_, err := c.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{
		VolumeId: "share-1", TargetPath: target, VolumeCapability: mountCapability("nfsvers=4.1"),
		VolumeContext: map[string]string{"server": "127.0.0.1", "share": "/shares/share-1"},
	})
	if status.Code(err) != codes.Internal {
		t.Fatalf("publish: %v, want Internal", err)
	}
	msg := status.Convert(err).Message()
	for _, want := range []string{"mount failed: " + kernelSays, "127.0.0.1:/shares/share-1", target, "nfsvers=4.1", "addr=127.0.0.1"} {
		if !strings.Contains(msg, want) {
			t.Errorf("publish error lacks %q:\n%s", want, msg)
		}
	}
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		t.Errorf("target was not created: %v", err)
	}
	// Unpublish cleans up after a failed publish, and again after that.
	for range 2 {
		if _, err := c.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "share-1", TargetPath: target}); err != nil {
			t.Fatalf("unpublish: %v", err)
		}
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("target still there after unpublish (stat: %v)", err)
	}
}

// mountTmpfs mounts a tmpfs on dir (make test runs as root, as the real node needs).
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("cannot mount a tmpfs to stand for a published share (make test runs as root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// A target with a mount on it is published already; unpublish unmounts and removes it.
func TestPublishedTargetIsKeptThenUnmounted(t *testing.T) {
	c := csi.NewNodeClient(startPlugin(t, defaultOptions()))
	target := filepath.Join(t.TempDir(), "mount")
	mountTmpfs(t, target)
	ctx := context.Background()
	if _, err := c.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: "share-1", TargetPath: target, VolumeCapability: mountCapability(),
		VolumeContext: map[string]string{"server": "192.0.2.10", "share": "/shares/share-1"},
	}); err != nil {
		t.Fatalf("publish on a mounted target: %v, want success (published already)", err)
	}
	if _, err := c.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "share-1", TargetPath: target}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	if mounted, err := inMountTable(target); err != nil || mounted {
		t.Errorf("target still in the mount table (%v, %v)", mounted, err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("target still there after unpublish (stat: %v)", err)
	}
}

func TestUnpublishOfANonEmptyFolderFails(t *testing.T) {
	c := csi.NewNodeClient(startPlugin(t, defaultOptions()))
	target := t.TempDir()
	if err := os.WriteFile(filepath.Join(target, "data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := c.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: target})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "failed to unmount target") {
		t.Fatalf("unpublish of a folder holding data: %v, want Internal", err)
	}
}

func TestConcurrentCallOnSameVolumeIsAborted(t *testing.T) {
	o := defaultOptions()
	d := &driver{name: o.driverName, locks: &volumeLocks{held: map[string]bool{}}}
	s := &nodeServer{d: d}
	unlock, err := d.locks.lock("v", "/t")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, err = s.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: "/t"})
	if status.Code(err) != codes.Aborted {
		t.Fatalf("unpublish while another call holds the volume: %v, want Aborted", err)
	}
}

func TestVolumeStats(t *testing.T) {
	c := csi.NewNodeClient(startPlugin(t, defaultOptions()))
	ctx := context.Background()
	st, err := c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: t.TempDir()})
	if err != nil || len(st.GetUsage()) != 2 || st.GetUsage()[0].GetUnit() != csi.VolumeUsage_BYTES || st.GetUsage()[0].GetTotal() <= 0 {
		t.Fatalf("stats: %v, %v; want bytes and inodes with a positive total", st, err)
	}
	_, err = c.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: "/nonexistent/path"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("stats of a missing path: %v, want NotFound", err)
	}
}

func TestMountInfoUnescape(t *testing.T) {
	if got := unescapeMountInfo(`/var/lib/with\040space\134x`); got != `/var/lib/with space\x` {
		t.Fatalf("unescaped %q", got)
	}
}

func TestLogOmitsSecrets(t *testing.T) {
	req := &csi.NodePublishVolumeRequest{VolumeId: "v", Secrets: map[string]string{"password": "hunter2"}}
	logged := fmt.Sprint(withoutSecrets(req))
	if strings.Contains(logged, "hunter2") || !strings.Contains(logged, `volume_id:"v"`) {
		t.Fatalf("logged %s, want the request without its secrets", logged)
	}
	if req.Secrets["password"] != "hunter2" {
		t.Fatal("the request itself lost its secrets")
	}
}

func TestVersionsToTry(t *testing.T) {
	for _, tc := range []struct {
		options []string
		want    string
	}{
		{nil, "4.2 4.1 4.0 3"},
		{[]string{"hard,nosuid"}, "4.2 4.1 4.0 3"},
		{[]string{"hard", "nfsvers=4.1"}, ""},
		{[]string{"vers=3"}, ""},
		{[]string{"ro,v4.2"}, ""},
	} {
		if got := strings.Join(versionsToTry(tc.options), " "); got != tc.want {
			t.Errorf("versionsToTry(%q) = %q, want %q", tc.options, got, tc.want)
		}
	}
}
