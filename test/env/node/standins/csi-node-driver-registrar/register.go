package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standin"
)

// supportedVersions are the CSI plugin API versions upstream v2.14.0 announces to the kubelet.
var supportedVersions = []string{"1.0.0"}

// registrar is a running registration server and, if asked for, its HTTP server.
type registrar struct {
	driverName string
	socketPath string
	httpAddr   string // where the HTTP server listens; "" when there is none
	errs       chan error
	done       chan struct{}
}

// start asks the driver for its name and starts serving the registration service (and /healthz
// when httpAddr is set) until ctx ends. onFailedRegistration runs when the kubelet reports that
// the registration failed.
func start(ctx context.Context, o *options, httpAddr string, onFailedRegistration func(error)) (*registrar, error) {
	name, err := driverName(ctx, o.csiAddress, o.operationTimeout)
	if err != nil {
		return nil, err
	}
	klog.V(2).InfoS("CSI driver name", "csiDriverName", name)
	r := &registrar{
		driverName: name,
		socketPath: filepath.Join(o.pluginRegistrationPath, name+"-reg.sock"),
		errs:       make(chan error, 2),
		done:       make(chan struct{}),
	}
	lis, err := listenRegistrationSocket(r.socketPath)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, &registrationServer{
		driverName: name,
		endpoint:   o.kubeletRegistrationPath,
		onFailure:  onFailedRegistration,
	})
	var httpSrv *http.Server
	if httpAddr != "" {
		if httpSrv, err = r.startHTTP(httpAddr, o.operationTimeout, o.enableProfile); err != nil {
			srv.Stop()
			_ = os.Remove(r.socketPath)
			return nil, err
		}
	} else {
		klog.InfoS("Skipping HTTP server")
	}
	go func() {
		klog.InfoS("Registration Server started", "socketPath", r.socketPath)
		if err := srv.Serve(lis); err != nil {
			r.errs <- fmt.Errorf("registration server on %s stopped serving: %w", r.socketPath, err)
		}
	}()
	go func() {
		<-ctx.Done()
		srv.Stop()
		if httpSrv != nil {
			_ = httpSrv.Close()
		}
		// Upstream removes its socket on SIGTERM so that the kubelet's plugin watcher
		// deregisters the driver.
		if err := os.Remove(r.socketPath); err != nil && !os.IsNotExist(err) {
			r.errs <- fmt.Errorf("removing registration socket %s: %w", r.socketPath, err)
		}
		close(r.done)
	}()
	return r, nil
}

// wait returns when the servers have stopped: nil after ctx ended, the first error otherwise.
func (r *registrar) wait() error {
	select {
	case err := <-r.errs:
		return err
	case <-r.done:
		select {
		case err := <-r.errs:
			return err
		default:
			return nil
		}
	}
}

// driverName dials the CSI driver, waiting as upstream does for its socket to accept a
// connection, then asks GetPluginInfo for the driver's name within timeout.
func driverName(ctx context.Context, csiAddress string, timeout time.Duration) (string, error) {
	conn, err := dialCSI(ctx, csiAddress, connectWait)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	name, err := standin.DriverName(callCtx, conn)
	if err != nil {
		return "", fmt.Errorf("error retrieving CSI driver name from %s: %w", csiAddress, err)
	}
	return name, nil
}

// dialCSI connects to a gRPC server (a path is a unix socket) and waits up to wait until the
// connection is ready.
func dialCSI(ctx context.Context, address string, wait time.Duration) (*grpc.ClientConn, error) {
	waitCtx, cancel := context.WithTimeoutCause(ctx, wait, fmt.Errorf("gave up after %s", wait))
	defer cancel()
	return standin.DialCSI(waitCtx, address)
}

// listenRegistrationSocket removes a stale socket at path and listens there, with a socket only
// its owner may use (upstream's umask 0077; the kubelet runs as root).
func listenRegistrationSocket(path string) (net.Listener, error) {
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	old := syscall.Umask(0o077)
	lis, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listening on registration socket %s: %w", path, err)
	}
	return lis, nil
}

