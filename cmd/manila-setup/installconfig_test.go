package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	icNet = "837e03cd-a06c-494f-9f58-88263af211ef"
	icSG  = "c697a7ae-23c6-47c3-b150-56ecc9595619"
	icAdd = "7097dc40-535a-4b98-a484-d00025ce73fb"
)

func corpusFile(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "installconfig", "testdata", "corpus", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// writeTemp copies a corpus file to a temporary install-config.yaml with the given mode.
func writeTemp(t *testing.T, name string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "install-config.yaml")
	if err := os.WriteFile(path, corpusFile(t, name), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func runCLIInput(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

func TestInstallConfigValidate(t *testing.T) {
	valid := writeTemp(t, "valid-typical", 0o600)
	invalid := writeTemp(t, "invalid-uuid-version", 0o600)
	warn := writeTemp(t, "warn-kelvin-sign-key", 0o600)
	clouds := filepath.Join(t.TempDir(), "clouds.yaml")
	if err := os.WriteFile(clouds, []byte("clouds:\n  other:\n    auth: {auth_url: http://127.0.0.1:9/v3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A cloud named in the environment would turn the cloud checks on.
	t.Setenv("OS_CLOUD", "")
	tests := []struct {
		name           string
		args           []string
		stdin          string
		code           int
		stdout, stderr string // exact; stderr "" means empty
		stdoutContains string
		stderrContains string
		// note is the offline note's reason when one is expected on stderr (then left out of
		// the comparisons above).
		note string
	}{
		{name: "valid", args: []string{valid}, code: 0, stdout: valid + ": valid\n", note: "no cloud named"},
		{name: "invalid", args: []string{invalid}, code: 1, stdout: `compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: "aa1788ba-e63a-11f1-aa6c-02fc00000001": must be a UUID v4, not a version 1 UUID
compute[0].platform.openstack.additionalNetworkIDs[1]: Invalid value: "00000000-0000-0000-0000-000000000000": must be a UUID v4, not a version 0 UUID
` + invalid + ": invalid, 2 errors\n"},
		{name: "warnings pass", args: []string{warn}, code: 0, stdoutContains: warn + ": valid, 1 warning\n"},
		{name: "warnings fail with --strict", args: []string{"--strict", warn}, code: 1, stdoutContains: "warning: compute[0].platform.openstack.additionalNetwor"},
		{name: "stdin", args: []string{"-"}, stdin: "platform: {aws: {}}\n", code: 1,
			stdout: "platform: Unsupported value: \"aws\": manila-setup checks OpenStack install-configs; supported values: \"openstack\"\n<stdin>: invalid, 1 error\n"},
		{name: "malformed", args: []string{"-"}, stdin: "a:\n\tb: 1\n", code: 1,
			stdout: "<stdin>: line 2, column 1: malformed YAML: found character that cannot start any token (a tab: YAML indents with spaces only)\n<stdin>: invalid, 1 error\n"},
		{name: "missing file", args: []string{"/nonexistent/install-config.yaml"}, code: 2,
			stderr: "error: open /nonexistent/install-config.yaml: no such file or directory\n"},
		{name: "directory", args: []string{t.TempDir()}, code: 2, stderrContains: "is a directory, not an install-config"},
		{name: "no file", args: nil, code: 2, stderrContains: "expected exactly one FILE (or - for standard input), got 0 arguments"},
		{name: "two files", args: []string{valid, valid}, code: 2, stderrContains: "got 2 arguments"},
		// A cloud that cannot be asked: the offline results are printed, and exit 2 says the
		// check is incomplete.
		{name: "os-cloud unknown", args: []string{"--os-cloud", "mycloud", "--os-client-config-file", clouds, invalid}, code: 2,
			stdoutContains: invalid + ": invalid, 2 errors\n",
			stderrContains: `error: the cloud checks did not run, only the offline ones: cloud "mycloud" is not in ` + clouds},
		{name: "offline wins over os-cloud", args: []string{"--offline", "--os-cloud", "mycloud", "--os-client-config-file", clouds, valid}, code: 0,
			stdout: valid + ": valid\n", note: "--offline"},
		{name: "bad timeout with a cloud", args: []string{"--os-cloud", "mycloud", "--timeout", "0s", valid}, code: 2,
			stderrContains: `--timeout: Invalid value: "0s"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLIInput(t, tt.stdin, append([]string{"installconfig", "validate"}, tt.args...)...)
			// "valid" must not read as "the networks exist": without a cloud, stderr says so.
			note, rest, _ := strings.Cut(errOut, "\n")
			if strings.HasPrefix(note, "note: offline checks only") {
				errOut = rest
				if tt.note != "" && !strings.Contains(note, "("+tt.note+")") {
					t.Errorf("note %q, want the reason %q", note, tt.note)
				}
			} else if tt.note != "" {
				t.Errorf("no offline note on stderr: %q", errOut)
			}
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errOut)
			}
			if tt.stdoutContains == "" && out != tt.stdout {
				t.Errorf("stdout\n%q\nwant\n%q", out, tt.stdout)
			}
			if !strings.Contains(out, tt.stdoutContains) {
				t.Errorf("stdout %q lacks %q", out, tt.stdoutContains)
			}
			if tt.stderrContains == "" && errOut != tt.stderr {
				t.Errorf("stderr %q, want %q", errOut, tt.stderr)
			}
			if !strings.Contains(errOut, tt.stderrContains) {
				t.Errorf("stderr %q lacks %q", errOut, tt.stderrContains)
			}
		})
	}
}

func TestInstallConfigValidateStructured(t *testing.T) {
	invalid := writeTemp(t, "invalid-uuid-version", 0o644)
	code, out, _ := runCLI(t, "installconfig", "validate", "-o", "json", invalid)
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	want := `[
  {
    "field": "compute[0].platform.openstack.additionalNetworkIDs[0]",
    "type": "FieldValueInvalid",
    "value": "aa1788ba-e63a-11f1-aa6c-02fc00000001",
    "detail": "must be a UUID v4, not a version 1 UUID",
    "severity": "error",
    "rule": "uuid-version"
  },
  {
    "field": "compute[0].platform.openstack.additionalNetworkIDs[1]",
    "type": "FieldValueInvalid",
    "value": "00000000-0000-0000-0000-000000000000",
    "detail": "must be a UUID v4, not a version 0 UUID",
    "severity": "error",
    "rule": "uuid-version"
  }
]
`
	if out != want {
		t.Errorf("-o json:\n%s\nwant\n%s", out, want)
	}
	code, out, _ = runCLI(t, "installconfig", "validate", "-o", "json", writeTemp(t, "valid-typical", 0o644))
	if code != 0 || out != "[]\n" {
		t.Errorf("valid -o json: exit %d, %q", code, out)
	}
	code, out, _ = runCLI(t, "installconfig", "validate", "-o", "yaml", invalid)
	if code != 1 || !strings.HasPrefix(out, "- detail: must be a UUID v4, not a version 1 UUID\n  field: compute[0].platform.openstack.additionalNetworkIDs[0]\n  rule: uuid-version\n  severity: error\n  type: FieldValueInvalid\n  value: aa1788ba-e63a-11f1-aa6c-02fc00000001\n") {
		t.Errorf("-o yaml: exit %d\n%s", code, out)
	}
}

func TestInstallConfigPatch(t *testing.T) {
	path := writeTemp(t, "valid-typical", 0o640)
	orig, _ := os.ReadFile(path)

	// --dry-run: the diff, and nothing written.
	code, out, errOut := runCLI(t, "installconfig", "patch", path, "--network", icAdd, "--dry-run")
	wantDiff := "--- a/" + path + "\n+++ b/" + path + "\n@@ -11,6 +11,7 @@\n       type: m1.xlarge\n       additionalNetworkIDs:\n       - " + icNet + "  # storage-net (Manila NFS exports)\n+      - " + icAdd + "\n       additionalSecurityGroupIDs:\n       - " + icSG + "  # allow-nfs\n controlPlane:\n"
	if code != 0 || out != wantDiff || errOut != "" {
		t.Fatalf("dry run: exit %d\nstdout:\n%s\nwant:\n%s\nstderr: %s", code, out, wantDiff, errOut)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, orig) {
		t.Fatal("--dry-run changed the file")
	}
	if _, err := os.Stat(path + ".bak"); !os.IsNotExist(err) {
		t.Fatal("--dry-run left a backup")
	}

	// The real thing: written atomically, mode kept, backup kept.
	code, out, errOut = runCLI(t, "installconfig", "patch", path, "--network", strings.ToUpper(icAdd))
	wantOut := "compute[0].platform.openstack.additionalNetworkIDs: added " + icAdd + "\n" + path + ": written; the previous version is in " + path + ".bak\n"
	if code != 0 || out != wantOut || errOut != "" {
		t.Fatalf("patch: exit %d\nstdout: %q\nwant:   %q\nstderr: %s", code, out, wantOut, errOut)
	}
	now, _ := os.ReadFile(path)
	if want := strings.Replace(string(orig), icNet+"  # storage-net (Manila NFS exports)\n", icNet+"  # storage-net (Manila NFS exports)\n      - "+icAdd+"\n", 1); string(now) != want {
		t.Errorf("patched file:\n%s", now)
	}
	if bak, _ := os.ReadFile(path + ".bak"); !bytes.Equal(bak, orig) {
		t.Error("the backup is not the original")
	}
	for _, p := range []string{path, path + ".bak"} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v (%v), want 0640", p, st.Mode().Perm(), err)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 2 {
		t.Errorf("the directory holds %d files, want the file and its backup", len(entries))
	}

	// Idempotent.
	code, out, _ = runCLI(t, "installconfig", "patch", path, "--network", icAdd)
	if code != 0 || out != path+": nothing to change: every selected pool already has these IDs\n" {
		t.Errorf("second run: exit %d, %q", code, out)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, now) {
		t.Error("the second run changed the file")
	}
}

func TestInstallConfigPatchErrors(t *testing.T) {
	invalid := writeTemp(t, "invalid-not-uuid", 0o600)
	orig, _ := os.ReadFile(invalid)
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"invalid file", []string{invalid, "--network", icAdd}, 1, "error: " + invalid + " not patched: the install-config has 3 errors; fix them first (patch only rewrites non-canonical IDs)\n" +
			`compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: "storage-net": must be a UUID v4: the ID of the network, not its name` + "\n" +
			`compute[0].platform.openstack.additionalNetworkIDs[2]: Invalid value: "a2c6e413-56e4-47d7-b06c-e8d49773801f ": must be a UUID v4, without spaces around it` + "\n" +
			`compute[0].platform.openstack.additionalSecurityGroupIDs[0]: Invalid value: "allow-nfs": must be a UUID v4: the ID of the security group, not its name` + "\n"},
		{"bad ID", []string{invalid, "--network", "storage-net"}, 2, "error: --network: Invalid value: \"storage-net\": must be a UUID v4\n"},
		{"no ID", []string{invalid}, 2, "error: installconfig patch: give at least one --network or --security-group, or --discover\n"},
		{"discover without a cloud", []string{invalid, "--discover"}, 2, "error: installconfig patch: --discover asks the cloud: name it with --os-cloud (or $OS_CLOUD), without --offline\n"},
		{"unknown pool", []string{writeTemp(t, "valid-typical", 0o600), "--network", icAdd, "--pool", "infra"}, 2,
			"error: --pool: Not found: \"infra\": no compute pool has this name; the pools are \"worker\"\n"},
		{"missing file", []string{"/nonexistent/ic.yaml", "--network", icAdd}, 2, "error: open /nonexistent/ic.yaml: no such file or directory\n"},
		{"json to stdout", []string{"-", "--network", icAdd, "-o", "json"}, 2, "error: installconfig patch: -o json cannot be combined with FILE - (the patched file goes to standard output)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"installconfig", "patch"}, tt.args...)...)
			if code != tt.code || errOut != tt.stderr || out != "" {
				t.Errorf("exit %d (want %d)\nstdout: %q\nstderr: %q\nwant:   %q", code, tt.code, out, errOut, tt.stderr)
			}
		})
	}
	if now, _ := os.ReadFile(invalid); !bytes.Equal(now, orig) {
		t.Error("a refused patch changed the file")
	}
	if _, err := os.Stat(invalid + ".bak"); !os.IsNotExist(err) {
		t.Error("a refused patch left a backup")
	}
}

func TestInstallConfigPatchStdinAndJSON(t *testing.T) {
	in := string(corpusFile(t, "valid-minimal"))
	code, out, errOut := runCLIInput(t, in, "installconfig", "patch", "-", "--security-group", icSG)
	want := in + "compute:\n- name: worker\n  platform:\n    openstack:\n      additionalSecurityGroupIDs:\n      - " + icSG + "\n"
	if code != 0 || out != want || errOut != "" {
		t.Errorf("stdin: exit %d\n%s\nstderr: %s", code, out, errOut)
	}

	path := writeTemp(t, "valid-typical", 0o600)
	code, out, _ = runCLI(t, "installconfig", "patch", path, "--network", icAdd, "-o", "json", "--dry-run")
	var report struct {
		Changed, DryRun, Written bool
		Changes                  []struct {
			Field string
			Added []string
		}
		Diff     string
		Problems []any
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 0 {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	if !report.Changed || !report.DryRun || report.Written || len(report.Changes) != 1 ||
		report.Changes[0].Field != "compute[0].platform.openstack.additionalNetworkIDs" ||
		!strings.Contains(report.Diff, "+      - "+icAdd+"\n") || report.Problems == nil {
		t.Errorf("report: %+v", report)
	}
}

func TestInstallConfigHelp(t *testing.T) {
	code, out, _ := runCLI(t, "installconfig", "--help")
	if code != 0 || !strings.Contains(out, "\n  patch ") || !strings.Contains(out, "\n  validate ") {
		t.Errorf("installconfig --help:\n%s", out)
	}
}
