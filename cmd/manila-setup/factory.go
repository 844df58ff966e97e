package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/internal/kubeconfig"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// What every command gets the same way, whatever it does: its user agent, its cluster
// configuration (internal/kubeconfig), its context. clouds.yaml is read only by
// internal/openstack.

// userAgent names this CLI in the API server's audit log and in the cloud's logs.
func userAgent() string { return "manila-setup/" + version }

// kubeconfigOptions are the cluster flags as internal/kubeconfig takes them.
func (g *GlobalOptions) kubeconfigOptions(inCluster bool) kubeconfig.Options {
	return kubeconfig.Options{Path: g.Kubeconfig, InCluster: inCluster, UserAgent: userAgent()}
}

// restConfig is the one kubeconfig loader of the commands: --kubeconfig (a path list allowed),
// else $KUBECONFIG, else ~/.kube/config; with inCluster, the pod's service account when none of
// those files exists.
func (g *GlobalOptions) restConfig(inCluster bool) (*rest.Config, error) {
	cfg, err := kubeconfig.RESTConfig(g.kubeconfigOptions(inCluster))
	if err != nil {
		return nil, environmentError(err)
	}
	return cfg, nil
}

// openstackConfig is how every command connects to the cloud (internal/openstack reads
// clouds.yaml): --os-cloud and --os-client-config-file, this CLI's user agent, warnings on
// errOut, and with -v the requests (-vv with their headers, secrets never).
func (g *GlobalOptions) openstackConfig(errOut io.Writer) openstack.Config {
	cfg := openstack.Config{
		Cloud:      g.OSCloud,
		CloudsFile: g.OSClientConfigFile,
		UserAgent:  userAgent(),
		Warnf:      func(format string, a ...any) { fmt.Fprintf(errOut, "warning: "+format+"\n", a...) },
	}
	if g.Verbosity >= 1 {
		cfg.Logf = func(format string, a ...any) { fmt.Fprintf(errOut, "openstack: "+format+"\n", a...) }
		cfg.LogHeaders = g.Verbosity >= 2
	}
	cfg.WrapTransport = wrapOpenStackTransport
	return cfg
}

// commandContext ends with the command, on Ctrl-C or on SIGTERM: every command stops the same
// way (a rollout then stops between machines, a patch before its next write).
func commandContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// commandOptions are every command's options, run by runOptions in kubectl's order: Complete
// fills in what the flags leave to the environment and reads local files, contacting nothing;
// Validate rejects bad input before anything is contacted; Run does the work, connecting to the
// cluster and the cloud as it needs.
type commandOptions interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// runOptions is the RunE of every command with options: Complete, Validate, then Run with a
// context that ends on Ctrl-C or SIGTERM.
func runOptions(o commandOptions) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		ctx, cancel := commandContext(cmd)
		defer cancel()
		return o.Run(ctx)
	}
}