// removeStaleSocket removes a socket left at path by an earlier run; anything else there is an
// error, as upstream refuses to replace a file that is not a socket.
func removeStaleSocket(path string) error {
	exists, err := socketExists(path)
	if err != nil || !exists {
		return err
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	return nil
}

// socketExists tells whether path is a socket; a file of another kind there is an error.
func socketExists(path string) (bool, error) {
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("checking socket %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return false, fmt.Errorf("%s exists but is not a socket (mode %s)", path, fi.Mode())
	}
	return true, nil
}

// registrationServer answers the kubelet's plugin watcher.
type registrationServer struct {
	registerapi.UnimplementedRegistrationServer
	driverName string
	endpoint   string
	onFailure  func(error)
}

func (s *registrationServer) GetInfo(_ context.Context, req *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	klog.InfoS("Received GetInfo call", "request", req)
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.driverName,
		Endpoint:          s.endpoint,
		SupportedVersions: supportedVersions,
	}, nil
}

// NotifyRegistrationStatus logs the kubelet's verdict; a failed registration ends the program
// (onFailure), so that the container restarts and the kubelet tries again, as upstream does.
func (s *registrationServer) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	klog.InfoS("Received NotifyRegistrationStatus call", "status", st)
	if !st.GetPluginRegistered() {
		s.onFailure(fmt.Errorf("the kubelet did not register driver %s: %s", s.driverName, st.GetError()))
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// startHTTP listens on addr and serves /healthz (and pprof when asked) in the background.
func (r *registrar) startHTTP(addr string, timeout time.Duration, enableProfile bool) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/healthz", &healthz{socketPath: r.socketPath, driverName: r.driverName, timeout: timeout})
	if enableProfile {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv, listening, err := standin.ServeHTTP(addr, mux, r.errs)
	if err != nil {
		return nil, err
	}
	r.httpAddr = listening
	klog.InfoS("Starting HTTP server", "endpoint", r.httpAddr)
	return srv, nil
}

// healthz answers as upstream's /healthz: 200 "ok" when the registration socket exists and its
// server names the driver, 404 when the socket is gone, 500 with the reason otherwise.
type healthz struct {
	socketPath string
	driverName string
	timeout    time.Duration
}

func (h *healthz) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	exists, err := socketExists(h.socketPath)
	switch {
	case err != nil:
		h.answer(w, http.StatusInternalServerError, err.Error())
	case !exists:
		h.answer(w, http.StatusNotFound, "registration socket does not exist")
	default:
		if err := h.checkRegistrationServer(req.Context()); err != nil {
			h.answer(w, http.StatusInternalServerError, err.Error())
			return
		}
		h.answer(w, http.StatusOK, "ok")
	}
}

func (h *healthz) answer(w http.ResponseWriter, code int, body string) {
	if code == http.StatusOK {
		klog.V(5).InfoS("Health check succeeded")
	} else {
		klog.ErrorS(errors.New(body), "Health check failed")
	}
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}

// checkRegistrationServer asks the registration socket's server for its info and compares the
// driver name with the one this program serves.
func (h *healthz) checkRegistrationServer(ctx context.Context) error {
	conn, err := dialCSI(ctx, h.socketPath, h.timeout)
	if err != nil {
		return fmt.Errorf("error connecting to node-registrar socket %s: %w", h.socketPath, err)
	}
	defer conn.Close()
	callCtx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	info, err := registerapi.NewRegistrationClient(conn).GetInfo(callCtx, &registerapi.InfoRequest{})
	if err != nil {
		return fmt.Errorf("error getting info from node-registrar socket %s: %w", h.socketPath, err)
	}
	if info.GetName() != h.driverName {
		return fmt.Errorf("invalid driver name %q on node-registrar socket %s, want %q", info.GetName(), h.socketPath, h.driverName)
	}
	return nil
}
