package main

import (
	"strings"
	"testing"
)

// Without a terminal the wizard refuses with a usage error and names the commands that do the
// same from flags.
func TestNetworksAttachNeedsATerminal(t *testing.T) {
	code, out, errOut := runCLI(t, "networks", "attach")
	if code != exitUsage || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	for _, want := range []string{"needs a terminal", "manila-setup networks discover", "manila-setup machinesets patch --network ID", "manila-setup machinesets rollout"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestNetworksAttachFlags(t *testing.T) {
	code, _, errOut := runCLI(t, "networks", "attach", "--check-timeout", "0s")
	if code != exitUsage || !strings.Contains(errOut, `--check-timeout: Invalid value: "0s": must be positive`) {
		t.Errorf("--check-timeout 0s: exit %d, %s", code, errOut)
	}
	code, out, _ := runCLI(t, "networks", "attach", "--help")
	for _, want := range []string{"--dry-run", "--no-color", "NO_COLOR", "? help on every screen, esc back, q quit"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("--help lacks %q (exit %d)", want, code)
		}
	}
}

func TestNetworksAttachHonoursNoColor(t *testing.T) {
	o := &NetworksAttachOptions{}
	t.Setenv("NO_COLOR", "")
	if err := o.Complete(nil, nil); err != nil || !o.NoColor {
		t.Errorf("NO_COLOR set (even empty): NoColor %v, %v", o.NoColor, err)
	}
}
