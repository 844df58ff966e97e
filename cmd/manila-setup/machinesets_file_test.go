package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	fileNet = "3c2ef2f4-921b-40a6-94e7-55c1d8ef2c5b"
	fileSG  = "6dbbf36b-454b-453e-86b4-2310894cc724"
)

// TestMachineSetsPatchFile: -f patches a file with no cluster and no cloud: to standard output,
// from standard input, in place (with .bak and the mode kept), as a dry run, as JSON; and says
// clearly what is wrong with bad input.
func TestMachineSetsPatchFile(t *testing.T) {
	t.Setenv("OS_CLOUD", "")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none")) // no cluster is contacted
	original, err := os.ReadFile("../../machinesets/testdata/corpus/installer-default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "worker.yaml")
	if err := os.WriteFile(path, original, 0o640); err != nil {
		t.Fatal(err)
	}
	added := []string{"- uuid: " + fileNet + "\n            noAllowedAddressPairs: true\n", "- uuid: " + fileSG + "\n", "manila-setup.io/storage-attachment: "}

	code, out, errOut := runCLI(t, "machinesets", "patch", "-f", path, "--network", fileNet, "--security-group", fileSG)
	if code != exitOK || !strings.Contains(errOut, "ostest-8x2kq-worker-0  patched  added network "+fileNet) {
		t.Fatalf("to standard output: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, a := range added {
		if !strings.Contains(out, a) {
			t.Errorf("the patched file lacks %q:\n%s", a, out)
		}
	}
	if !onlyLinesAdded(string(original), out) {
		t.Errorf("the output is not the file with lines added:\n%s", out)
	}
	if now, _ := os.ReadFile(path); string(now) != string(original) {
		t.Error("the file changed without --in-place")
	}
	patched := out

	if code, out, _ := runCLIInput(t, string(original), "machinesets", "patch", "-f", "-", "--network", fileNet, "--security-group", fileSG); code != exitOK || !sameButTimes(out, patched) {
		t.Errorf("from standard input: exit %d, output differs:\n%s", code, out)
	}

	code, out, _ = runCLI(t, "machinesets", "patch", "-f", path, "--network", fileNet, "--dry-run")
	if code != exitOK || !strings.Contains(out, "+          - uuid: "+fileNet) || !strings.Contains(out, "Dry run: nothing was written.") {
		t.Errorf("dry run: exit %d\n%s", code, out)
	}

	code, out, _ = runCLI(t, "machinesets", "patch", "-f", path, "--network", fileNet, "-o", "json")
	var list struct {
		Kind  string
		Items []struct {
			Kind     string
			Metadata struct{ Name string }
		}
	}
	if err := json.Unmarshal([]byte(out), &list); code != exitOK || err != nil || list.Kind != "List" || len(list.Items) != 1 || list.Items[0].Metadata.Name != "ostest-8x2kq-worker-0" {
		t.Errorf("-o json: exit %d, %v\n%s", code, err, out)
	}

	code, out, _ = runCLI(t, "machinesets", "patch", "-f", path, "--network", fileNet, "--security-group", fileSG, "--in-place")
	now, _ := os.ReadFile(path)
	bak, _ := os.ReadFile(path + ".bak")
	info, _ := os.Stat(path)
	if code != exitOK || !strings.Contains(out, "written; the previous version is in "+path+".bak") || string(bak) != string(original) ||
		!sameButTimes(string(now), patched) || info.Mode().Perm() != 0o640 {
		t.Errorf("in place: exit %d, mode %v\n%s", code, info.Mode(), out)
	}
	code, out, _ = runCLI(t, "machinesets", "patch", "-f", path, "--network", fileNet, "--security-group", fileSG, "--in-place")
	if again, _ := os.ReadFile(path); code != exitOK || !strings.Contains(out, "unchanged, not written") || string(again) != string(now) {
		t.Errorf("a second patch in place: exit %d\n%s", code, out)
	}

	notMS := filepath.Join(t.TempDir(), "cm.yaml")
	if err := os.WriteFile(notMS, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--in-place"}, exitUsage, "--in-place writes the file of -f back: give -f FILE"},
		{[]string{"-f", "-", "--in-place"}, exitUsage, "--in-place cannot write standard input back"},
		{[]string{"-f", filepath.Join(t.TempDir(), "missing.yaml")}, exitInvalid, "-f: open "},
		{[]string{"-f", notMS}, exitInvalid, "cm.yaml: no MachineSet (apiVersion machine.openshift.io/v1beta1, kind MachineSet) in it"},
		{[]string{"-f", path, "--name", "other"}, exitInvalid, "MachineSet other not found in " + path + " (there: ostest-8x2kq-worker-0)"},
	} {
		code, _, errOut := runCLI(t, append([]string{"machinesets", "patch", "--network", fileNet}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want %d with %q:\n%s", c.args, code, c.code, c.want, errOut)
		}
	}
}

// sameButTimes compares two patched files, but for the time in the attachment record.
func sameButTimes(a, b string) bool {
	strip := func(s string) string {
		i := strings.Index(s, `"time":"`)
		if i < 0 {
			return s
		}
		return s[:i] + s[i+len(`"time":"2006-01-02T15:04:05Z"`):]
	}
	return strip(a) == strip(b)
}

// onlyLinesAdded reports whether every line of before is in after, in order, and after has more.
func onlyLinesAdded(before, after string) bool {
	b, a := strings.Split(before, "\n"), strings.Split(after, "\n")
	i := 0
	for _, l := range a {
		if i < len(b) && l == b[i] {
			i++
		}
	}
	return i == len(b) && len(a) > len(b)
}

// TestControlPlanePatchFile: `controlplane patch -f` changes the ControlPlaneMachineSet of a
// GitOps file, beside a worker MachineSet, with no cluster and no cloud; --remove -f gives the
// file back; an Inactive set in a file is refused with exit 1, whatever --force says.
func TestControlPlanePatchFile(t *testing.T) {
	t.Setenv("OS_CLOUD", "")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none")) // no cluster is contacted
	original, err := os.ReadFile("../../machinesets/testdata/controlplane/gitops.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "machines.yaml")
	if err := os.WriteFile(path, original, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "controlplane", "patch", "-f", path, "--network", fileNet, "--security-group", fileSG, "--in-place")
	if code != exitOK || !strings.Contains(out, "cluster  patched  added network "+fileNet) || !strings.Contains(out, "written; the previous version is in "+path+".bak") {
		t.Fatalf("in place: exit %d\n%s\n%s", code, out, errOut)
	}
	patched, _ := os.ReadFile(path)
	if !onlyLinesAdded(string(original), string(patched)) || strings.Count(string(patched), "- uuid: "+fileNet) != 1 {
		t.Errorf("the file is not the original with the set's lines added:\n%s", patched)
	}
	code, out, _ = runCLI(t, "controlplane", "patch", "-f", path, "--remove")
	if code != exitOK || out != string(original) {
		t.Errorf("--remove -f: exit %d, the output is not the original file:\n%s", code, out)
	}
	inactive := filepath.Join(t.TempDir(), "inactive.yaml")
	if err := os.WriteFile(inactive, []byte(strings.Replace(string(original), "state: Active", "state: Inactive", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "controlplane", "patch", "-f", inactive, "--network", fileNet, "--force")
	if code != exitInvalid || !strings.Contains(errOut, "its state is Inactive") || out != "" {
		t.Errorf("an Inactive set: exit %d, want %d\n%s\n%s", code, exitInvalid, out, errOut)
	}
}
