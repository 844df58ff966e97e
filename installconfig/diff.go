package installconfig

import "github.com/manila-setup/manila-setup/internal/textdiff"

// UnifiedDiff returns the differences between two versions of an install-config as a unified
// diff, "" when they are equal (textdiff.Unified; exported here for callers outside this
// module, such as the installer oracle).
func UnifiedDiff(aName, bName string, a, b []byte) string {
	return textdiff.Unified(aName, bName, a, b)
}
