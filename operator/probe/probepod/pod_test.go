package probepod

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/manila-setup/manila-setup/operator/probe"
)

func testSpec() Spec {
	return Spec{
		Namespace: "openshift-cluster-csi-drivers",
		Node:      "worker-0",
		Image:     "example.test/manila-setup-operator:1",
		Targets:   []string{"10.0.0.5:2049", "[fd00::5]:2049"},
		Timeout:   90 * time.Second,
	}
}

// The pod meets the restricted Pod Security profile, as the apiserver's admission judges it, in
// everything but host namespaces: hostNetwork is the point of the probe.
func TestPodIsRestrictedButForHostNetwork(t *testing.T) {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	pod := Pod(testSpec())
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	var forbidden []string
	for _, r := range evaluator.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec) {
		if !r.Allowed {
			forbidden = append(forbidden, r.ForbiddenReason+" ("+r.ForbiddenDetail+")")
		}
	}
	if want := []string{"host namespaces (hostNetwork=true)"}; !slices.Equal(forbidden, want) {
		t.Errorf("restricted profile forbids %q, want only %q", forbidden, want)
	}

	// Without hostNetwork, nothing would be forbidden: the check above is not vacuous, and no
	// other field needs a privileged namespace.
	pod.Spec.HostNetwork = false
	for _, r := range evaluator.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec) {
		if !r.Allowed {
			t.Errorf("without hostNetwork, restricted forbids %s (%s)", r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
	// And the evaluator does catch what the pod avoids (a check that can fail).
	pod.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil
	if results := evaluator.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec); !slices.ContainsFunc(results, func(r policy.CheckResult) bool { return !r.Allowed }) {
		t.Error("the evaluator allowed a container that may escalate privileges")
	}
}

func TestPodRunsOnItsNode(t *testing.T) {
	s := testSpec()
	pod := Pod(s)
	spec := pod.Spec
	if pod.Namespace != s.Namespace || pod.GenerateName != "manila-setup-probe-" || pod.Labels[NameLabel] != Name || pod.Labels[ManagedByLabel] != ManagedBy {
		t.Errorf("metadata %+v", pod.ObjectMeta)
	}
	if spec.NodeName != "worker-0" || !spec.HostNetwork || spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("nodeName %q, hostNetwork %v, restartPolicy %q", spec.NodeName, spec.HostNetwork, spec.RestartPolicy)
	}
	if spec.ActiveDeadlineSeconds == nil || *spec.ActiveDeadlineSeconds != 90 {
		t.Errorf("activeDeadlineSeconds %v, want 90 (the spec's Timeout)", spec.ActiveDeadlineSeconds)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "" || spec.Tolerations[0].Effect != "" {
		t.Errorf("tolerations %+v, want one that tolerates every taint", spec.Tolerations)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the service account token is mounted; the probe calls no API")
	}
	if sc := spec.SecurityContext; sc.RunAsUser == nil || *sc.RunAsUser != RunAsUser || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("pod securityContext %+v, want runAsNonRoot and the image's user %d", sc, RunAsUser)
	}
	c := spec.Containers[0]
	if c.Image != s.Image || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("image %q, terminationMessagePolicy %q", c.Image, c.TerminationMessagePolicy)
	}
	want := "manila-setup-operator probe nfs --target 10.0.0.5:2049 --target [fd00::5]:2049 --timeout 5s"
	if got := strings.Join(c.Command, " "); got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	if c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the root filesystem is writable")
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("resources %+v, want requests and limits", c.Resources)
	}
}

func TestSpecValidate(t *testing.T) {
	if err := testSpec().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		edit func(*Spec)
		want string
	}{
		{func(s *Spec) { s.Node = "" }, "node: Required value"},
		{func(s *Spec) { s.Namespace = "" }, "namespace: Required value"},
		{func(s *Spec) { s.Image = "" }, "image: Required value"},
		{func(s *Spec) { s.Targets = nil }, "targets: Required value"},
		{func(s *Spec) { s.Targets = append(s.Targets, "10.0.0.6") }, `targets[2]: Invalid value: "10.0.0.6": must be ADDR:PORT`},
		{func(s *Spec) { s.Targets = make([]string, probe.MaxTargets+1) }, "targets: Too many: 17"},
		{func(s *Spec) { s.Timeout = -time.Second }, "must not be negative"},
	} {
		s := testSpec()
		tt.edit(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Validate: %v, want %q", err, tt.want)
		}
	}
}
