package main

import (
	"github.com/spf13/cobra"
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
