// Package olmbundle validates `manila-setup operator bundle` with the operator framework's own
// bundle validation (github.com/operator-framework/api), the library OLM and operator-sdk use.
// It is a module of its own so that the main module does not depend on it.
package olmbundle

import (
	"path/filepath"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/bundle"
)

func TestBundleValidates(t *testing.T) {
	files, err := bundle.Files(bundle.Options{Version: "0.4.0", Replaces: "0.3.0", OperatorImage: "quay.io/example/manila-setup-operator:v0.4.0", Images: operator.DefaultImages})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := bundle.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	b, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		t.Fatalf("loading the bundle as OLM does: %v", err)
	}
	if b.CSV == nil || b.CSV.Spec.Version.String() != "0.4.0" {
		t.Fatalf("CSV not loaded: %+v", b.CSV)
	}
	validators := append(validation.DefaultBundleValidators, validation.GoodPracticesValidator, validation.AlphaDeprecatedAPIsValidator)
	results := validators.Validate(b, b.CSV)
	for _, r := range results {
		for _, e := range r.Errors {
			t.Errorf("%s: %s", r.Name, e)
		}
		for _, w := range r.Warnings {
			if w.Level == errors.LevelWarn {
				t.Logf("warning %s: %s", r.Name, w)
			}
		}
	}
}
