package main

import (
	"bytes"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A boolean flag whose help has a `quoted` word shows that word as a value it does not take
// (`--discover networks discover`): help texts quote with ” or "" instead.
func TestBoolFlagsShowNoValue(t *testing.T) {
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			if f.Value.Type() != "bool" {
				return
			}
			if name, _ := pflag.UnquoteUsage(f); name != "" {
				t.Errorf("%s --%s shows a value %q in its help", c.CommandPath(), f.Name, name)
			}
		}
		c.LocalFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand(IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}))
}
