// Package cmdrun runs a command the same way in manila-setup and manila-setup-operator: its
// options in kubectl's order (Complete, Validate, Run), within a context that ends when the
// process is asked to stop (Ctrl-C or SIGTERM).
package cmdrun

import (
	"context"
	"os"
	"os/signal"
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

// RunE is the RunE of a command with options: Complete, Validate, then Run with Context.
func RunE(o Options) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.Complete(cmd, args); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		ctx, cancel := Context(cmd.Context())
		defer cancel()
		return o.Run(ctx)
	}
}

// Context ends with parent, on Ctrl-C or on SIGTERM, so that every command and the operator
// stop the same way whether a user or Kubernetes stops them (a rollout between machines, a
// patch before its next write, the operator after releasing its Lease). A nil parent is
// context.Background().
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}
