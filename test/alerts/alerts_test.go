// Package alerts holds the checks of the operator's alert rules (assets/prometheusrule.yaml):
// here, that every alert has a severity and a runbook section in docs/alerts.md, and a firing
// and a quiet case in testdata/rules_test.yaml; with the integration tag, that promtool accepts
// the rules and that their unit tests pass.
package alerts

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/manila-setup/manila-setup/assets"
)

// namespace is the operator's namespace in driver mode, the one the rule tests' series carry.
const namespace = "openshift-cluster-csi-drivers"

const runbookPrefix = "https://github.com/manila-setup/manila-setup/blob/main/docs/alerts.md#"

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type prometheusRule struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	} `yaml:"spec"`
}

// rendered is assets/prometheusrule.yaml as the operator renders it in driver mode.
func rendered(t *testing.T) []byte {
	t.Helper()
	b, err := assets.Render("prometheusrule.yaml", map[string]string{"NAMESPACE": namespace})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseRule(t *testing.T) prometheusRule {
	t.Helper()
	var pr prometheusRule
	if err := yaml.Unmarshal(rendered(t), &pr); err != nil {
		t.Fatalf("assets/prometheusrule.yaml: %v", err)
	}
	return pr
}

func alerts(pr prometheusRule) []rule {
	var out []rule
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out = append(out, r)
			}
		}
	}
	return out
}

var headingRE = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)

// anchors are the fragment names GitHub gives the headings of a Markdown file: lower case,
// punctuation other than '-' and '_' dropped, spaces made '-'.
func anchors(markdown string) map[string]bool {
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(markdown, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

func TestPrometheusRuleObject(t *testing.T) {
	pr := parseRule(t)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Errorf("assets/prometheusrule.yaml is %s %s, want monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	if pr.Metadata.Name != "manila-csi-driver-operator" || pr.Metadata.Namespace != namespace {
		t.Errorf("assets/prometheusrule.yaml is %s/%s, want %s/manila-csi-driver-operator (namespace from ${NAMESPACE})", pr.Metadata.Namespace, pr.Metadata.Name, namespace)
	}
	if got := pr.Metadata.Labels["app.kubernetes.io/managed-by"]; got != "manila-setup-operator" {
		t.Errorf("assets/prometheusrule.yaml: label app.kubernetes.io/managed-by is %q, want manila-setup-operator (the operator finds what it owns by it)", got)
	}
	if len(alerts(pr)) == 0 {
		t.Fatal("assets/prometheusrule.yaml has no alert")
	}
}

// TestEveryAlertHasRunbook: an alert that reaches an admin names its severity and links the
// section of docs/alerts.md that says what to do; and no section is left for an alert that is
// gone.
func TestEveryAlertHasRunbook(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	have := anchors(string(doc))
	names := map[string]bool{}
	for _, a := range alerts(parseRule(t)) {
		names[a.Alert] = true
		if s := a.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("alert %s: label severity is %q, want warning or critical", a.Alert, s)
		}
		for _, k := range []string{"summary", "description"} {
			if strings.TrimSpace(a.Annotations[k]) == "" {
				t.Errorf("alert %s: no %s annotation", a.Alert, k)
			}
		}
		if a.For == "" {
			t.Errorf("alert %s: no for: (one bad scrape or one failed check would page)", a.Alert)
		}
		url := a.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbookPrefix)
		switch {
		case !ok:
			t.Errorf("alert %s: runbook_url %q does not start with %s", a.Alert, url, runbookPrefix)
		case !have[anchor]:
			t.Errorf("alert %s: runbook_url %q: docs/alerts.md has no heading with the anchor %q (add a section \"## %s\")", a.Alert, url, anchor, a.Alert)
		case anchor != strings.ToLower(a.Alert):
			t.Errorf("alert %s: runbook_url %q links another alert's section, want #%s", a.Alert, url, strings.ToLower(a.Alert))
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^## (Manila[A-Za-z]+)\s*$`).FindAllStringSubmatch(string(doc), -1) {
		if !names[m[1]] {
			t.Errorf("docs/alerts.md has a section %q, but assets/prometheusrule.yaml has no such alert: remove or rename the section", m[1])
		}
	}
}

type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			AlertName string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `yaml:"exp_labels"`
				ExpAnnotations map[string]string `yaml:"exp_annotations"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestEveryAlertIsTested: testdata/rules_test.yaml has, for every alert, a case where it fires
// (with its labels and annotations) and one where it does not; promtool runs them in
// alerts_integration_test.go.
func TestEveryAlertIsTested(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rt ruleTests
	if err := yaml.Unmarshal(b, &rt); err != nil {
		t.Fatalf("testdata/rules_test.yaml: %v", err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) == 0 {
				quiet[a.AlertName] = true
				continue
			}
			fires[a.AlertName] = true
			for _, e := range a.ExpAlerts {
				if e.ExpAnnotations["runbook_url"] == "" || e.ExpLabels["severity"] == "" {
					t.Errorf("testdata/rules_test.yaml: a case of %s at %s expects no runbook_url or no severity: give the alert's whole labels and annotations", a.AlertName, a.EvalTime)
				}
			}
		}
	}
	for _, a := range alerts(parseRule(t)) {
		if !fires[a.Alert] {
			t.Errorf("testdata/rules_test.yaml: no case where %s fires", a.Alert)
		}
		if !quiet[a.Alert] {
			t.Errorf("testdata/rules_test.yaml: no case where %s does not fire (before its for: of %s, or a series its expression leaves out)", a.Alert, a.For)
		}
	}
}
