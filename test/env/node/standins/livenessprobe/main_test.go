package main

import (
	"flag"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standintest"
)

func TestMain(m *testing.M) {
	standintest.Main(m, main)
}

func TestUnknownFlagExitsAsFlagPackageDoes(t *testing.T) {
	standintest.WantExit(t, 2, "flag provided but not defined: -no-such-flag", "--csi-address=/x", "--no-such-flag")
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
	if err := o.logging.Apply(); err != nil {
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
	socket := startFakeDriver(t, &standintest.FakeDriver{Name: ""})
	standintest.WantExit(t, 1, "empty driver name", "--csi-address="+socket, "--http-endpoint=127.0.0.1:0")
}
