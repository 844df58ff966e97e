package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/machinesets"
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

// checkManilaMounts refuses (exit 1) to roll MachineSets whose rollout takes a network off
// nodes where pods use Manila volumes: the Machines that have what their template no longer
// has, or what planned (a dry run's results) removes. With force it says so on standard error
// and goes on. done says what was changed before, for the refusal.
func checkManilaMounts(ctx context.Context, clients *machineSetsClients, sel machinesets.Selection, planned []attach.Result, force bool, streams IOStreams, done string) error {
	nodes, err := machinesets.RemovalNodes(ctx, clients.machines, sel, planned)
	if err != nil {
		return environmentError(err)
	}
	mounts, err := attach.ManilaMounts(ctx, clients.kube, nodes)
	if err != nil {
		return environmentError(err)
	}
	if len(mounts) == 0 {
		return nil
	}
	if force {
		for _, m := range mounts {
			fmt.Fprintf(streams.ErrOut, "warning: --force: replacing the machine of node %s although a pod there uses a Manila volume: %s\n", m.Node, m)
		}
		return nil
	}
	return invalidInput(&attach.MountedError{Mounts: mounts, Done: done})
}
