package helpexamples

import (
	"reflect"
	"testing"
)

const sampleHelp = `Deploy it with:
  manila-setup operator render | kubectl apply -f -
See "manila-setup networks discover" first; manila-setup prose is no command.

Usage:
  manila-setup operator bundle -d DIR [flags]
  manila-setup operator [command]

Examples:
  manila-setup installconfig patch install-config.yaml \
      --network <storage network ID>
  source <(manila-setup completion bash)
  manila-setup machinesets patch --network ID [--name N... | --selector L]

Available Commands:
  bundle      Write the operator as an OLM bundle

Flags:
      --discover   as 'manila-setup networks discover' finds it

Use "manila-setup operator [command] --help" for more information about a command.
`

func TestFromHelp(t *testing.T) {
	got := FromHelp(sampleHelp)
	want := []Example{
		{Source: FromDescription, Line: "manila-setup operator render", Args: []string{"operator", "render"}},
		{Source: FromDescription, Line: "manila-setup networks discover", Args: []string{"networks", "discover"}},
		{Source: FromUsage, Line: "manila-setup operator bundle -d DIR", Args: []string{"operator", "bundle", "-d", "DIR"}, Synopsis: true},
		{Source: FromExamples, Line: "manila-setup installconfig patch install-config.yaml --network <storage network ID>",
			Args: []string{"installconfig", "patch", "install-config.yaml", "--network", "storage_network_ID"}},
		{Source: FromExamples, Line: "manila-setup completion bash", Args: []string{"completion", "bash"}},
		{Source: FromExamples, Line: "manila-setup machinesets patch --network ID [--name N... | --selector L]",
			Args: []string{"machinesets", "patch", "--network", "ID", "--name", "N", "--selector", "L"}, Synopsis: true},
		{Source: FromFlags, Line: "manila-setup networks discover", Args: []string{"networks", "discover"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromHelp:\n got %+v\nwant %+v", got, want)
	}
	if subs := Subcommands(sampleHelp); !reflect.DeepEqual(subs, []string{"bundle"}) {
		t.Errorf("Subcommands: %q, want [bundle]", subs)
	}
}
