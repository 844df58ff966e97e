package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
)

func newCompletionCommand(streams IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print a completion script for bash, zsh or fish. For example, in bash:

  source <(manila-setup completion bash)`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("completion: expected exactly one shell (bash, zsh or fish), got %d arguments", len(args))
			}
			switch args[0] {
			case "bash", "zsh", "fish":
				return nil
			}
			return usageError("completion: Invalid value: %q: must be one of bash, zsh, fish", args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(streams.Out, true)
			case "zsh":
				return root.GenZshCompletion(streams.Out)
			default:
				return root.GenFishCompletion(streams.Out, true)
			}
		},
	}
}

// completionTimeout bounds what a completion may wait for the cluster or the cloud: a shell
// waiting on a Tab must not hang.
const completionTimeout = 5 * time.Second

// registerValueCompletions offers values, not only flag names, to shell completion: the clouds
// of clouds.yaml for --os-cloud, the formats for -o, the cluster's MachineSets for --name, and,
// when a cloud is named, its networks for --network (ID, with the name as description). A
// completion whose source cannot be reached offers nothing; it never prints, since the shell
// would show it.
func registerValueCompletions(root *cobra.Command, g *GlobalOptions) {
	noFiles := cobra.ShellCompDirectiveNoFileComp
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputText, outputJSON, outputYAML}, noFiles))
	_ = root.RegisterFlagCompletionFunc("os-cloud", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		g.Complete()
		names, _, err := openstack.CloudNames(context.Background(), openstack.Config{CloudsFile: g.OSClientConfigFile})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		return names, noFiles
	})
	machineSets := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		g.Complete()
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		clients, err := g.clients(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		sets, err := machinesets.List(ctx, clients.machines, attach.Attachment{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		out := make([]string, 0, len(sets))
		for _, s := range sets {
			out = append(out, s.Name+"\t"+orDash(s.Role))
		}
		return out, noFiles
	}
	networks := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		g.Complete()
		if g.OSCloud == "" {
			return nil, noFiles
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		// The commands' one way to the cloud, writing nothing (nil).
		c, err := (&cloudOptions{global: g, Timeout: completionTimeout}).connectTo(ctx, g.OSCloud, nil)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		nets, err := c.Networks(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		out := make([]string, 0, len(nets))
		for _, n := range nets {
			out = append(out, n.ID+"\t"+n.Name)
		}
		return out, noFiles
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("name") != nil && strings.HasPrefix(c.CommandPath(), root.Name()+" machinesets") {
			_ = c.RegisterFlagCompletionFunc("name", machineSets)
		}
		if c.Flags().Lookup("network") != nil {
			_ = c.RegisterFlagCompletionFunc("network", networks)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
