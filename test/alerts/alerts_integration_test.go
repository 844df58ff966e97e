//go:build integration

package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestRulesWithPromtool gives the rules to promtool as Prometheus reads them: the
// PrometheusRule's spec is exactly a rule file (the Prometheus Operator writes it into
// Prometheus' configuration as it is), so its spec goes into rules.yaml, beside a copy of
// testdata/rules_test.yaml, whose rule_files names that file.
func TestRulesWithPromtool(t *testing.T) {
	promtool := os.Getenv("MANILA_SETUP_PROMTOOL")
	if promtool == "" {
		t.Fatal("MANILA_SETUP_PROMTOOL is not set: run make test, or set it to the path that `bash test/env/promtool/build.sh` prints")
	}

	var obj map[string]any
	if err := yaml.Unmarshal(rendered(t), &obj); err != nil {
		t.Fatalf("assets/prometheusrule.yaml: %v", err)
	}
	spec, ok := obj["spec"]
	if !ok {
		t.Fatal("assets/prometheusrule.yaml has no spec")
	}
	ruleFile, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), ruleFile, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s\nthe rule file promtool read:\n%s", strings.Join(args, " "), err, out, ruleFile)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
	// --lint-fatal: a lint finding (a rule given twice) fails the test instead of passing
	// with a warning nobody reads.
	run("check", "rules", "--lint-fatal", "rules.yaml")
	run("test", "rules", "rules_test.yaml")
}
