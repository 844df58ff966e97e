package controllers

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

func TestListenAddress(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8443":   "127.0.0.1:8443",
		"10.128.0.7:8444":  "10.128.0.7:8444",
		"fd01::5:8444":     "[fd01::5]:8444",
		"[fd01::5]:8444":   "[fd01::5]:8444",
		":8444":            ":8444",
		"localhost:8444":   "localhost:8444",
		"not an address":   "not an address",
		"fd01::zz:8444":    "fd01::zz:8444",
		"2001:db8::1:8080": "[2001:db8::1]:8080",
	} {
		if got := listenAddress(in); got != want {
			t.Errorf("listenAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

// The probe endpoint answers /healthz and /readyz (503 until the replica leads) and nothing
// else: metrics stay on the loopback endpoint.
func TestProbeAndMetricsEndpoints(t *testing.T) {
	ready := make(chan struct{})
	probe, err := serveHealth("127.0.0.1:0", ready, false, false)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	metrics, err := serveHealth("127.0.0.1:0", ready, true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer metrics.Close()
	get := func(srv *http.Server, path string) int {
		t.Helper()
		resp, err := http.Get("http://" + srv.Addr + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		srv  *http.Server
		path string
		want int
	}{
		{probe, "/healthz", 200}, {probe, "/readyz", 503}, {probe, "/metrics", 404},
		{metrics, "/healthz", 200}, {metrics, "/readyz", 503}, {metrics, "/metrics", 200},
	} {
		if got := get(c.srv, c.path); got != c.want {
			t.Errorf("%s%s: HTTP %d, want %d", c.srv.Addr, c.path, got, c.want)
		}
	}
	close(ready)
	if got := get(probe, "/readyz"); got != 200 {
		t.Errorf("/readyz once leading: HTTP %d, want 200", got)
	}
}

func TestLeaderIdentity(t *testing.T) {
	if got := LeaderIdentity(func(k string) string { return map[string]string{"POD_NAME": "manila-csi-driver-operator-7d9f-x2"}[k] }); got != "manila-csi-driver-operator-7d9f-x2" {
		t.Errorf("with POD_NAME: %q, want the pod's name", got)
	}
	none := func(string) string { return "" }
	a, b := LeaderIdentity(none), LeaderIdentity(none)
	host, _ := os.Hostname()
	if a == b || !strings.HasPrefix(a, host+"_") || !strings.HasPrefix(b, host+"_") {
		t.Errorf("two processes on one host got %q and %q, want the host name with different suffixes", a, b)
	}
}
