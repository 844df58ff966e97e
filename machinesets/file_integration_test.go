//go:build integration

package machinesets

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestPatchFileMatchesTheCluster: for every corpus MachineSet, patching its file offline and
// patching it on a real apiserver give the same providerSpec and the same attachment record.
func TestPatchFileMatchesTheCluster(t *testing.T) {
	ctx := context.Background()
	api := testenv.NewAPIServer(t)
	createNamespace(t, ctx, api.Config)
	mc, _ := countingClient(t, api.Config)
	files, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ms := loadMachineSet(t, path)
		sel, opts := Selection{Names: []string{ms.Name}}, fileOpts()
		offline, err := PatchFile(ctx, filepath.Base(path), data, sel, opts)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}

		ms.ResourceVersion, ms.UID, ms.CreationTimestamp, ms.Generation = "", "", metav1.Time{}, 0
		ms.Status = machinev1beta1.MachineSetStatus{}
		api := mc.MachineV1beta1().MachineSets(Namespace)
		if _, err := api.Create(ctx, ms, metav1.CreateOptions{}); err != nil {
			if strings.Contains(path, "broken") {
				continue // the apiserver refuses it as the file patch does (invalid)
			}
			t.Fatalf("%s: %v", path, err)
		}
		online, err := Patch(ctx, mc, sel, opts)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		stored, err := api.Get(ctx, ms.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := api.Delete(ctx, ms.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}

		if offline.Results[0].Action != online[0].Action {
			t.Errorf("%s: offline %s, on the cluster %s", path, offline.Results[0].Action, online[0].Action)
			continue
		}
		var fromFile machinev1beta1.MachineSet
		if err := json.Unmarshal(offline.Objects[0], &fromFile); err != nil {
			t.Fatal(err)
		}
		if a, b := templateProviderSpec(&fromFile), templateProviderSpec(stored); !filepatch.SameJSON(a, b) {
			t.Errorf("%s: providerSpec offline\n%s\non the cluster\n%s", path, a, b)
		}
		if a, b := fromFile.Annotations[attach.Annotation], stored.Annotations[attach.Annotation]; a != b {
			t.Errorf("%s: attachment record offline %q, on the cluster %q", path, a, b)
		}
		compared++
	}
	if compared < 10 {
		t.Errorf("%d corpus files compared, want them all but the broken one", compared)
	}
}
