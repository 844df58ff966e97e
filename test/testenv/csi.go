package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The versions test/env/csi/build.sh builds; the cache folder is keyed by them.
const (
	csiPluginVersion      = "1.35.0"
	csiProvisionerVersion = "5.3.0"
)

// DriverName is the CSI driver name of the Manila CSI driver.
const DriverName = "manila.csi.openstack.org"

// CSIBinaries returns the folder holding manila-csi-plugin and csi-provisioner:
// $MANILA_SETUP_CSI_BIN if set, else the version-keyed cache folder test/env/csi/build.sh fills.
func CSIBinaries() (string, error) {
	dir := os.Getenv("MANILA_SETUP_CSI_BIN")
	if dir == "" {
		dir = filepath.Join(cacheDir(), "csi", fmt.Sprintf("manila-%s_provisioner-%s", csiPluginVersion, csiProvisionerVersion))
	}
	for _, name := range []string{"manila-csi-plugin", "csi-provisioner"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("CSI binaries: %s is missing in %s: run test/env/csi/build.sh (make test does)", name, dir)
		}
	}
	return dir, nil
}

// CSIControllerOptions shape a CSIController.
type CSIControllerOptions struct {
	// Kubeconfig is the kubeconfig csi-provisioner watches claims with (required).
	Kubeconfig string
	// Dir holds the socket and the logs; default a new temporary folder, removed by Stop.
	Dir string
	// ClusterID is the plugin's --cluster-id, recorded in the metadata of the shares it creates.
	ClusterID string
	// Verbosity is both programs' --v; default 4 (every CSI call is logged).
	Verbosity int
	// Resizer also runs csi-resizer (test/env/node/operands.sh builds it), so that a claim
	// asking for more grows its share.
	Resizer bool
}

// CSIController is the controller side of the real Manila CSI driver, run as local processes
// the way the driver's controller Deployment runs them in a cluster: manila-csi-plugin serving
// the CSI controller service on a unix socket, and csi-provisioner turning claims into
// CreateVolume and DeleteVolume calls on that socket (in place of the NFS partner plugin, a
// stand-in answers the probe the plugin forwards to it). The plugin takes its OpenStack
// credentials from each call's secrets, which csi-provisioner reads from the Secret a
// StorageClass names: nothing about the cloud is configured here.
type CSIController struct {
	// Dir holds the socket and the logs (manila-csi-plugin.log, csi-provisioner.log).
	Dir string
	// Socket is the plugin's unix socket.
	Socket string

	ownDir    bool
	partner   *partnerProbe
	processes []*process
}

// StartCSIController starts manila-csi-plugin (controller service only) and csi-provisioner
// and waits until the plugin answers on its socket.
func StartCSIController(ctx context.Context, opts CSIControllerOptions) (_ *CSIController, err error) {
	if opts.Kubeconfig == "" {
		return nil, fmt.Errorf("CSI controller: a kubeconfig for csi-provisioner is required")
	}
	bins, err := CSIBinaries()
	if err != nil {
		return nil, err
	}
	c := &CSIController{Dir: opts.Dir}
	if c.Dir == "" {
		// Short: a unix socket path must fit in 108 bytes.
		if c.Dir, err = os.MkdirTemp("", "manila-csi-"); err != nil {
			return nil, err
		}
		c.ownDir = true
	} else if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if opts.Verbosity == 0 {
		opts.Verbosity = 4
	}
	c.Socket = filepath.Join(c.Dir, "csi.sock")
	// The plugin forwards node calls and, also without a node service, the Identity Probe to
	// its NFS partner on this socket; a stand-in answers the probe (see partnerProbe).
	partnerSocket := filepath.Join(c.Dir, "csi-nfs.sock")
	_ = os.Remove(partnerSocket)
	if c.partner, err = startPartnerProbe(partnerSocket); err != nil {
		return nil, fmt.Errorf("the NFS partner's probe: %w", err)
	}
	v := fmt.Sprintf("--v=%d", opts.Verbosity)
	plugin := []string{v,
		"--endpoint=unix://" + c.Socket,
		"--drivername=" + DriverName,
		"--share-protocol-selector=NFS",
		"--fwdendpoint=unix://" + partnerSocket,
		// The controller service only: with a node service the plugin would ask the partner
		// for its node capabilities at start.
		"--provide-node-service=false",
	}
	if opts.ClusterID != "" {
		plugin = append(plugin, "--cluster-id="+opts.ClusterID)
	}
	p, err := startProcess(c.Dir, "manila-csi-plugin", filepath.Join(bins, "manila-csi-plugin"), plugin...)
	if err != nil {
		return nil, err
	}
	c.processes = append(c.processes, p)
	if err := c.waitSocket(ctx, p); err != nil {
		return nil, err
	}
	// As in the driver's controller Deployment, minus leader election (one replica) and metrics,
	// and with retries capped at 10 s instead of 5 minutes, for tests and demos that fix things.
	p, err = startProcess(c.Dir, "csi-provisioner", filepath.Join(bins, "csi-provisioner"), v,
		"--csi-address="+c.Socket,
		"--kubeconfig="+opts.Kubeconfig,
		"--leader-election=false",
		"--timeout=120s",
		"--extra-create-metadata",
		"--retry-interval-start=1s",
		"--retry-interval-max=10s",
	)
	if err != nil {
		return nil, err
	}
	c.processes = append(c.processes, p)
	if opts.Resizer {
		operands, err := operandBinaries(ctx)
		if err != nil {
			return nil, err
		}
		// As in the controller Deployment, minus leader election and metrics.
		p, err = startProcess(c.Dir, "csi-resizer", filepath.Join(operands, "csi-resizer"), v,
			"--csi-address="+c.Socket,
			"--kubeconfig="+opts.Kubeconfig,
			"--leader-election=false",
			"--timeout=120s",
			"--retry-interval-start=1s",
			"--retry-interval-max=10s",
		)
		if err != nil {
			return nil, err
		}
		c.processes = append(c.processes, p)
	}
	return c, nil
}

func (c *CSIController) waitSocket(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if conn, err := net.Dial("unix", c.Socket); err == nil {
			conn.Close()
			return nil
		}
		if p.exited() {
			return fmt.Errorf("manila-csi-plugin exited:\n%s", p.tail(20))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("manila-csi-plugin does not listen on %s: %w\n%s", c.Socket, ctx.Err(), p.tail(20))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// NewCSIController starts a CSIController for one test and stops it when the test ends; the
// logs' last lines are printed if the test failed.
func NewCSIController(t testing.TB, opts CSIControllerOptions) *CSIController {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := StartCSIController(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Tail(40))
		}
		c.Stop()
	})
	return c
}

// Alive returns an error naming the first program that has exited, with its last log lines.
func (c *CSIController) Alive() error {
	for _, p := range c.processes {
		if p.exited() {
			return fmt.Errorf("%s exited:\n%s", p.name, p.tail(20))
		}
	}
	return nil
}

// Tail returns the last lines of each program's log.
func (c *CSIController) Tail(lines int) string {
	var b strings.Builder
	for _, p := range c.processes {
		fmt.Fprintf(&b, "--- %s (%s)\n%s\n", p.name, p.log, p.tail(lines))
	}
	return b.String()
}

// Stop stops csi-provisioner, then the plugin, and removes the folder if it made it.
func (c *CSIController) Stop() {
	for i := len(c.processes) - 1; i >= 0; i-- {
		c.processes[i].stop()
	}
	c.processes = nil
	if c.partner != nil {
		c.partner.stop()
		c.partner = nil
	}
	if c.ownDir {
		_ = os.RemoveAll(c.Dir)
	}
}
