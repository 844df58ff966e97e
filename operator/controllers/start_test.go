package controllers

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/platform"
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
	probe, err := serveHealth("127.0.0.1:0", ready, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	metrics, err := serveHealth("127.0.0.1:0", ready, metricsRegistry(), false)
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

// What each mode implies is decided in one place: a companion writes StorageClasses only,
// under its own field manager, with one CIDR in nfs-shareClient, reports on the ManilaCompanion
// and starts only the informers its RBAC allows; driver mode is the opposite on each count.
func TestModeProfile(t *testing.T) {
	driver, companion := profileOf(platform.ModeDriver), profileOf(platform.ModeCompanion)
	if !driver.deploysDriver || !driver.listShareClients || driver.self != nil || driver.writes != nil || driver.informers != nil ||
		driver.fieldManager != operator.OperatorName || driver.names.StorageClassPrefix != operator.StorageClassPrefix {
		t.Errorf("driver mode: %+v", driver)
	}
	if companion.deploysDriver || companion.listShareClients || companion.self == nil || companion.self.Kind != operator.CompanionKind ||
		companion.fieldManager != operator.CompanionOperatorName || companion.names.StorageClassPrefix != operator.CompanionStorageClassPrefix ||
		len(companion.writes) != 1 || companion.writes[0].Kind != "StorageClass" || companion.informers == nil {
		t.Errorf("companion mode: %+v", companion)
	}
}

// The StorageClass lint reads the share types the Manila controller published, nothing of its
// struct: none before the first check or after a failed one.
func TestManilaFindingsShareTypeNames(t *testing.T) {
	var p machinery.Published[manilaFindings]
	if got := p.Load().shareTypeNames(); got != nil {
		t.Errorf("before the first check: %v", got)
	}
	p.Publish(&manilaFindings{ShareTypes: []operator.ShareType{{Name: "default"}, {Name: "cephfs"}}})
	if got := p.Load().shareTypeNames(); strings.Join(got, ",") != "default,cephfs" {
		t.Errorf("after a check: %v", got)
	}
	p.Publish(&manilaFindings{Err: &ManilaError{Reason: ReasonUnreachable, Message: "timed out"}})
	if got := p.Load().shareTypeNames(); got != nil {
		t.Errorf("after a failed check: %v", got)
	}
}
