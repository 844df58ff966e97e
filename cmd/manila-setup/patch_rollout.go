package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/workers"
)

// patchRolloutFlags are --rollout and its settings on the patch commands whose sets manila-setup
// rolls (machinesets): the patch, then the rollout `machinesets rollout` does, in one command.
type patchRolloutFlags struct {
	Rollout        bool
	MaxSurge       int32
	MaxUnavailable int32
	Timeout        time.Duration
	PollInterval   time.Duration
	canary         canaryFlags
}

func (r *patchRolloutFlags) add(f *pflag.FlagSet, command string) {
	f.BoolVar(&r.Rollout, "rollout", false, "after patching, replace the machines as '"+command+"' does")
	f.Int32Var(&r.MaxSurge, "max-surge", rollout.DefaultMaxSurge, "with --rollout: Machines a set may have above its replica count")
	f.Int32Var(&r.MaxUnavailable, "max-unavailable", 0, "with --rollout: replicas of a set that may be missing (not Ready) at any time")
	f.DurationVar(&r.Timeout, "timeout", rollout.DefaultTimeout, "with --rollout: how long a new Machine may take to become a Ready Node")
	f.DurationVar(&r.PollInterval, "poll-interval", rollout.DefaultPollInterval, "how often the cluster is read")
	_ = f.MarkHidden("poll-interval")
	r.canary.addFlags(f)
}

// validate checks the flags: a rollout replaces machines of a cluster, not of a file.
func (r *patchRolloutFlags) validate(file string) error {
	if !r.Rollout {
		return nil
	}
	if file != "" {
		return usageError("--rollout replaces the machines of a cluster; with -f nothing is rolled: apply the file, then run the rollout")
	}
	if err := r.canary.validate(); err != nil {
		return err
	}
	return rolloutFlagsError(r.MaxSurge, r.MaxUnavailable, r.Timeout, r.PollInterval)
}

// options are the rollout's options, with its canary.
func (r *patchRolloutFlags) options(ctx context.Context, g *GlobalOptions, streams IOStreams, kube kubernetes.Interface, progress func(rollout.SetProgress)) (rollout.Options, error) {
	opts := rollout.Options{MaxSurge: r.MaxSurge, MaxUnavailable: r.MaxUnavailable, Timeout: r.Timeout, PollInterval: r.PollInterval, Progress: progress}
	err := r.canary.options(ctx, g, streams, kube, &opts)
	return opts, err
}

// refuseRemovalRisk asks workers.RemovalRisk whether the removal r cuts pods off their Manila
// volumes and says its answer: the refusal (exit 1), whose words end with done (what was
// changed before it); with force, a warning per finding on standard error; or what it checked.
func refuseRemovalRisk(ctx context.Context, cluster workers.Cluster, r workers.Removal, force bool, streams IOStreams, done string) error {
	risk, err := cluster.RemovalRisk(ctx, r)
	if err != nil {
		return environmentError(err)
	}
	warnings, err := risk.Verdict(force, done)
	for _, w := range warnings {
		fmt.Fprintf(streams.ErrOut, "warning: %s\n", w)
	}
	if err != nil {
		return invalidInput(err)
	}
	if risk.Checked != "" {
		fmt.Fprintln(streams.ErrOut, risk.Checked)
	}
	return nil
}
