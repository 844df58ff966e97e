package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const fakeDriverName = "fake.csi.test"

// fakeDriver is a CSI driver's identity service whose Probe answer the test sets.
type fakeDriver struct {
	csi.UnimplementedIdentityServer
	name string

	mu       sync.Mutex
	ready    *wrapperspb.BoolValue
	probeErr error
}

func (d *fakeDriver) set(ready *wrapperspb.BoolValue, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ready, d.probeErr = ready, err
}

func (d *fakeDriver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "test"}, nil
}

func (d *fakeDriver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.probeErr != nil {
		return nil, d.probeErr
	}
	return &csi.ProbeResponse{Ready: d.ready}, nil
}

// startFakeDriver serves d on a unix socket in a short temporary folder (socket paths are
// limited to 107 bytes) and returns the socket's path.
func startFakeDriver(t *testing.T, d *fakeDriver) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	path := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, d)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return path
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

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestHealthzFollowsDriverProbe(t *testing.T) {
	d := &fakeDriver{name: fakeDriverName}
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
		d.set(c.ready, c.err)
		if code, body := get(t, url); code != c.wantCode || body != c.wantBody {
			t.Errorf("%s: healthz %d %q, want %d %q", c.name, code, body, c.wantCode, c.wantBody)
		}
	}
	_, metrics := get(t, "http://"+s.healthAddr+"/metrics")
	want := `csi_sidecar_operations_seconds_count{driver_name="fake.csi.test",grpc_status_code="OK",method_name="/csi.v1.Identity/Probe"} 3`
	if !strings.Contains(metrics, want) {
		t.Errorf("metrics lack %s:\n%s", want, metrics)
	}
}

func TestHealthzFailsWhenDriverIsGone(t *testing.T) {
	d := &fakeDriver{name: fakeDriverName}
	socket := startFakeDriver(t, d)
	s := startProbe(t, &options{csiAddress: socket, probeTimeout: 200 * time.Millisecond, healthPort: defaultHealthPort,
		httpEndpoint: "127.0.0.1:0", metricsPath: "/metrics"})
	if err := os.Remove(socket); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, "http://"+s.healthAddr+"/healthz")
	if code != http.StatusInternalServerError || !strings.Contains(body, socket) {
		t.Fatalf("healthz without a driver: %d %q, want 500 naming the socket", code, body)
	}
}

// With the deprecated --metrics-address, metrics move to their own server and /healthz keeps
// --health-port.
func TestSeparateMetricsAddress(t *testing.T) {
	socket := startFakeDriver(t, &fakeDriver{name: fakeDriverName})
	s := startProbe(t, &options{csiAddress: socket, probeTimeout: 10 * time.Second, healthPort: "0",
		metricsAddress: "127.0.0.1:0", metricsPath: "/m"})
	if code, body := get(t, "http://"+s.healthAddr+"/healthz"); code != http.StatusOK {
		t.Fatalf("healthz: %d %q", code, body)
	}
	if code, _ := get(t, "http://"+s.healthAddr+"/m"); code != http.StatusNotFound {
		t.Errorf("metrics on the health server: %d, want 404", code)
	}
	if code, body := get(t, "http://"+s.metricsAddr+"/m"); code != http.StatusOK || !strings.Contains(body, "csi_sidecar_operations_seconds") {
		t.Errorf("metrics server: %d\n%s", code, body)
	}
}
