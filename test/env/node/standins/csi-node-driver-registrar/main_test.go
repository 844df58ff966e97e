package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runMainEnv makes the test binary run main() instead of the tests, so that tests can check
// exit codes of the real command line.
const runMainEnv = "STANDIN_REGISTRAR_RUN_MAIN"

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
	code, out := runMain(t, "--kubelet-registration-path=/x", "--no-such-flag")
	if code != 2 || !strings.Contains(out, "flag provided but not defined: -no-such-flag") {
		t.Fatalf("exit %d, output:\n%s\nwant exit 2 and the flag package's complaint", code, out)
	}
}

// Every flag upstream v2.14.0 declares (its own and component-base's logging flags) parses;
// --version makes main print and exit before it connects anywhere.
func TestAllUpstreamFlagsParse(t *testing.T) {
	code, out := runMain(t,
		"--connection-timeout=5s", "--timeout=2s", "--csi-address=/csi/csi.sock",
		"--plugin-registration-path=/registration", "--kubelet-registration-path=/var/lib/kubelet/plugins/x/csi.sock",
		"--health-port=0", "--http-endpoint=127.0.0.1:10307", "--mode=", "--enable-pprof=false",
		"--v=2", "--vmodule=main=4", "--logging-format=text", "--log-flush-frequency=3s",
		"--log-text-split-stream=false", "--log-text-info-buffer-size=0", "--log-json-split-stream=false",
		"--log-json-info-buffer-size=0", "--automaxprocs", "--version")
	if code != 0 || !strings.Contains(out, version) {
		t.Fatalf("exit %d, output:\n%s\nwant exit 0 and the version", code, out)
	}
}

func TestMissingKubeletRegistrationPathFails(t *testing.T) {
	code, out := runMain(t, "--v=5", "--csi-address=/nonexistent.sock")
	if code != 1 || !strings.Contains(out, "kubelet-registration-path is a required parameter") {
		t.Fatalf("exit %d, output:\n%s\nwant exit 1 naming the missing flag", code, out)
	}
}

func TestProbeModeExitsZero(t *testing.T) {
	code, out := runMain(t, "--kubelet-registration-path=/x", "--mode=kubelet-registration-probe")
	if code != 0 {
		t.Fatalf("exit %d, output:\n%s\nwant exit 0 (deprecated no-op mode)", code, out)
	}
}

func TestAlphaLoggingOptionsAreRefused(t *testing.T) {
	code, out := runMain(t, "--kubelet-registration-path=/x", "--log-text-split-stream")
	if code != 1 || !strings.Contains(out, "LoggingAlphaOptions") {
		t.Fatalf("exit %d, output:\n%s\nwant exit 1 naming the feature gate", code, out)
	}
}

func TestHealthPortAndHTTPEndpointExcludeEachOther(t *testing.T) {
	o := &options{healthPort: 9809, httpEndpoint: "127.0.0.1:1"}
	if _, err := o.httpAddress(); err == nil {
		t.Fatal("both --health-port and --http-endpoint were accepted")
	}
	o = &options{healthPort: 9809}
	if addr, err := o.httpAddress(); err != nil || addr != ":9809" {
		t.Fatalf("--health-port=9809 gave %q, %v; want \":9809\"", addr, err)
	}
}
