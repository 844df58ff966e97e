// Command livenessprobe stands in for kubernetes-csi/livenessprobe v2.16.0 (see package
// standins): it serves /healthz, which calls the CSI driver's Identity Probe on --csi-address
// within --probe-timeout and answers 200 "ok" when the driver is ready, 500 with the reason
// otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"time"

	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standin"
)

// defaultHealthPort is upstream's --health-port default; upstream tells "not set" by comparing
// with it.
const defaultHealthPort = "9808"

// options are the command line of upstream v2.16.0.
type options struct {
	probeTimeout   time.Duration
	csiAddress     string
	healthPort     string
	metricsAddress string
	httpEndpoint   string
	metricsPath    string
	logging        *standin.LoggingFlags
}

// addFlags declares upstream's flags on fs, with upstream's defaults.
func addFlags(fs *flag.FlagSet) *options {
	o := &options{}
	fs.DurationVar(&o.probeTimeout, "probe-timeout", time.Second, "Probe timeout in seconds.")
	fs.StringVar(&o.csiAddress, "csi-address", "/run/csi/socket", "Address of the CSI driver socket.")
	fs.StringVar(&o.healthPort, "health-port", defaultHealthPort, "(deprecated) TCP port for healthz requests. If set, --http-endpoint cannot be set.")
	fs.StringVar(&o.metricsAddress, "metrics-address", "", "(deprecated) TCP address of the prometheus metrics endpoint; empty disables. If set, --http-endpoint cannot be set.")
	fs.StringVar(&o.httpEndpoint, "http-endpoint", "", "TCP address of the HTTP server for the health check and metrics; empty disables. If set, --health-port and --metrics-address cannot be set.")
	fs.StringVar(&o.metricsPath, "metrics-path", "/metrics", "The HTTP path where prometheus metrics are exposed.")
	o.logging = standin.AddLoggingFlags(fs)
	return o
}

// healthAddress is where /healthz is served: --http-endpoint, or all addresses on --health-port.
func (o *options) healthAddress() (string, error) {
	if o.healthPort != defaultHealthPort && o.httpEndpoint != "" {
		return "", errors.New("only one of --health-port and --http-endpoint can be explicitly set")
	}
	if o.metricsAddress != "" && o.httpEndpoint != "" {
		return "", errors.New("only one of --metrics-address and --http-endpoint can be explicitly set")
	}
	if o.httpEndpoint != "" {
		return o.httpEndpoint, nil
	}
	return net.JoinHostPort("0.0.0.0", o.healthPort), nil
}

func main() {
	o := addFlags(flag.CommandLine)
	flag.Parse() // exits 2 on an unknown flag, as upstream's flag.Parse does
	if err := o.logging.Apply(); err != nil {
		fail(err)
	}
	addr, err := o.healthAddress()
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	// As upstream: wait for the driver without a deadline. Until the HTTP server runs, the
	// kubelet's probe fails with "connection refused", which is the right answer.
	name, err := driverName(ctx, o.csiAddress)
	if err != nil {
		fail(err)
	}
	klog.InfoS("CSI driver name", "driver", name)
	s, err := startServers(o, name, addr)
	if err != nil {
		fail(err)
	}
	fail(<-s.errs)
}

// fail logs err and exits 1, as upstream does on every fatal error.
func fail(err error) {
	standin.Fail("livenessprobe", err)
}
