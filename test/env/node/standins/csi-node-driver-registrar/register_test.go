package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standintest"
)

const (
	fakeDriverName   = "fake.csi.test"
	hostDriverSocket = "/var/lib/kubelet/plugins/fake.csi.test/csi.sock"
)

// optionsFor are the options of a registrar whose registration socket goes into dir, for a fake
// driver named driverName that serves on a socket in dir too.
func optionsFor(t *testing.T, dir, driverName string) *options {
	t.Helper()
	return &options{
		csiAddress:              (&standintest.FakeDriver{Name: driverName}).Serve(t, dir),
		pluginRegistrationPath:  dir,
		kubeletRegistrationPath: hostDriverSocket,
		operationTimeout:        10 * time.Second,
	}
}

// failures records what the registration server reports as failed registrations.
type failures struct {
	mu   sync.Mutex
	errs []error
}

func (f *failures) record(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, err)
}

func (f *failures) list() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.errs)
}

// startRegistrar starts the registrar against a fake driver, both with their sockets in a short
// temporary folder; the registrar stops at the end of the test.
func startRegistrar(t *testing.T, httpAddr string) (*registrar, *failures, context.CancelFunc) {
	t.Helper()
	o := optionsFor(t, standintest.SocketDir(t), fakeDriverName)
	ctx, cancel := context.WithCancel(context.Background())
	f := &failures{}
	r, err := start(ctx, o, httpAddr, f.record)
	if err != nil {
		cancel()
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		_ = r.wait()
	})
	return r, f, cancel
}

func registrationClient(t *testing.T, socket string) registerapi.RegistrationClient {
	t.Helper()
	return registerapi.NewRegistrationClient(standintest.Dial(t, socket))
}

func TestGetInfoAnswersAsUpstream(t *testing.T) {
	r, _, _ := startRegistrar(t, "")
	wantSocket := filepath.Join(filepath.Dir(r.socketPath), fakeDriverName+"-reg.sock")
	if r.socketPath != wantSocket {
		t.Fatalf("registration socket %s, want %s", r.socketPath, wantSocket)
	}
	fi, err := os.Stat(r.socketPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("registration socket mode %s, want no access for group and others", fi.Mode())
	}
	info, err := registrationClient(t, r.socketPath).GetInfo(context.Background(), &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: %v", err)
	}
	if info.Type != registerapi.CSIPlugin || info.Name != fakeDriverName || info.Endpoint != hostDriverSocket ||
		!slices.Equal(info.SupportedVersions, []string{"1.0.0"}) {
		t.Fatalf("GetInfo answered %+v, want type %s, name %s, endpoint %s, versions [1.0.0]",
			info, registerapi.CSIPlugin, fakeDriverName, hostDriverSocket)
	}
}

func TestNotifyRegistrationStatusReportsFailureOnly(t *testing.T) {
	r, f, _ := startRegistrar(t, "")
	c := registrationClient(t, r.socketPath)
	if _, err := c.NotifyRegistrationStatus(context.Background(), &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if errs := f.list(); len(errs) != 0 {
		t.Fatalf("a successful registration was reported as failed: %v", errs)
	}
	if _, err := c.NotifyRegistrationStatus(context.Background(), &registerapi.RegistrationStatus{
		PluginRegistered: false, Error: "kubelet says no",
	}); err != nil {
		t.Fatal(err)
	}
	errs := f.list()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "kubelet says no") {
		t.Fatalf("failures %v, want one carrying the kubelet's error", errs)
	}
}

func getHealthz(t *testing.T, addr string) (int, string) {
	t.Helper()
	return standintest.Get(t, "http://"+addr+"/healthz")
}

