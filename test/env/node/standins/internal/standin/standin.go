// Package standin holds what the stand-ins for the kubernetes-csi sidecars
// (csi-node-driver-registrar and livenessprobe, see package standins) share: the logging flags
// they take from component-base, how they end on a fatal error, how they reach the CSI driver
// and how they serve HTTP.
package standin

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// Fail logs err as the fatal error of program and exits 1, as the sidecars do on every fatal
// error. The log line names Fail's caller as its source.
func Fail(program string, err error) {
	klog.ErrorSDepth(1, err, program+" failed")
	klog.FlushAndExit(klog.ExitFlushTimeout, 1)
}

// ServeHTTP listens on addr and serves h in the background until the returned server is closed.
// An error that stops the server earlier goes to errs, which must not block. It returns the
// address it listens on, the port filled in when addr asked for any.
func ServeHTTP(addr string, h http.Handler, errs chan<- error) (*http.Server, string, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listening for HTTP on %s: %w", addr, err)
	}
	listening := lis.Addr().String()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("HTTP server on %s: %w", listening, err)
		}
	}()
	return srv, listening, nil
}
