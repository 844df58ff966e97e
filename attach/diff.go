package attach

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/internal/textdiff"
)

// YAMLDiff is a unified diff of two values as YAML (sorted keys, as `oc get -o yaml` shows
// them), titled; "" when they are the same.
func YAMLDiff(title string, before, after any) string {
	b, errB := json.Marshal(before)
	a, errA := json.Marshal(after)
	if errB != nil || errA != nil {
		return fmt.Sprintf("(no preview: %v %v)\n", errB, errA)
	}
	return textdiff.Unified(title, title+" (patched)", []byte(ToYAML(b)), []byte(ToYAML(a)))
}

// ToYAML renders JSON as YAML with sorted keys, the way `oc get -o yaml` shows it.
func ToYAML(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	y, err := yaml.JSONToYAML(raw)
	if err != nil {
		return string(raw)
	}
	return string(y)
}