func TestHealthzChecksRegistrationSocket(t *testing.T) {
	r, _, _ := startRegistrar(t, "127.0.0.1:0")
	if code, body := getHealthz(t, r.httpAddr); code != http.StatusOK || body != "ok" {
		t.Fatalf("healthz with a live socket: %d %q, want 200 \"ok\"", code, body)
	}
	if err := os.Remove(r.socketPath); err != nil {
		t.Fatal(err)
	}
	if code, body := getHealthz(t, r.httpAddr); code != http.StatusNotFound || body != "registration socket does not exist" {
		t.Fatalf("healthz without the socket: %d %q, want 404", code, body)
	}
	if err := os.WriteFile(r.socketPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := getHealthz(t, r.httpAddr); code != http.StatusInternalServerError || !strings.Contains(body, "not a socket") {
		t.Fatalf("healthz with a plain file at the socket's path: %d %q, want 500 saying it is not a socket", code, body)
	}
}

func TestHealthzFailsWhenSocketServesAnotherDriver(t *testing.T) {
	dir := standintest.SocketDir(t)
	lis, err := net.Listen("unix", filepath.Join(dir, "reg.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, &registrationServer{driverName: "other.csi.test"})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	h := &healthz{socketPath: filepath.Join(dir, "reg.sock"), driverName: fakeDriverName, timeout: 10 * time.Second}
	err = h.checkRegistrationServer(context.Background())
	if err == nil || !strings.Contains(err.Error(), "invalid driver name") {
		t.Fatalf("check of a socket serving another driver: %v, want an invalid driver name error", err)
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	dir := standintest.SocketDir(t)
	stale := filepath.Join(dir, fakeDriverName+"-reg.sock")
	lis, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = lis.Close()
	o := optionsFor(t, dir, fakeDriverName)
	ctx, cancel := context.WithCancel(context.Background())
	r, err := start(ctx, o, "", func(error) {})
	if err != nil {
		cancel()
		t.Fatalf("start with a stale socket: %v", err)
	}
	if _, err := registrationClient(t, r.socketPath).GetInfo(context.Background(), &registerapi.InfoRequest{}); err != nil {
		t.Fatalf("GetInfo on the new socket: %v", err)
	}
	cancel()
	if err := r.wait(); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the registration socket is still there after stopping (stat: %v)", err)
	}
}

func TestPlainFileAtSocketPathIsRefused(t *testing.T) {
	dir := standintest.SocketDir(t)
	if err := os.WriteFile(filepath.Join(dir, fakeDriverName+"-reg.sock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	o := optionsFor(t, dir, fakeDriverName)
	if _, err := start(context.Background(), o, "", func(error) {}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("start: %v, want an error saying the path is not a socket", err)
	}
}

func TestEmptyDriverNameFails(t *testing.T) {
	o := optionsFor(t, standintest.SocketDir(t), "")
	if _, err := start(context.Background(), o, "", func(error) {}); err == nil || !strings.Contains(err.Error(), "empty driver name") {
		t.Fatalf("start: %v, want an empty driver name error", err)
	}
}

// A failed registration ends the real program with exit code 1, as upstream's does.
func TestFailedRegistrationExitsNonZero(t *testing.T) {
	dir := standintest.SocketDir(t)
	driver := (&standintest.FakeDriver{Name: fakeDriverName}).Serve(t, dir)
	done := make(chan struct{})
	var code int
	var out string
	go func() {
		defer close(done)
		code, out = standintest.RunMain(t, "--csi-address="+driver, "--plugin-registration-path="+dir,
			"--kubelet-registration-path="+hostDriverSocket, "--timeout=10s", "--v=2")
	}()
	socket := filepath.Join(dir, fakeDriverName+"-reg.sock")
	// The program exits while it handles the call: the call itself fails.
	_, _ = registrationClient(t, socket).NotifyRegistrationStatus(context.Background(),
		&registerapi.RegistrationStatus{PluginRegistered: false, Error: "driver name taken"})
	<-done
	if code != 1 || !strings.Contains(out, "driver name taken") {
		t.Fatalf("exit %d, output:\n%s\nwant exit 1 with the kubelet's error", code, out)
	}
}
