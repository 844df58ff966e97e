package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runMainEnv makes the test binary run main() instead of the tests, so that tests can check
// exit codes of the real command line.
const runMainEnv = "STANDIN_LIVENESSPROBE_RUN_MAIN"

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
	code, out := runMain(t, "--csi-address=/x", "--no-such-flag")
	if code != 2 || !strings.Contains(out, "flag provided but not defined: -no-such-flag") {
		t.Fatalf("exit %d, output:\n%s\nwant exit 2 and the flag package's complaint", code, out)
	}
}

// Every flag upstream v2.16.0 declares (its own and component-base's logging flags) parses.
func TestAllUpstreamFlagsParse(t *testing.T) {
	fs := flag.NewFlagSet("livenessprobe", flag.ContinueOnError)
	o := addFlags(fs)
	err := fs.Parse([]string{
		"--probe-timeout=10s", "--csi-address=/csi/csi.sock", "--health-port=10305", "--metrics-address=",
		"--http-endpoint=", "--metrics-path=/m", "--v=2", "--vmodule=probe=5", "--logging-format=json",
		"--log-flush-frequency=3s", "--log-text-split-stream=false", "--log-text-info-buffer-size=0",
		"--log-json-split-stream=false", "--log-json-info-buffer-size=0", "--automaxprocs=false",
	})
	if err != nil {
		t.Fatalf("parsing upstream's flags: %v", err)
	}
	if o.probeTimeout != 10*time.Second || o.csiAddress != "/csi/csi.sock" || o.healthPort != "10305" || o.metricsPath != "/m" {
		t.Fatalf("parsed %+v, want the values given", o)
	}
	if err := o.logging.apply(); err != nil {
		t.Fatalf("logging flags: %v", err)
	}
	if addr, err := o.healthAddress(); err != nil || addr != "0.0.0.0:10305" {
		t.Fatalf("health address %q, %v; want 0.0.0.0:10305", addr, err)
	}
}

func TestHealthAddressRefusesConflictingFlags(t *testing.T) {
	for _, o := range []*options{
		{healthPort: "10305", httpEndpoint: "127.0.0.1:1"},
		{healthPort: defaultHealthPort, metricsAddress: ":2", httpEndpoint: "127.0.0.1:1"},
	} {
		if addr, err := o.healthAddress(); err == nil {
			t.Errorf("%+v gave address %q, want an error", o, addr)
		}
	}
	o := &options{healthPort: defaultHealthPort, httpEndpoint: "127.0.0.1:1"}
	if addr, err := o.healthAddress(); err != nil || addr != "127.0.0.1:1" {
		t.Fatalf("--http-endpoint alone gave %q, %v", addr, err)
	}
}

func TestEmptyDriverNameExitsNonZero(t *testing.T) {
	socket := startFakeDriver(t, &fakeDriver{name: ""})
	code, out := runMain(t, "--csi-address="+socket, "--http-endpoint=127.0.0.1:0")
	if code != 1 || !strings.Contains(out, "empty driver name") {
		t.Fatalf("exit %d, output:\n%s\nwant exit 1 naming the empty driver name", code, out)
	}
}
