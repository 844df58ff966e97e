package main

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/operator/probe"
)

// listen returns the address of a TCP listener on loopback that accepts until the test ends.
func listen(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

// closedPort returns a loopback address nothing listens on: a listener's, once closed.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func runProbe(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"probe", "nfs"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestProbeNFSReportsEachTarget(t *testing.T) {
	open, closed := listen(t), closedPort(t)
	log := filepath.Join(t.TempDir(), "termination-log")

	code, out, errOut := runProbe(t, "--target", open, "--target", closed, "--timeout", "3s", "--termination-log", log)
	if code != exitUnreachable {
		t.Fatalf("one target closed: exit %d, want %d; stdout %q, stderr %q", code, exitUnreachable, out, errOut)
	}
	var r probe.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not the JSON result: %v: %q", err, out)
	}
	if len(r.Targets) != 2 || r.Targets[0].Address != open || r.Targets[1].Address != closed {
		t.Fatalf("targets %+v, want %s then %s", r.Targets, open, closed)
	}
	if !r.Targets[0].Reachable || r.Targets[0].Error != "" {
		t.Errorf("open port %s: %+v, want reachable with no error", open, r.Targets[0])
	}
	if r.Targets[1].Reachable || !strings.Contains(r.Targets[1].Error, "connection refused") {
		t.Errorf("closed port %s: %+v, want unreachable, connection refused", closed, r.Targets[1])
	}
	if want := "this node cannot reach " + closed + ": connect: connection refused"; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q, want it to say %q", errOut, want)
	}
	written, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if string(written) != out {
		t.Errorf("termination log %q differs from stdout %q", written, out)
	}

	// Every target reached: exit 0, and the log holds this run's result, not the last one's.
	code, out, errOut = runProbe(t, "--target", open, "--termination-log", log)
	if code != exitOK || errOut != "" {
		t.Fatalf("open target: exit %d, stderr %q", code, errOut)
	}
	if written, _ := os.ReadFile(log); string(written) != out || !strings.Contains(out, `"reachable":true`) {
		t.Errorf("termination log %q, stdout %q: want the same result, reachable", written, out)
	}
}

// Outside a pod there is no termination log: the result goes to stdout alone.
func TestProbeNFSWithoutTerminationLog(t *testing.T) {
	open := listen(t)
	code, out, errOut := runProbe(t, "--target", open, "--termination-log", filepath.Join(t.TempDir(), "missing", "termination-log"))
	if code != exitOK || errOut != "" || !strings.Contains(out, `"address":"`+open+`","reachable":true`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestProbeNFSUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "--target: Required value"},
		{[]string{"--target", "10.0.0.5"}, `--target: Invalid value: "10.0.0.5": must be ADDR:PORT`},
		{[]string{"--target", "10.0.0.5:2049", "--target", "10.0.0.6:nfs"}, `--target: Invalid value: "10.0.0.6:nfs": port "nfs" must be a number`},
		{[]string{"--target", "10.0.0.5:70000"}, `--target: Invalid value: "10.0.0.5:70000"`},
		{[]string{"--target", "10.0.0.5:2049", "--timeout", "0s"}, `--timeout: Invalid value: "0s"`},
		{[]string{"--target", "10.0.0.5:2049", "extra"}, "unknown command"},
	} {
		code, out, errOut := runProbe(t, tt.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d and %q", tt.args, code, out, errOut, exitUsage, tt.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"probe"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "a probe is required: nfs") {
		t.Errorf("probe alone: exit %d, %q", code, errOut.String())
	}
}
