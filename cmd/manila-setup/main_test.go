package main

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// runCLI runs the command tree in-process and returns exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

func TestHelpListsTheFourGroups(t *testing.T) {
	code, out, _ := runCLI(t, "--help")
	if code != exitOK {
		t.Fatalf("exit code %d, want 0", code)
	}
	for _, group := range []string{"installconfig", "machinesets", "networks", "operator", "version", "completion"} {
		if !strings.Contains(out, "\n  "+group+" ") {
			t.Errorf("--help does not list %q:\n%s", group, out)
		}
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"group alone prints help", []string{"networks"}, exitOK, ""},
		{"unknown subcommand", []string{"installconfig", "frobnicate"}, exitUsage, `unknown command "frobnicate" for "manila-setup installconfig"`},
		{"unknown top-level command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"unknown flag", []string{"version", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		{"bad output format", []string{"version", "-o", "xml"}, exitUsage, `-o/--output: Invalid value: "xml": must be one of text, json, yaml`},
		{"version takes no arguments", []string{"version", "extra"}, exitUsage, `unknown command "extra"`},
		{"completion needs a shell", []string{"completion"}, exitUsage, "expected exactly one shell"},
		{"completion rejects powershell", []string{"completion", "powershell"}, exitUsage, `Invalid value: "powershell"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr: %s)", code, tt.wantCode, errOut)
			}
			if tt.wantErr == "" && errOut != "" {
				t.Errorf("unexpected stderr: %s", errOut)
			}
			if !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.wantErr)
			}
		})
	}
}

func TestVersionOutputs(t *testing.T) {
	code, out, _ := runCLI(t, "version", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit code %d", code)
	}
	var got VersionInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("version -o json is not JSON: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, currentVersion()) || !strings.HasPrefix(got.GoVersion, "go") || len(got.Operands) == 0 {
		t.Errorf("version -o json = %+v, want %+v", got, currentVersion())
	}

	_, out, _ = runCLI(t, "version", "-o", "yaml")
	var fromYAML VersionInfo
	if err := yaml.Unmarshal([]byte(out), &fromYAML); err != nil || !reflect.DeepEqual(fromYAML, got) {
		t.Errorf("version -o yaml = %+v (%v), want %+v", fromYAML, err, got)
	}

	_, out, _ = runCLI(t, "version")
	if !strings.HasPrefix(out, "manila-setup "+got.Version+" (commit "+got.Commit) {
		t.Errorf("text version = %q", out)
	}
}

func TestCompletionScripts(t *testing.T) {
	for shell, marker := range map[string]string{"bash": "__start_manila-setup", "zsh": "#compdef manila-setup", "fish": "complete -c manila-setup"} {
		code, out, _ := runCLI(t, "completion", shell)
		if code != exitOK || !strings.Contains(out, marker) {
			t.Errorf("completion %s: exit %d, output lacks %q", shell, code, marker)
		}
	}
}

func TestGlobalOptionsComplete(t *testing.T) {
	t.Setenv("KUBECONFIG", "/from/env")
	t.Setenv("OS_CLOUD", "envcloud")
	t.Setenv("OS_CLIENT_CONFIG_FILE", "/env/clouds.yaml")

	g := GlobalOptions{OSCloud: "flagcloud"}
	g.Complete()
	if g.Kubeconfig != "/from/env" || g.OSCloud != "flagcloud" || g.OSClientConfigFile != "/env/clouds.yaml" {
		t.Errorf("flag or environment not honoured: %+v", g)
	}

	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", "/home/admin")
	g = GlobalOptions{}
	g.Complete()
	if g.Kubeconfig != "/home/admin/.kube/config" || g.OSCloud != "envcloud" {
		t.Errorf("defaults not applied: %+v", g)
	}
}

// TestMain keeps a developer's cloud out of the tests: with $OS_CLOUD set, installconfig
// validate and patch would ask that cloud. Tests that want the loopback cloud set it again
// (testenv.NewCloud).
func TestMain(m *testing.M) {
	os.Unsetenv("OS_CLOUD")
	code := m.Run()
	for _, f := range afterTests {
		f()
	}
	os.Exit(code)
}

// afterTests run once every test is done: the integration tests add the removal of the binaries
// they built.
var afterTests []func()

func TestRepeatedGlobalFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "/env/kubeconfig")
	env := func(k string) string { return map[string]string{"OS_CLIENT_CONFIG_FILE": "/env/clouds.yaml"}[k] }
	for _, c := range []struct {
		kube, clouds string
		want         []string
	}{
		{"/env/kubeconfig", "/env/clouds.yaml", nil},
		{"/sandbox/kubeconfig", "", []string{"--kubeconfig", "/sandbox/kubeconfig"}},
		{"/env/kubeconfig", "/sandbox/clouds.yaml", []string{"--os-client-config-file", "/sandbox/clouds.yaml"}},
	} {
		got := repeatedGlobalFlags(&GlobalOptions{Kubeconfig: c.kube, OSClientConfigFile: c.clouds}, env)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %s: %v, want %v", c.kube, c.clouds, got, c.want)
		}
	}
}

// TestValueCompletion: Tab completes values, not only flags: the clouds of clouds.yaml and the
// output formats (the MachineSets and networks are in TestDay2Walkthrough, against a cluster
// and a cloud).
func TestValueCompletion(t *testing.T) {
	dir := t.TempDir()
	clouds := dir + "/clouds.yaml"
	if err := os.WriteFile(clouds, []byte("clouds:\n  prod: {auth: {auth_url: 'https://k.example:5000/v3'}}\n  lab: {auth: {auth_url: 'https://l.example:5000/v3'}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OS_CLIENT_CONFIG_FILE", clouds)
	code, out, _ := runCLI(t, "__complete", "machinesets", "list", "--os-cloud", "")
	if code != exitOK || !strings.Contains(out, "lab\nprod\n") || !strings.Contains(out, ":4") {
		t.Errorf("--os-cloud completion: exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI(t, "__complete", "networks", "discover", "-o", "")
	if code != exitOK || !strings.Contains(out, "text\njson\nyaml\n") {
		t.Errorf("-o completion: exit %d:\n%s", code, out)
	}
	// Without a cloud named there are no networks to offer, and nothing is printed but the
	// directive.
	t.Setenv("OS_CLOUD", "")
	code, out, _ = runCLI(t, "__complete", "machinesets", "patch", "--network", "")
	if code != exitOK || strings.TrimSpace(out) != ":4" {
		t.Errorf("--network completion without a cloud: exit %d:\n%q", code, out)
	}
}

// Run as gather (the image's /usr/bin/gather), the CLI is must-gather into /must-gather.
func TestArgsFor(t *testing.T) {
	for _, tt := range []struct{ argv, want []string }{
		{[]string{"/usr/local/bin/manila-setup", "version"}, []string{"version"}},
		{[]string{"/usr/bin/gather"}, []string{"must-gather", "--dest-dir", "/must-gather"}},
		{[]string{"gather", "-v"}, []string{"must-gather", "--dest-dir", "/must-gather", "-v"}},
		{nil, nil},
	} {
		if got := argsFor(tt.argv); strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("argsFor(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}
