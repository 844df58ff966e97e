// Package cmdrun runs a command the same way in manila-setup and manila-setup-operator: its
// options in kubectl's order (Complete, Validate, Run), within a context that ends when the
// process is asked to stop (Ctrl-C or SIGTERM).
package cmdrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

// Options are a command's options. Complete fills in what the flags leave to the environment
// and reads local files, contacting nothing; Validate rejects bad input before anything is
// contacted; Run does the work, connecting to the cluster and the cloud as it needs.
type Options interface {
	Complete(cmd *cobra.Command, args []string) error
	Validate() error
	Run(ctx context.Context) error
}

// RunE is the RunE of a command with options: Complete, Validate, then Run, all within Context:
// Complete may read local files (a kubeconfig, -f), and Ctrl-C stops those reads too, through
// cmd.Context().
func RunE(o Options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx, cancel := Context(cmd.Context())
		defer cancel()
		cmd.SetContext(ctx)
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(ctx)
	}
}

// exitAtOnce is the exit status of a second Ctrl-C, as shells report a process ended by
// SIGINT (128+2).
const exitAtOnce = 130

// Context ends with parent, or on the first Ctrl-C or SIGTERM, so that every command and the
// operator stop the same way whether a user or Kubernetes stops them (a rollout between
// machines, a patch before its next write, a read of a file, the operator after releasing its
// Lease): each says then what it had done and what it had not. A second Ctrl-C or SIGTERM
// exits at once, with status 130, for a user who will not wait for that. A nil parent is
// context.Background().
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	return notify(parent, os.Stderr, os.Exit)
}

func notify(parent context.Context, errOut io.Writer, exit func(int)) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancelCause(parent)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	stopped := make(chan struct{})
	go func() {
		select {
		case sig := <-signals:
			fmt.Fprintf(errOut, "%s: stopping; %s again to exit at once\n", describe(sig), describe(sig))
			cancel(context.Canceled)
		case <-stopped:
			return
		}
		select {
		case <-signals:
			fmt.Fprintln(errOut, "exiting at once")
			exit(exitAtOnce)
		case <-stopped:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(signals)
			close(stopped)
			cancel(context.Canceled)
		})
	}
}

func describe(sig os.Signal) string {
	if sig == os.Interrupt {
		return "Ctrl-C"
	}
	return "SIGTERM"
}

// CommandContext is the context of cmd for Complete: the one RunE made, which Ctrl-C ends;
// context.Background() when cmd is nil or was not run through RunE (a test calling Complete).
func CommandContext(cmd *cobra.Command) context.Context {
	if cmd == nil || cmd.Context() == nil {
		return context.Background()
	}
	return cmd.Context()
}
