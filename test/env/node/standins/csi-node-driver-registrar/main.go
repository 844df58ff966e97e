// Command csi-node-driver-registrar stands in for kubernetes-csi/node-driver-registrar v2.14.0 (see
// package standins): it asks the CSI driver on --csi-address for its name, then serves the
// kubelet's plugin registration service on <--plugin-registration-path>/<driver>-reg.sock so that
// the kubelet's plugin watcher registers the driver, whose socket on the host is
// --kubelet-registration-path.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standin"
)

// probeMode is the value of the deprecated --mode under which upstream exits at once, successfully.
const probeMode = "kubelet-registration-probe"

// connectWait is how long upstream (csi-lib-utils' connection.Connect) waits for the driver's
// socket to accept a connection before it gives up; --timeout bounds the GetPluginInfo call after.
const connectWait = 30 * time.Second

// version is what --version prints.
var version = "v2.14.0-standin"

// options are the command line of upstream v2.14.0.
type options struct {
	connectionTimeout       time.Duration
	operationTimeout        time.Duration
	csiAddress              string
	pluginRegistrationPath  string
	kubeletRegistrationPath string
	healthPort              int
	httpEndpoint            string
	showVersion             bool
	mode                    string
	enableProfile           bool
	logging                 *standin.LoggingFlags
}

// addFlags declares upstream's flags on fs, with upstream's defaults.
func addFlags(fs *flag.FlagSet) *options {
	o := &options{}
	fs.DurationVar(&o.connectionTimeout, "connection-timeout", 0, "deprecated, has no effect")
	fs.DurationVar(&o.operationTimeout, "timeout", time.Second, "Timeout for waiting for communication with driver")
	fs.StringVar(&o.csiAddress, "csi-address", "/run/csi/socket", "Path of the CSI driver socket to connect to.")
	fs.StringVar(&o.pluginRegistrationPath, "plugin-registration-path", "/registration", "Path to the kubelet's plugin registration directory.")
	fs.StringVar(&o.kubeletRegistrationPath, "kubelet-registration-path", "", "Path of the CSI driver socket on the host (required).")
	fs.IntVar(&o.healthPort, "health-port", 0, "(deprecated) TCP port for healthz requests; 0 disables. Only one of --health-port and --http-endpoint can be set.")
	fs.StringVar(&o.httpEndpoint, "http-endpoint", "", "TCP address of the HTTP server for /healthz (and pprof with --enable-pprof); empty disables. Only one of --health-port and --http-endpoint can be set.")
	fs.BoolVar(&o.showVersion, "version", false, "Show version.")
	fs.StringVar(&o.mode, "mode", "", "DEPRECATED. kubelet-registration-probe makes the program exit successfully at once; any other value registers.")
	fs.BoolVar(&o.enableProfile, "enable-pprof", false, "enable pprof profiling")
	o.logging = standin.AddLoggingFlags(fs)
	return o
}

// httpAddress is where the HTTP server listens ("" for none), from --health-port or --http-endpoint.
func (o *options) httpAddress() (string, error) {
	if o.healthPort > 0 && o.httpEndpoint != "" {
		return "", errors.New("only one of --health-port and --http-endpoint can be set")
	}
	if o.healthPort > 0 {
		return ":" + strconv.Itoa(o.healthPort), nil
	}
	return o.httpEndpoint, nil
}

func main() {
	o := addFlags(flag.CommandLine)
	flag.Parse() // exits 2 on an unknown flag, as upstream's flag.Parse does
	if err := o.logging.Apply(); err != nil {
		fail(err)
	}
	if o.showVersion {
		fmt.Println(os.Args[0], version)
		return
	}
	if o.kubeletRegistrationPath == "" {
		fail(errors.New("kubelet-registration-path is a required parameter"))
	}
	if o.mode == probeMode {
		os.Exit(0) // upstream keeps this deprecated mode as a no-op that succeeds
	}
	klog.InfoS("Running node-driver-registrar stand-in", "version", version, "mode", o.mode)
	addr, err := o.httpAddress()
	if err != nil {
		fail(err)
	}
	if o.connectionTimeout != 0 {
		klog.InfoS("--connection-timeout is deprecated and has no effect")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	r, err := start(ctx, o, addr, func(err error) {
		fail(fmt.Errorf("registration failed, restarting the registration container: %w", err))
	})
	if err != nil {
		fail(err)
	}
	if err := r.wait(); err != nil {
		fail(err)
	}
	klog.Flush()
}

// fail logs err and exits 1, as upstream does on every fatal error.
func fail(err error) {
	standin.Fail("csi-node-driver-registrar", err)
}
