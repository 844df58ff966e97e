package machinesets

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
	"github.com/manila-setup/manila-setup/internal/textdiff"
)

// The ControlPlaneMachineSet of a GitOps file, kept beside a worker MachineSet: `controlplane
// patch -f` changes the set's template alone, by added lines only, as the installer's
// controlPlane.additionalNetworkIDs would have written them; a second patch changes nothing;
// --remove gives the original bytes back; `machinesets patch -f` on the same file leaves the set
// alone; an Inactive set, a Recreate strategy and a file without the set are refused.
func TestPatchControlPlaneFile(t *testing.T) {
	const name = "machines.yaml"
	data, err := os.ReadFile("testdata/controlplane/gitops.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := PatchControlPlaneFile(ctx, name, data, fileOpts())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Action != attach.ActionPatched || res.Results[0].Kind != ControlPlaneKind || res.Reformatted {
		t.Fatalf("results %+v (reformatted %t), want the set patched, spliced", res.Results, res.Reformatted)
	}
	if !strings.Contains(res.Results[0].Warning, "strategy RollingUpdate") {
		t.Errorf("warning %q does not say what the strategy does next", res.Results[0].Warning)
	}
	diff := textdiff.Unified(name, name, data, res.Output)
	var added []string
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "---"), strings.HasPrefix(l, "+++"):
		case strings.HasPrefix(l, "-"):
			t.Errorf("the patch removed a line: %q\n%s", l, diff)
		case strings.HasPrefix(l, "+"):
			added = append(added, strings.TrimSpace(strings.TrimPrefix(l, "+")))
		}
	}
	// After the nodes network's entry, and after the master group, at the template's depth.
	for _, want := range []string{"- uuid: " + storageNet, "noAllowedAddressPairs: true", "- uuid: " + storageSG} {
		if !strings.Contains(strings.Join(added, "\n"), want) {
			t.Errorf("the patch does not add %q:\n%s", want, diff)
		}
	}
	out := string(res.Output)
	if master, worker := strings.Index(out, storageNet), strings.Index(out, "kind: MachineSet"); master < 0 || master > worker || strings.Count(out, "- uuid: "+storageNet) != 1 {
		t.Errorf("the storage network is not in the set's template alone:\n%s", out)
	}
	if len(res.Objects) != 1 || res.Others != 1 {
		t.Errorf("%d objects in the structured output and %d others, want the set alone and the MachineSet kept", len(res.Objects), res.Others)
	}

	again, err := PatchControlPlaneFile(ctx, name, res.Output, fileOpts())
	if err != nil || again.Results[0].Action != attach.ActionUnchanged || string(again.Output) != string(res.Output) {
		t.Errorf("a second patch: %v, %+v; want unchanged, the same bytes", err, again.Results)
	}
	removed, err := PatchControlPlaneFile(ctx, name, res.Output, removeOpts(attach.Removal{}))
	if err != nil {
		t.Fatal(err)
	}
	if string(removed.Output) != string(data) {
		t.Errorf("--remove did not give the original back:\n%s", textdiff.Unified(name, name+" (removed)", data, removed.Output))
	}

	// The workers' command leaves the set alone, and the set's leaves the MachineSet alone.
	workers, err := PatchFile(ctx, name, data, Selection{}, fileOpts())
	if err != nil {
		t.Fatal(err)
	}
	if len(workers.Results) != 1 || workers.Results[0].Name != "ostest-8x2kq-worker-0" || workers.Results[0].Action != attach.ActionPatched {
		t.Fatalf("machinesets patch -f: %+v", workers.Results)
	}
	setPart := func(b []byte) string { return string(b[:strings.Index(string(b), "---")]) }
	if setPart(workers.Output) != setPart(data) {
		t.Errorf("machinesets patch -f changed the ControlPlaneMachineSet:\n%s", textdiff.Unified(name, name, data, workers.Output))
	}
	both, err := PatchControlPlaneFile(ctx, name, workers.Output, fileOpts())
	if err != nil || both.Results[0].Action != attach.ActionPatched {
		t.Fatalf("controlplane patch -f after machinesets patch -f: %v %+v", err, both.Results)
	}
	if rest := func(b []byte) string { return string(b[strings.Index(string(b), "---"):]) }; rest(both.Output) != rest(workers.Output) {
		t.Errorf("controlplane patch -f changed the MachineSet")
	}

	refused := []struct{ name, from, to, reason string }{
		{"Inactive", "state: Active # activated at install time", "state: Inactive", "its state is Inactive"},
		{"no state: the API's default, Inactive", "  state: Active # activated at install time\n", "", "its state is Inactive"},
		{"Recreate", "type: RollingUpdate", "type: Recreate", "Recreate"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			in := strings.Replace(string(data), tt.from, tt.to, 1)
			_, err := PatchControlPlaneFile(ctx, name, []byte(in), fileOpts())
			// A refusal of the file (exit 1 in the command), never overruled by --force.
			var fe *filepatch.Error
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), "not changed: ") || !strings.Contains(err.Error(), tt.reason) || strings.Contains(err.Error(), "--force") {
				t.Errorf("got %v, want a refusal of the file saying %q, never forceable", err, tt.reason)
			}
		})
	}
	t.Run("OnDelete says what to delete", func(t *testing.T) {
		in := strings.Replace(string(data), "type: RollingUpdate", "type: OnDelete", 1)
		res, err := PatchControlPlaneFile(ctx, name, []byte(in), fileOpts())
		if err != nil || res.Results[0].Action != attach.ActionPatched || !strings.Contains(res.Results[0].Warning, "strategy OnDelete") {
			t.Errorf("%v %+v", err, res)
		}
	})
	t.Run("a file without the set", func(t *testing.T) {
		only := string(data)[strings.Index(string(data), "---")+4:]
		_, err := PatchControlPlaneFile(ctx, name, []byte(only), fileOpts())
		if err == nil || !strings.Contains(err.Error(), "no ControlPlaneMachineSet (apiVersion machine.openshift.io/v1, kind ControlPlaneMachineSet) in it") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("another name", func(t *testing.T) {
		in := strings.Replace(string(data), "  name: cluster\n", "  name: masters\n", 1)
		_, err := PatchControlPlaneFile(ctx, name, []byte(in), fileOpts())
		if err == nil || !strings.Contains(err.Error(), `metadata.name: Invalid value: "masters"`) {
			t.Errorf("got %v", err)
		}
	})
}
