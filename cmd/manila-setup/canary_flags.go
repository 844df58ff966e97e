package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator/probe"
	"github.com/manila-setup/manila-setup/workers"
)

// canaryFlags are the rollout commands' --no-canary and --resume: the first new Machine of each
// set is checked (workers.Canary) before the others are replaced.
type canaryFlags struct {
	NoCanary     bool
	Resume       bool
	ProbeTimeout time.Duration
}

func (c *canaryFlags) addFlags(f *pflag.FlagSet) {
	f.BoolVar(&c.NoCanary, "no-canary", false, "do not check the first new Machine of each set before replacing the others")
	f.BoolVar(&c.Resume, "resume", false, "check again a new Machine whose check failed, after fixing the cause on the running machine")
	f.DurationVar(&c.ProbeTimeout, "probe-timeout", probe.DefaultTimeout, "how long the NFS probe pod on the new machine's node may take")
	_ = f.MarkHidden("probe-timeout")
}

func (c *canaryFlags) validate() error {
	if c.NoCanary && c.Resume {
		return usageError("--resume checks a Machine again; it cannot be used with --no-canary")
	}
	return nil
}

// canaryHelp is the paragraph of the rollout commands' help about the check.
const canaryHelp = `Before the first old Machine of a set is removed, the first new one is checked: no warning
event about it, its Node's IP on the machine network (kube-system/cluster-config-v1) and in no
storage subnet, and, with --os-cloud, an address on each storage network recorded on the set,
the VIPs still allowed on its primary port, and, where the manila-setup operator runs, TCP 2049
to Manila's export addresses from its node (a short-lived pod of the operator's image).
A failed check stops the rollout with the old Machines serving and says what to fix. Then
delete that Machine so that a new one boots with the fix and run the command again, or run it
with --resume to check the same Machine again. --no-canary skips the check.`

// options fills the canary of opts: nil with --no-canary (said on errOut), else a
// workers.Canary over the cluster's machine networks and the cloud of --os-cloud, if any.
func (c *canaryFlags) options(ctx context.Context, g *GlobalOptions, streams IOStreams, kube kubernetes.Interface, opts *rollout.Options) error {
	opts.Resume = c.Resume
	if c.NoCanary {
		fmt.Fprintln(streams.ErrOut, "warning: --no-canary: no new Machine is checked before the old ones are replaced; a storage network that moves the node IP, or gives the machines no address on it, reaches every machine of the set")
		return nil
	}
	var cloud *openstack.Client
	if g.OSCloud != "" {
		co := cloudOptions{global: g, streams: streams, Timeout: openstack.DefaultTimeout}
		var err error
		if cloud, err = co.connect(ctx); err != nil {
			return err
		}
	}
	canary := workers.NewCanary(ctx, kube, cloud)
	if canary.Probe != nil {
		canary.Probe.Timeout = c.ProbeTimeout
	}
	opts.Canary = canary
	return nil
}
