package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/attach/rollout"
)

func TestMachineSetsHelp(t *testing.T) {
	code, out, _ := runCLI(t, "machinesets", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, sub := range []string{"list", "patch", "rollout"} {
		if !strings.Contains(out, "\n  "+sub+" ") {
			t.Errorf("machinesets --help does not list %q:\n%s", sub, out)
		}
	}
	_, out, _ = runCLI(t, "machinesets", "rollout", "--help")
	if strings.Contains(out, "poll-interval") {
		t.Error("the hidden --poll-interval shows in the help")
	}
}

// TestMachineSetsFlagErrors: mistakes in the flags are caught before any cluster is contacted
// (the kubeconfig points nowhere), with the right exit code and a sentence naming the flag.
func TestMachineSetsFlagErrors(t *testing.T) {
	const net = "3f5a9c3e-5d1b-4e0a-9a57-6b1f0c2d7e11"
	nowhere := []string{"--kubeconfig", "/nonexistent/kubeconfig"}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"patch needs a network", []string{"machinesets", "patch"}, exitUsage, "--network is required"},
		{"patch rejects a name as ID", []string{"machinesets", "patch", "--network", "storage"}, exitInvalid, `--network[0]: Invalid value: "storage": must be a UUID v4`},
		{"patch rejects a bad security group", []string{"machinesets", "patch", "--network", net, "--security-group", net + "x"}, exitInvalid, "--security-group[0]: Invalid value"},
		{"patch rejects the same network twice", []string{"machinesets", "patch", "--network", net + "," + strings.ToUpper(net)}, exitInvalid, "--network[1]: Duplicate value"},
		{"patch name and selector", []string{"machinesets", "patch", "--network", net, "--name", "a", "--selector", "b=c"}, exitUsage, "--name and --selector cannot be used together"},
		{"patch without a kubeconfig", []string{"machinesets", "patch", "--network", net}, exitUsage, "kubeconfig /nonexistent/kubeconfig: stat /nonexistent/kubeconfig: no such file"},
		{"rollout zero and zero", []string{"machinesets", "rollout", "--max-surge", "0"}, exitUsage, "cannot both be 0"},
		{"rollout negative", []string{"machinesets", "rollout", "--max-unavailable", "-1"}, exitUsage, "cannot be negative"},
		{"rollout bad timeout", []string{"machinesets", "rollout", "--timeout", "soon"}, exitUsage, `invalid argument "soon" for "--timeout"`},
		{"list bad ID", []string{"machinesets", "list", "--network", "x"}, exitInvalid, `--network[0]: Invalid value: "x"`},
		{"list without a kubeconfig", []string{"machinesets", "list"}, exitUsage, "pass --kubeconfig or set KUBECONFIG"},
		{"unknown subcommand", []string{"machinesets", "scale"}, exitUsage, `unknown command "scale"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OS_CLOUD", "")
			code, out, errOut := runCLI(t, append(tt.args, nowhere...)...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q (stdout %q)", code, errOut, tt.wantCode, tt.wantErr, out)
			}
		})
	}
}

// A rollout stopped by Ctrl-C or SIGTERM ends with 130 and says how to continue; a failed
// Machine with 1; anything else with 2.
func TestRolloutExit(t *testing.T) {
	stopped := fmt.Errorf("waiting for Machine x: %w", context.Canceled)
	if err := rolloutExit(stopped); exitCodeOf(err) != exitInterrupted || !strings.Contains(err.Error(), "run `manila-setup machinesets rollout` again to continue") {
		t.Errorf("interrupted: exit %d, %v", exitCodeOf(err), err)
	}
	if err := rolloutExit(&rollout.Error{}); exitCodeOf(err) != exitInvalid {
		t.Errorf("a failed Machine: exit %d", exitCodeOf(err))
	}
	if err := rolloutExit(errors.New("connection refused")); exitCodeOf(err) != exitUsage {
		t.Errorf("the cluster: exit %d", exitCodeOf(err))
	}
	if rolloutExit(nil) != nil {
		t.Error("success is not an error")
	}
}
