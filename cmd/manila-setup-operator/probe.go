package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/operator/probe"
)

// exitUnreachable: the probe ran and a target was not reached.
const exitUnreachable = 1

// DefaultTerminationLog is where the kubelet reads a container's termination message.
const DefaultTerminationLog = "/dev/termination-log"

// codedError ends the process with its own exit code rather than exitUsage.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// exitCode is the exit code err ends the process with: its own, or exitUsage.
func exitCode(err error) int {
	if ce, ok := errors.AsType[*codedError](err); ok {
		return ce.code
	}
	return exitUsage
}

func newProbeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Check from this node what its workloads need (run in a pod on the node's host network)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("probe: a probe is required: nfs")
		},
	}
	cmd.AddCommand(newProbeNFSCommand())
	return cmd
}

// ProbeNFSOptions are the flags of `probe nfs`.
type ProbeNFSOptions struct {
	Targets        []string
	Timeout        time.Duration
	TerminationLog string

	// createLog: the termination log is created when it was named (tests, a local run); the
	// kubelet's /dev/termination-log is only written if it is there.
	createLog bool
	out       io.Writer
}

func newProbeNFSCommand() *cobra.Command {
	o := &ProbeNFSOptions{}
	cmd := &cobra.Command{
		Use:   "nfs --target ADDR:PORT [--target ADDR:PORT ...]",
		Short: "Open a TCP connection to each NFS server and report which answered",
		Long: `Open a TCP connection to each --target at once (2049 is NFS), each within --timeout,
and write the result as JSON to stdout and to the termination message file (--termination-log),
where the kubelet makes it the container's termination message: per target its address,
whether it was reached, the error and how many milliseconds it took.

Exit code 0 when every target was reached, 1 when one was not, 2 on a usage error. In a pod on
a node's host network, the connections take the node's own path to the NFS servers, the one
the kubelet's NFS mounts take.`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.Targets, "target", nil, "ADDR:PORT to connect to, e.g. 10.0.0.5:2049 (repeatable)")
	f.DurationVar(&o.Timeout, "timeout", probe.DefaultDialTimeout, "how long each connection may take")
	f.StringVar(&o.TerminationLog, "termination-log", DefaultTerminationLog, "file the result is also written to (the container's termination message); skipped when it cannot be written")
	return cmd
}

func (o *ProbeNFSOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.createLog = cmd.Flags().Changed("termination-log")
	o.out = cmd.OutOrStdout()
	return nil
}

func (o *ProbeNFSOptions) Validate() error {
	if len(o.Targets) == 0 {
		return errors.New("--target: Required value: at least one ADDR:PORT, e.g. --target 10.0.0.5:2049")
	}
	if len(o.Targets) > probe.MaxTargets {
		return fmt.Errorf("--target: Too many: %d: must have at most %d items (the result must fit in a termination message)", len(o.Targets), probe.MaxTargets)
	}
	for _, t := range o.Targets {
		if err := probe.ParseTarget(t); err != nil {
			return fmt.Errorf("--target: Invalid value: %q: %v", t, err)
		}
	}
	if o.Timeout <= 0 {
		return fmt.Errorf("--timeout: Invalid value: %q: must be positive", o.Timeout)
	}
	return nil
}

func (o *ProbeNFSOptions) Run(ctx context.Context) error {
	r := probe.Dial(ctx, o.Targets, o.Timeout)
	b, err := r.Encode()
	if err != nil {
		return err
	}
	if _, err := o.out.Write(b); err != nil {
		return err
	}
	o.writeTerminationLog(b)
	if problems := r.Problems(); len(problems) > 0 {
		return &codedError{code: exitUnreachable, err: errors.New(strings.Join(problems, "; "))}
	}
	return nil
}

// writeTerminationLog writes b to the termination log when it can: outside a pod there is
// none, and stdout has the result anyway.
func (o *ProbeNFSOptions) writeTerminationLog(b []byte) {
	flags := os.O_WRONLY | os.O_TRUNC
	if o.createLog {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(o.TerminationLog, flags, 0o644)
	if err != nil {
		return
	}
	_, _ = f.Write(b)
	_ = f.Close()
}
