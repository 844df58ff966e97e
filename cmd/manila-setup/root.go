package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/internal/kubeconfig"
)

// GlobalOptions are the flags every command understands.
type GlobalOptions struct {
	Kubeconfig         string
	OSCloud            string
	OSClientConfigFile string
	Output             string
	Verbosity          int

	// cluster holds the clients once made (clients); newClients, when set, makes them instead
	// of the kubeconfig (unit tests).
	cluster    *clusterClients
	newClients func() (*clusterClients, error)
}

// Output formats accepted by -o.
const (
	outputText = "text"
	outputJSON = "json"
	outputYAML = "yaml"
)

// Complete fills what the flags left empty from the environment, in the order the Kubernetes and
// OpenStack clients use: flag, then environment variable, then the default file.
func (g *GlobalOptions) Complete() {
	if g.Kubeconfig == "" {
		g.Kubeconfig = kubeconfig.DefaultPath()
	}
	if g.OSCloud == "" {
		g.OSCloud = os.Getenv("OS_CLOUD")
	}
	if g.OSClientConfigFile == "" {
		g.OSClientConfigFile = os.Getenv("OS_CLIENT_CONFIG_FILE")
	}
}

// Validate rejects flag values no command could use.
func (g *GlobalOptions) Validate() error {
	switch g.Output {
	case outputText, outputJSON, outputYAML:
		return nil
	}
	return usageError("-o/--output: Invalid value: %q: must be one of text, json, yaml", g.Output)
}

// newRootCommand builds the whole command tree. Commands stay thin: flags become an Options
// struct whose Run calls into a package that tests can call directly.
func newRootCommand(streams IOStreams) *cobra.Command {
	return newRootCommandWith(&GlobalOptions{}, streams)
}

// newRootCommandWith builds the tree around g, which the flags fill: a unit test hands in g
// with newClients set.
func newRootCommandWith(g *GlobalOptions, streams IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "manila-setup",
		Short: "Make OpenStack Manila ReadWriteMany storage work on OpenShift on OpenStack",
		Long: `manila-setup makes shared (ReadWriteMany) storage from OpenStack Manila work on OpenShift
clusters running on OpenStack.

Manila usually exports its shares on a dedicated storage network that worker nodes are not
attached to, so pods hang in ContainerCreating with "mount.nfs: Connection timed out".
manila-setup attaches the workers to that network, at install time (install-config) or on a
running cluster (MachineSets), and runs an operator that installs the Manila CSI driver.

Exit codes: 0 success, 1 invalid input or a failed check, 2 usage or environment error.`,
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			g.Complete()
			return g.Validate()
		},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	// Flag mistakes are usage errors (exit 2), and say how to get help.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError("%v\nSee '%s --help'.", err, cmd.CommandPath())
	})

	pf := root.PersistentFlags()
	pf.StringVar(&g.Kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	pf.StringVar(&g.OSCloud, "os-cloud", "", "name of the cloud in clouds.yaml (default: $OS_CLOUD)")
	pf.StringVar(&g.OSClientConfigFile, "os-client-config-file", "", "path to clouds.yaml (default: $OS_CLIENT_CONFIG_FILE, then the standard locations)")
	pf.StringVarP(&g.Output, "output", "o", outputText, "output format: text, json or yaml")
	pf.CountVarP(&g.Verbosity, "verbose", "v", "more detail on standard error; repeat for more (-vv)")

	root.AddGroup(
		&cobra.Group{ID: "work", Title: "Storage network commands:"},
		&cobra.Group{ID: "other", Title: "Other commands:"},
	)
	for _, c := range []*cobra.Command{
		newClusterAPICommand(g, streams),
		newControlPlaneCommand(g, streams),
		newDiagnoseCommand(g, streams),
		newInstallConfigCommand(g, streams),
		newMachineSetsCommand(g, streams),
		newMustGatherCommand(g, streams),
		newNetworksCommand(g, streams),
		newNodePoolsCommand(g, streams),
		newOperatorCommand(g, streams),
		newStorageClassesCommand(g, streams),
	} {
		c.GroupID = "work"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{
		newVersionCommand(g, streams),
		newCompletionCommand(streams),
	} {
		c.GroupID = "other"
		root.AddCommand(c)
	}
	registerValueCompletions(root, g)
	root.SetHelpCommandGroupID("other")
	return root
}

// groupCommand is a command that only holds subcommands. Run alone it prints its help; with an
// argument it does not know it fails as a usage error instead of silently showing help.
func groupCommand(use, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError("unknown command %q for %q\nSee '%s --help'.", args[0], cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
}

// run executes the command line and returns the process exit code.
func run(args []string, streams IOStreams) int {
	return runWith(&GlobalOptions{}, args, streams)
}

// runWith is run around g (newRootCommandWith).
func runWith(g *GlobalOptions, args []string, streams IOStreams) int {
	root := newRootCommandWith(g, streams)
	root.SetArgs(args)
	err := root.Execute()
	if err != nil && !errors.Is(err, errSilent) {
		fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
	}
	return exitCodeOf(err)
}
