package main

import (
	"testing"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standintest"
)

func TestMain(m *testing.M) {
	standintest.Main(m, main)
}

func TestUnknownFlagExitsAsFlagPackageDoes(t *testing.T) {
	standintest.WantExit(t, 2, "flag provided but not defined: -no-such-flag", "--kubelet-registration-path=/x", "--no-such-flag")
}

// Every flag upstream v2.14.0 declares (its own and component-base's logging flags) parses;
// --version makes main print and exit before it connects anywhere.
func TestAllUpstreamFlagsParse(t *testing.T) {
	standintest.WantExit(t, 0, version,
		"--connection-timeout=5s", "--timeout=2s", "--csi-address=/csi/csi.sock",
		"--plugin-registration-path=/registration", "--kubelet-registration-path=/var/lib/kubelet/plugins/x/csi.sock",
		"--health-port=0", "--http-endpoint=127.0.0.1:10307", "--mode=", "--enable-pprof=false",
		"--v=2", "--vmodule=main=4", "--logging-format=text", "--log-flush-frequency=3s",
		"--log-text-split-stream=false", "--log-text-info-buffer-size=0", "--log-json-split-stream=false",
		"--log-json-info-buffer-size=0", "--automaxprocs", "--version")
}

func TestMissingKubeletRegistrationPathFails(t *testing.T) {
	standintest.WantExit(t, 1, "kubelet-registration-path is a required parameter", "--v=5", "--csi-address=/nonexistent.sock")
}

// The deprecated probe mode is a no-op that succeeds.
func TestProbeModeExitsZero(t *testing.T) {
	standintest.WantExit(t, 0, "", "--kubelet-registration-path=/x", "--mode=kubelet-registration-probe")
}

func TestAlphaLoggingOptionsAreRefused(t *testing.T) {
	standintest.WantExit(t, 1, "LoggingAlphaOptions", "--kubelet-registration-path=/x", "--log-text-split-stream")
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
