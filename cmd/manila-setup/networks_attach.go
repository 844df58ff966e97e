package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/cmd/manila-setup/wizard"
	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/internal/kubeconfig"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/internal/rwxcheck"
)

// NetworksAttachOptions is `manila-setup networks attach`, the interactive wizard.
type NetworksAttachOptions struct {
	*cloudOptions

	DryRun       bool
	NoColor      bool
	PollInterval time.Duration
	MachineWait  time.Duration
	CheckTimeout time.Duration
	CheckImage   string

	// isTerminal decides whether the wizard can run; tests replace it.
	isTerminal func(in io.Reader, out io.Writer) bool
}

func newNetworksAttachCommand(cloud *cloudOptions) *cobra.Command {
	o := &NetworksAttachOptions{cloudOptions: cloud, isTerminal: bothTerminals}
	cmd := &cobra.Command{
		Use:   "attach",
		Short: "Attach the workers to the storage network, interactively",
		Long: `A full-screen wizard that attaches the cluster's workers to the network Manila exports on:

  1. Connect          the cloud (clouds.yaml) and the cluster (kubeconfig context)
  2. Storage network  the discovered one preselected, with the reason
  3. Security groups  suggested first: those that let NFS reach the export address
  4. MachineSets      workers preselected, control plane never touched; on a HyperShift
                      management cluster also its NodePools, the OpenStack ones preselected
  5. Review           the exact diff per MachineSet and NodePool and the equivalent commands
  6. Apply and roll   patch, then replace the machines without losing capacity; NodePools
                      are patched only: HyperShift replaces their machines itself
  7. Verify           the driver's conditions, the StorageClasses, a two-node write check
                      (for NodePools: how to check the driver in each hosted cluster)

Keys: ? help on every screen, esc back, q quit. --dry-run walks every screen and changes
nothing. Colors follow NO_COLOR and --no-color.

It needs a terminal. For scripts and CI use the commands it prints on the review screen:
  manila-setup networks discover
  manila-setup machinesets patch --network ID [--security-group ID] [--name N]
  manila-setup machinesets rollout [--name N]
  manila-setup nodepools patch --network ID [--name NAMESPACE/NAME]`,
		Example: `  manila-setup networks attach --os-cloud mycloud --kubeconfig ~/ocp/auth/kubeconfig
  manila-setup networks attach --dry-run`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	f.BoolVar(&o.DryRun, "dry-run", false, "walk every screen and show the diffs, but patch, roll and create nothing")
	f.BoolVar(&o.NoColor, "no-color", false, "no colors (also when NO_COLOR is set)")
	f.DurationVar(&o.MachineWait, "machine-timeout", rollout.DefaultTimeout, "how long a new Machine may take to become a Ready Node")
	f.DurationVar(&o.PollInterval, "poll-interval", rollout.DefaultPollInterval, "how often the rollout reads the cluster")
	f.DurationVar(&o.CheckTimeout, "check-timeout", 3*time.Minute, "how long the multi-writer check waits for its volume and pods")
	f.StringVar(&o.CheckImage, "check-image", rwxcheck.DefaultImage, "image of the multi-writer check's pods")
	_ = f.MarkHidden("poll-interval")
	return cmd
}

// bothTerminals: the wizard reads keys from in and draws on out.
func bothTerminals(in io.Reader, out io.Writer) bool {
	fi, ok := in.(*os.File)
	fo, ok2 := out.(*os.File)
	return ok && ok2 && term.IsTerminal(int(fi.Fd())) && term.IsTerminal(int(fo.Fd()))
}

// Complete applies NO_COLOR.
func (o *NetworksAttachOptions) Complete(*cobra.Command, []string) error {
	if _, set := os.LookupEnv("NO_COLOR"); set {
		o.NoColor = true
	}
	return nil
}

// Validate refuses to run without a terminal, pointing to the flag-driven commands.
func (o *NetworksAttachOptions) Validate() error {
	if err := o.validate(); err != nil {
		return err
	}
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"--poll-interval", o.PollInterval}, {"--machine-timeout", o.MachineWait}, {"--check-timeout", o.CheckTimeout}} {
		if d.value <= 0 {
			return usageError("%s: Invalid value: %q: must be positive, such as 3m", d.flag, d.value)
		}
	}
	if !o.isTerminal(o.streams.In, o.streams.Out) {
		return usageError(`networks attach is interactive and needs a terminal on standard input and output.
Without one, do the same with the flag-driven commands:
  manila-setup networks discover                      # find the storage network and its ID
  manila-setup machinesets patch --network ID [--security-group ID] [--name N] [--dry-run]
  manila-setup machinesets rollout [--name N]
  manila-setup nodepools patch --network ID [--name NAMESPACE/NAME] [--dry-run]   # HyperShift NodePools`)
	}
	return nil
}

