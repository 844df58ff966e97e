package testenv

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// The Manila CSI plugin forwards the CSI Identity service's Probe to its NFS partner plugin
// (--fwdendpoint), also when it serves the controller service only: the controller Deployment
// runs the partner (csi-driver-nfs) beside it for that. csi-provisioner probes the plugin before
// it does anything else, so a controller without a partner never provisions.
//
// partnerProbe stands in for the partner's identity service and nothing else: it answers Probe
// (ready) and GetPluginInfo, over gRPC on a unix socket, with only the standard library
// (unencrypted HTTP/2 with prior knowledge is what gRPC clients speak on unix sockets). Node
// calls, which would mount NFS exports, are answered Unimplemented: a sim cluster's nodes are
// fake and mount nothing.
type partnerProbe struct {
	srv *http.Server
	l   net.Listener
}

// gRPC status codes used here.
const (
	grpcOK            = "0"
	grpcUnimplemented = "12"
)

func startPartnerProbe(socket string) (*partnerProbe, error) {
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	p := &partnerProbe{l: l, srv: &http.Server{
		Handler:           http.HandlerFunc(servePartnerProbe),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
	}}
	go func() {
		if err := p.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = l.Close()
		}
	}()
	return p, nil
}

func (p *partnerProbe) stop() { _ = p.srv.Close() }

func servePartnerProbe(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		http.Error(w, "gRPC only", http.StatusUnsupportedMediaType)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	var msg []byte
	status := grpcOK
	switch r.URL.Path {
	case "/csi.v1.Identity/Probe":
		// ProbeResponse{}: "ready" left out means ready.
	case "/csi.v1.Identity/GetPluginInfo":
		// GetPluginInfoResponse{name: 1, vendor_version: 2}.
		msg = protoString(protoString(nil, 1, "nfs.csi.k8s.io"), 2, "sim")
	default:
		status = grpcUnimplemented
	}
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Trailer", "Grpc-Status, Grpc-Message")
	w.WriteHeader(http.StatusOK)
	if status == grpcOK {
		frame := make([]byte, 5, 5+len(msg))
		binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
		_, _ = w.Write(append(frame, msg...))
	}
	h.Set("Grpc-Status", status)
	if status != grpcOK {
		h.Set("Grpc-Message", "the stand-in NFS partner serves Identity Probe and GetPluginInfo only")
	}
}

// protoString appends a length-delimited protobuf field holding s (shorter than 128 bytes).
func protoString(b []byte, field int, s string) []byte {
	return append(append(b, byte(field<<3|2), byte(len(s))), s...)
}
