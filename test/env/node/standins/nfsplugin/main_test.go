package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"
)

// runMainEnv makes the test binary run main() instead of the tests, so that tests can check
// exit codes of the real command line.
const runMainEnv = "STANDIN_NFSPLUGIN_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		// Drop the testing package's flags: main() sees the command line upstream's sees.
		flag.CommandLine = flag.NewFlagSet(os.Args[0], flag.ExitOnError)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs main() with args in a child process and returns its exit code and output.
func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	default:
		t.Fatalf("running %v: %v", args, err)
		return -1, ""
	}
}

func TestUnknownFlagExitsAsFlagPackageDoes(t *testing.T) {
	code, out := runMain(t, "--nodeid=n", "--no-such-flag")
	if code != 2 || !strings.Contains(out, "flag provided but not defined: -no-such-flag") {
		t.Fatalf("exit %d, output:\n%s\nwant exit 2 and the flag package's complaint", code, out)
	}
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
	dir := socketDir(t)
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
	dir := socketDir(t)
	socket := filepath.Join(dir, "csi.sock")
	cmd := exec.Command(os.Args[0], "--v=2", "--nodeid=node-1", "--endpoint=unix://"+socket, "--mount-permissions=0777")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	conn := dial(t, socket)
	info, err := csi.NewIdentityClient(conn).GetPluginInfo(context.Background(), &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != "nfs.csi.k8s.io" {
		t.Fatalf("GetPluginInfo: %v, %v; want nfs.csi.k8s.io\n%s", info, err, out.String())
	}
	node, err := csi.NewNodeClient(conn).NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	if err != nil || node.GetNodeId() != "node-1" {
		t.Fatalf("NodeGetInfo: %v, %v; want node-1", node, err)
	}
}
