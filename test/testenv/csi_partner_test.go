package testenv

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
)

// TestPartnerProbeSpeaksGRPC calls the stand-in NFS partner as a gRPC client does (HTTP/2 with
// prior knowledge on a unix socket) and checks the framing, the messages and the trailers.
func TestPartnerProbeSpeaksGRPC(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "csi-nfs.sock")
	p, err := startPartnerProbe(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{
		Protocols: &protocols,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	call := func(method string) (status string, msg []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, "http://csi/"+method, bytes.NewReader([]byte{0, 0, 0, 0, 0}))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("TE", "trailers")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/grpc" {
			t.Fatalf("%s: HTTP/%d %d %q", method, resp.ProtoMajor, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if len(body) >= 5 {
			msg = body[5:]
		}
		return resp.Trailer.Get("Grpc-Status"), msg
	}

	if status, msg := call("csi.v1.Identity/Probe"); status != "0" || len(msg) != 0 {
		t.Errorf("Probe: grpc-status %q, message %x; want 0 and an empty ProbeResponse (ready)", status, msg)
	}
	want := []byte("\x0a\x0enfs.csi.k8s.io\x12\x03sim")
	if status, msg := call("csi.v1.Identity/GetPluginInfo"); status != "0" || !bytes.Equal(msg, want) {
		t.Errorf("GetPluginInfo: grpc-status %q, message %x; want 0 and %x", status, msg, want)
	}
	if status, _ := call("csi.v1.Node/NodePublishVolume"); status != grpcUnimplemented {
		t.Errorf("NodePublishVolume: grpc-status %q, want %s (Unimplemented)", status, grpcUnimplemented)
	}
}
