package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/operator"
)

// Set at build time by the Makefile: -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// VersionInfo is what `manila-setup version` reports.
type VersionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// OperatorImage and Operands are the images `operator render|install` put in the cluster
	// by default (OperatorImage is empty for a build without a version).
	OperatorImage string             `json:"operatorImage,omitempty"`
	Operands      []operator.Operand `json:"operands"`
}

func currentVersion() VersionInfo {
	return VersionInfo{
		Version:   version,
		Commit:    commit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,

		OperatorImage: operator.DefaultOperatorImage,
		Operands:      operator.Operands,
	}
}

func newVersionCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := currentVersion()
			if g.Output != outputText {
				return printStructured(streams.Out, g.Output, v)
			}
			_, err := fmt.Fprintf(streams.Out, "manila-setup %s (commit %s, %s, %s)\n", v.Version, v.Commit, v.GoVersion, v.Platform)
			return err
		},
	}
}
