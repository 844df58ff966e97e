package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/machinesets"
)

// controlPlaneRolloutFlags are how `controlplane rollout` (and `controlplane patch --rollout`)
// replaces the masters.
type controlPlaneRolloutFlags struct {
	canaryFlags
	PollInterval, Timeout time.Duration
}

func (r *controlPlaneRolloutFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.DurationVar(&r.Timeout, "timeout", 90*time.Minute, "give up when the masters are not all replaced after this long (each takes minutes: a new server, etcd's new member)")
	f.DurationVar(&r.PollInterval, "poll-interval", 10*time.Second, "how often the cluster is read")
	_ = f.MarkHidden("poll-interval")
	r.canaryFlags.addFlags(f)
}

func (r *controlPlaneRolloutFlags) validate() error {
	if r.Timeout <= 0 || r.PollInterval <= 0 {
		return usageError("--timeout and --poll-interval must be positive")
	}
	return r.canaryFlags.validate()
}

// run replaces the masters, saying each change of what it does; the progress goes to out as
// lines, or as one JSON or YAML document at the end with -o.
func (r *controlPlaneRolloutFlags) run(ctx context.Context, g *GlobalOptions, streams IOStreams) error {
	clients, err := g.clients(ctx)
	if err != nil {
		return err
	}
	opts, err := r.options(ctx, g, streams, clients)
	if err != nil {
		return err
	}
	p, err := machinesets.ControlPlaneRollout(ctx, clients.machines, clients.kube, opts)
	return r.report(g, streams, p, err)
}

// options are how the masters are followed: the canary, and a line per change as text.
func (r *controlPlaneRolloutFlags) options(ctx context.Context, g *GlobalOptions, streams IOStreams, clients *clusterClients) (machinesets.ControlPlaneRolloutOptions, error) {
	var opts rollout.Options
	if err := r.canaryFlags.options(ctx, g, streams, clients.kube, &opts); err != nil {
		return machinesets.ControlPlaneRolloutOptions{}, err
	}
	text := g.Output == outputText
	return machinesets.ControlPlaneRolloutOptions{
		PollInterval: r.PollInterval, Timeout: r.Timeout, Canary: opts.Canary, Resume: r.Resume, Operators: clients.dynamic,
		Progress: func(p machinesets.ControlPlaneProgress) {
			if text {
				fmt.Fprintf(streams.Out, "%s  %d/%d masters on the template  %s\n", time.Now().Format("15:04:05"), p.OnTemplate, p.Replicas, p.Phase)
			}
		}}, nil
}

// report says how the masters' replacement ended, and gives it its exit code.
func (r *controlPlaneRolloutFlags) report(g *GlobalOptions, streams IOStreams, p machinesets.ControlPlaneProgress, err error) error {
	if g.Output != outputText {
		if printErr := printStructured(streams.Out, g.Output, p); printErr != nil && err == nil {
			err = printErr
		}
	} else if p.Canary != "" {
		fmt.Fprintf(streams.Out, "first new master %s: check %s\n", p.Canary, p.CanaryVerdict)
	}
	var stopped *machinesets.ControlPlaneRolloutError
	switch {
	case errors.As(err, &stopped):
		return invalidInput(err)
	case err != nil:
		return patchErrorExit(err)
	}
	return nil
}

type controlPlaneRolloutOptions struct {
	g       *GlobalOptions
	streams IOStreams
	controlPlaneRolloutFlags
}

func newControlPlaneRolloutCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &controlPlaneRolloutOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "rollout [--timeout 90m] [--no-canary] [--resume]",
		Short: "Replace the masters that lack the ControlPlaneMachineSet template's networks, one at a time",
		Long: `Replace the masters whose providerSpec lacks the networks and security groups of the
ControlPlaneMachineSet's template (after "controlplane patch"), and return once every master is
on the template and ready.

With strategy RollingUpdate the control-plane-machine-set operator replaces them itself, one at
a time; the command follows it. With OnDelete the command deletes one outdated master at a
time, lowest index first, and only when every master is Running with a Ready Node, none is being
deleted, the set counts every replica ready and the ClusterOperators etcd, kube-apiserver,
machine-api and control-plane-machine-set are Available and neither Progressing nor Degraded:
the operator then makes its replacement, and etcd's hook keeps the old master until the new
member is in. An Inactive set, or one with strategy Recreate, is refused.

` + canaryHelp + ` Under RollingUpdate the operator goes on by itself: set the strategy to
OnDelete to hold it while you fix what the check found.

Exit 0 when every master is on the template and ready; 1 when the rollout stopped (a failed
check, a refused set, or --timeout), naming why, with the masters as they are.`,
		Example: `  manila-setup controlplane rollout
  manila-setup controlplane patch --network 5f0c3b7e-... --security-group 77c0a1d2-... --rollout`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	o.add(cmd)
	return cmd
}

func (o *controlPlaneRolloutOptions) Complete(*cobra.Command, []string) error { return nil }
func (o *controlPlaneRolloutOptions) Validate() error                         { return o.validate() }
func (o *controlPlaneRolloutOptions) Run(ctx context.Context) error {
	return o.run(ctx, o.g, o.streams)
}
