package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/manila-setup/manila-setup/test/helpexamples"
)

// TestHelpExamplesParse reads the help of every command and parses every manila-setup command
// line it prints (examples, usage lines, commands in the description and in flags' help) with
// the real commands' flags, on a fresh command tree each, then runs the checks that come before
// a command's action: its arguments, required flags and the global flags' validation (-o).
// A help example that does not run as printed fails here, naming where it is shown.
func TestHelpExamplesParse(t *testing.T) {
	total := 0
	for _, c := range allCommands(newRootCommand(testStreams())) {
		for _, ex := range helpexamples.FromHelp(helpOf(t, c)) {
			total++
			t.Logf("%s --help, %s: %s", c.CommandPath(), ex.Source, ex.Line)
			if err := checkExample(ex); err != nil {
				t.Errorf("%s --help, %s: %q: %v", c.CommandPath(), ex.Source, ex.Line, err)
			}
		}
	}
	// The walk and the extraction found the examples at all (about 60 when this was written).
	if total < 40 {
		t.Errorf("only %d command lines found in the help texts: the extraction is broken", total)
	}
}

// The check rejects what a user would have run into, each with its reason.
func TestHelpExampleCheckRejects(t *testing.T) {
	for line, want := range map[string]string{
		"manila-setup operator bundle -o bundle":             `-o/--output: Invalid value: "bundle"`,
		"manila-setup operator bundle -o DIR":                `-o/--output: Invalid value: "DIR"`,
		"manila-setup networks list --no-such-flag":          "unknown flag: --no-such-flag",
		"manila-setup machinesets rollout --max-surge many":  `invalid argument "many"`,
		"manila-setup machinesets lst":                       `unknown command "lst"`,
		"manila-setup netwroks list":                         `unknown command "netwroks"`,
		"manila-setup installconfig validate":                "expected exactly one FILE",
		"manila-setup networks discover extra":               `unknown command "extra"`,
		"manila-setup clusterapi rollout --timeout tomorrow": `invalid argument "tomorrow"`,
		"manila-setup operator bundle --output-dir":          "flag needs an argument",
	} {
		exs := helpexamples.FromHelp("Examples:\n  " + line)
		if len(exs) != 1 {
			t.Errorf("%q: %d examples found, want 1", line, len(exs))
			continue
		}
		err := checkExample(exs[0])
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", line, err, want)
		}
	}
}

func testStreams() IOStreams {
	return IOStreams{In: &bytes.Buffer{}, Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}
}

// allCommands is the tree from root, depth first, with cobra's help command as Execute adds it.
func allCommands(root *cobra.Command) []*cobra.Command {
	root.InitDefaultHelpCmd()
	var out []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		out = append(out, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// helpOf is the command's --help output.
func helpOf(t *testing.T, c *cobra.Command) string {
	t.Helper()
	var b bytes.Buffer
	c.SetOut(&b)
	c.InitDefaultHelpFlag()
	if err := c.Help(); err != nil {
		t.Fatalf("%s --help: %v", c.CommandPath(), err)
	}
	return b.String()
}

// checkExample parses one example on a fresh tree as Execute would, and runs what Execute runs
// before the action: argument checks, required flags and flag groups, and the persistent
// pre-run (the global flags' validation). The commands' own Validate runs inside their action
// with what Complete read from files and the environment: the integration test in
// test/helpexamples runs the examples for that.
func checkExample(ex helpexamples.Example) error {
	root := newRootCommand(testStreams())
	root.InitDefaultHelpCmd()
	cmd, rest, err := root.Find(ex.Args)
	if err != nil {
		return fmt.Errorf("no such command: %w", err)
	}
	if cmd.DisableFlagParsing {
		return nil // operator start passes everything on to manila-setup-operator
	}
	if err := cmd.ParseFlags(rest); errors.Is(err, pflag.ErrHelp) {
		return nil // --help shows the help, whatever the other flags say
	} else if err != nil {
		return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
	}
	args := cmd.Flags().Args()
	if cmd.HasSubCommands() && len(args) > 0 {
		return fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	if !ex.Synopsis {
		if err := cmd.ValidateArgs(args); err != nil {
			return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
		}
		if err := cmd.ValidateRequiredFlags(); err != nil {
			return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
		}
		if err := cmd.ValidateFlagGroups(); err != nil {
			return fmt.Errorf("%s: %w", cmd.CommandPath(), err)
		}
	}
	return preRun(cmd, args)
}

// preRun runs the pre-runs Execute runs: the nearest persistent one up the tree, then the
// command's own.
func preRun(cmd *cobra.Command, args []string) error {
	for p := cmd; p != nil; p = p.Parent() {
		if p.PersistentPreRunE != nil {
			if err := p.PersistentPreRunE(cmd, args); err != nil {
				return err
			}
			break
		}
		if p.PersistentPreRun != nil {
			p.PersistentPreRun(cmd, args)
			break
		}
	}
	if cmd.PreRunE != nil {
		return cmd.PreRunE(cmd, args)
	}
	return nil
}
