package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/internal/kubeconfig"
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

// commandContext ends with the command, on Ctrl-C or on SIGTERM: every command stops the same
// way (a rollout then stops between machines, a patch before its next write).
func commandContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
