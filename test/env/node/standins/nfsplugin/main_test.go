package main

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standintest"
)

func TestMain(m *testing.M) {
	standintest.Main(m, main)
}

func TestUnknownFlagExitsAsFlagPackageDoes(t *testing.T) {
	standintest.WantExit(t, 2, "flag provided but not defined: -no-such-flag", "--nodeid=n", "--no-such-flag")
}

// Every flag upstream v4.11.0's nfsplugin declares, and klog's, parses.
func TestAllUpstreamFlagsParse(t *testing.T) {
	fs := flag.NewFlagSet("nfsplugin", flag.ContinueOnError)
	klog.InitFlags(fs)
	o := addFlags(fs)
	err := fs.Parse([]string{
		"--v=2", "--nodeid=node-1", "--endpoint=unix:///plugin/csi.sock", "--mount-permissions=0777",
		"--drivername=nfs.csi.k8s.io", "--working-mount-dir=/tmp", "--default-ondelete-policy=delete",
		"--vol-stats-cache-expire-in-minutes=5", "--remove-archived-volume-path=true",
		"--use-tar-command-in-snapshot=false", "--logtostderr=true", "--vmodule=node=4",
	})
	if err != nil {
		t.Fatalf("parsing upstream's flags: %v", err)
	}
	if o.nodeID != "node-1" || o.endpoint != "unix:///plugin/csi.sock" || o.mountPermissions != 0o777 || o.driverName != "nfs.csi.k8s.io" {
		t.Fatalf("parsed %+v, want the values given (mount permissions 0777 read as octal)", o)
	}
	fs = flag.NewFlagSet("nfsplugin", flag.ContinueOnError)
	if o := addFlags(fs); o.driverName != "nfs.csi.k8s.io" || o.endpoint != "unix://tmp/csi.sock" {
		t.Fatalf("defaults %+v, want upstream's", o)
	}
}

func TestEndpointsParseAsUpstream(t *testing.T) {
	dir := standintest.SocketDir(t)
	lis, err := listen("unix:/" + dir + "/a.sock") // unix://<dir without its leading slash>
	if err != nil {
		t.Fatal(err)
	}
	if got := lis.Addr().String(); got != dir+"/a.sock" {
		t.Errorf("unix://%s/a.sock listens on %s, want %s/a.sock", dir[1:], got, dir)
	}
	_ = lis.Close()
	for _, bad := range []string{"/plugin/csi.sock", "unix://", "http://x"} {
		if _, err := listen(bad); err == nil {
			t.Errorf("endpoint %q was accepted", bad)
		}
	}
}

// The real program serves the three services on --endpoint with upstream's driver name.
func TestMainServes(t *testing.T) {
	dir := standintest.SocketDir(t)
	socket := filepath.Join(dir, "csi.sock")
	cmd := standintest.Command("--v=2", "--nodeid=node-1", "--endpoint=unix://"+socket, "--mount-permissions=0777")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	conn := standintest.Dial(t, socket)
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(context.Background(), &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != "nfs.csi.k8s.io" {
		t.Fatalf("GetPluginInfo: %v, %v; want nfs.csi.k8s.io\n%s", info, err, out.String())
	}
	node, err := csi.NewNodeClient(conn).NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	if err != nil || node.GetNodeId() != "node-1" {
		t.Fatalf("NodeGetInfo: %v, %v; want node-1", node, err)
	}
}
