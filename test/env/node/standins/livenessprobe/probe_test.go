package main

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standintest"
)

const fakeDriverName = "fake.csi.test"

// startFakeDriver serves d on a socket in a short temporary folder and returns the socket's path.
func startFakeDriver(t *testing.T, d *standintest.FakeDriver) string {
	t.Helper()
	return d.Serve(t, standintest.SocketDir(t))
}

// startProbe starts the HTTP servers as main does, for a driver on socket.
func startProbe(t *testing.T, o *options) *servers {
	t.Helper()
	name, err := driverName(context.Background(), o.csiAddress)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := o.healthAddress()
	if err != nil {
		t.Fatal(err)
	}
	s, err := startServers(o, name, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

func TestHealthzFollowsDriverProbe(t *testing.T) {
	d := &standintest.FakeDriver{Name: fakeDriverName}
	socket := startFakeDriver(t, d)
	s := startProbe(t, &options{csiAddress: socket, probeTimeout: 10 * time.Second, healthPort: defaultHealthPort,
		httpEndpoint: "127.0.0.1:0", metricsPath: "/metrics"})
	url := "http://" + s.healthAddr + "/healthz"
	for _, c := range []struct {
		name     string
		ready    *wrapperspb.BoolValue
		err      error
		wantCode int
		wantBody string
	}{
		{"ready", wrapperspb.Bool(true), nil, http.StatusOK, "ok"},
		{"ready left out", nil, nil, http.StatusOK, "ok"},
		{"not ready", wrapperspb.Bool(false), nil, http.StatusInternalServerError, "driver responded but is not ready"},
		{"probe error", nil, status.Error(codes.FailedPrecondition, "backend unreachable"), http.StatusInternalServerError,
			"rpc error: code = FailedPrecondition desc = backend unreachable"},
	} {
		d.SetProbe(c.ready, c.err)
		if code, body := standintest.Get(t, url); code != c.wantCode || body != c.wantBody {
			t.Errorf("%s: healthz %d %q, want %d %q", c.name, code, body, c.wantCode, c.wantBody)
		}
	}
	_, metrics := standintest.Get(t, "http://"+s.healthAddr+"/metrics")
	want := `csi_sidecar_operations_seconds_count{driver_name="fake.csi.test",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe"} 3`
	if !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s:\n%s", want, metrics)
	}
}

func TestHealthzFailsWhenDriverIsGone(t *testing.T) {
	d := &standintest.FakeDriver{Name: fakeDriverName}
	socket := startFakeDriver(t, d)
	s := startProbe(t, &options{csiAddress: socket, probeTimeout: 200 * time.Millisecond, healthPort: defaultHealthPort,
		httpEndpoint: "127.0.0.1:0", metricsPath: "/metrics"})
	if err := os.Remove(socket); err != nil {
		t.Fatal(err)
	}
	code, body := standintest.Get(t, "http://"+s.healthAddr+"/healthz")
	if code != http.StatusInternalServerError || !strings.Contains(body, socket) {
		t.Fatalf("healthz without a driver: %d %q, want 500 naming the socket", code, body)
	}
}

// With the deprecated --metrics-address, metrics move to their own server and /healthz keeps
// --health-port.
func TestSeparateMetricsAddress(t *testing.T) {
	socket := startFakeDriver(t, &standintest.FakeDriver{Name: fakeDriverName})
	s := startProbe(t, &options{csiAddress: socket, probeTimeout: 10 * time.Second, healthPort: "0",
		metricsAddress: "127.0.0.1:0", metricsPath: "/m"})
	if code, body := standintest.Get(t, "http://"+s.healthAddr+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz: %d %q", code, body)
	}
	if code, _ := standintest.Get(t, "http://"+s.healthAddr+"/m"); code != http.StatusNotFound {
		t.Errorf("metrics on the health server: %d, want 404", code)
	}
	if code, body := standintest.Get(t, "http://"+s.metricsAddr+"/m"); code != http.StatusOK || !strings.Contains(body, "csi_sidecar_operations_seconds") {
		t.Errorf("metrics server: %d\n%s", code, body)
	}
}
