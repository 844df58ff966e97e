package standintest

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FakeDriver is a CSI driver's identity service: it names itself Name and answers Probe as
// SetProbe last said (ready, with "ready" left out, until then).
type FakeDriver struct {
	csi.UnimplementedIdentityServer
	Name string

	mu       sync.Mutex
	ready    *wrapperspb.BoolValue
	probeErr error
}

// SetProbe sets what Probe answers: err when it is not nil, else ready.
func (d *FakeDriver) SetProbe(ready *wrapperspb.BoolValue, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ready, d.probeErr = ready, err
}

func (d *FakeDriver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.Name, VendorVersion: "test"}, nil
}

func (d *FakeDriver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.probeErr != nil {
		return nil, d.probeErr
	}
	return &csi.ProbeResponse{Ready: d.ready}, nil
}

// Serve serves d on csi.sock in dir until the test ends and returns the socket's path.
func (d *FakeDriver) Serve(t *testing.T, dir string) string {
	t.Helper()
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