// Run shows the wizard until it ends, then prints what happened.
func (o *NetworksAttachOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.NoColor {
		lipgloss.SetColorProfile(termenv.Ascii)
	}
	backend := wizard.NewLiveBackend(wizard.LiveConfig{
		Kubeconfig: o.global.Kubeconfig, CloudsFile: o.global.OSClientConfigFile, Cloud: o.global.OSCloud,
		UserAgent: userAgent(), By: "manila-setup " + version,
		RolloutTimeout: o.MachineWait, PollInterval: o.PollInterval, CheckTimeout: o.CheckTimeout, CheckImage: o.CheckImage,
		// Nothing on standard error: the wizard owns the terminal.
		ConnectCloud: func(ctx context.Context, cloud string) (*openstack.Client, error) {
			return o.connectTo(ctx, cloud, nil)
		},
		ConnectCluster: func(ctx context.Context, kubeContext string) (wizard.ClusterClients, error) {
			c, err := o.global.contextClients(ctx, kubeContext)
			if err != nil {
				return wizard.ClusterClients{}, err
			}
			return wizard.ClusterClients{Host: c.host, Machines: c.machines, Kube: c.kube, Operator: c.operator, Dynamic: c.dynamic}, nil
		},
		CommandFlags: repeatedGlobalFlags(o.global, os.Getenv),
	})
	model := wizard.New(wizard.Options{Backend: backend, DryRun: o.DryRun, Context: ctx})
	p := tea.NewProgram(model, tea.WithAltScreen(), tea.WithInput(o.streams.In), tea.WithOutput(o.streams.Out), tea.WithContext(ctx))
	final, err := p.Run()
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		return environmentError(fmt.Errorf("the wizard stopped: %v", err))
	}
	m, ok := final.(wizard.Model)
	if !ok {
		return environmentError(errors.New("the wizard stopped unexpectedly"))
	}
	out := m.Outcome()
	if out.Summary != "" {
		fmt.Fprintln(o.streams.Out, out.Summary)
	}
	switch {
	case out.Interrupted:
		// The user answered the stop question: a choice, not a failure; the summary says
		// how to resume.
		return nil
	case out.Err != nil:
		return silentFailure(exitInvalid)
	}
	return nil
}

// repeatedGlobalFlags are the global flags a command printed for the user to run must carry to
// act on what this one acts on: --kubeconfig and --os-client-config-file when they differ from
// what the environment gives a new command anyway.
func repeatedGlobalFlags(g *GlobalOptions, getenv func(string) string) []string {
	var flags []string
	if g.Kubeconfig != "" && g.Kubeconfig != kubeconfig.DefaultPath() {
		flags = append(flags, "--kubeconfig", g.Kubeconfig)
	}
	if g.OSClientConfigFile != "" && g.OSClientConfigFile != getenv("OS_CLIENT_CONFIG_FILE") {
		flags = append(flags, "--os-client-config-file", g.OSClientConfigFile)
	}
	return flags
}
