package operator

import (
	"testing"

	storagev1 "k8s.io/api/storage/v1"
)

// The second read of a manifest with the same values is the cached object's copy: equal to a
// fresh decode, and the caller's changes to it reach no later read.
func TestReadAssetReusesTheDecodedManifest(t *testing.T) {
	vars := testVars()
	first, err := ReadAsset("csidriver.yaml", vars)
	if err != nil {
		t.Fatal(err)
	}
	first.(*storagev1.CSIDriver).Labels["changed-by-the-caller"] = "yes"
	second, err := ReadAsset("csidriver.yaml", vars)
	if err != nil {
		t.Fatal(err)
	}
	if _, leaked := second.(*storagev1.CSIDriver).Labels["changed-by-the-caller"]; leaked {
		t.Fatal("a caller's change to the object reached the next read")
	}
	if first == second {
		t.Fatal("two reads returned the same object")
	}
}
