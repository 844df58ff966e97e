package operator

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// podTemplate is one rendered pod template, with where it comes from.
type podTemplate struct {
	owner       string
	namespace   string
	hostNetwork bool
	labels      labels.Set
	spec        *corev1.PodSpec
}

// renderedPods returns the pod templates of the driver's workloads and of the operator's own
// Deployment, as rendered.
func renderedPods(t *testing.T) ([]podTemplate, []*networkingv1.NetworkPolicy, []*policyv1.PodDisruptionBudget) {
	t.Helper()
	var pods []podTemplate
	var policies []*networkingv1.NetworkPolicy
	var pdbs []*policyv1.PodDisruptionBudget
	collect := func(name string, obj any) {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			pods = append(pods, podTemplate{name, o.Namespace, o.Spec.Template.Spec.HostNetwork, o.Spec.Template.Labels, &o.Spec.Template.Spec})
		case *appsv1.DaemonSet:
			pods = append(pods, podTemplate{name, o.Namespace, o.Spec.Template.Spec.HostNetwork, o.Spec.Template.Labels, &o.Spec.Template.Spec})
		case *networkingv1.NetworkPolicy:
			policies = append(policies, o)
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, o)
		}
	}
	for _, name := range driverAssets(t) {
		if name == "servicemonitor.yaml" || name == "volumesnapshotclass.yaml" {
			continue
		}
		obj, err := ReadAsset(name, testVars())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		collect(name, obj)
	}
	out, err := Render(RenderOptions{Namespace: "openshift-cluster-csi-drivers", OperatorImage: "example.test/op:1", Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment", "NetworkPolicy":
			b, _ := u.MarshalJSON()
			obj, _, err := assetDecoder.Decode(b, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			collect("operator "+u.GetName(), obj)
		}
	}
	return pods, policies, pdbs
}

// Every pod that takes part in pod networking is selected by exactly one of our NetworkPolicies,
// and every policy selects at least one of our pods and only ours (the namespace is shared with
// other drivers' pods, which a policy of ours must not catch): evaluated with the policies' own
// label selectors against the rendered pod templates.
func TestNetworkPoliciesSelectTheirPods(t *testing.T) {
	pods, policies, _ := renderedPods(t)
	if len(policies) == 0 {
		t.Fatal("no NetworkPolicy rendered")
	}
	selected := map[string]int{}
	for _, np := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatalf("%s: %v", np.Name, err)
		}
		if sel.Empty() {
			t.Errorf("NetworkPolicy %s selects every pod of the namespace, other drivers' too", np.Name)
		}
		n := 0
		for _, p := range pods {
			if p.namespace == np.Namespace && sel.Matches(p.labels) {
				selected[p.owner]++
				n++
				if p.hostNetwork {
					t.Errorf("NetworkPolicy %s selects %s, which uses the host's network: it would not apply", np.Name, p.owner)
				}
			}
		}
		if n == 0 {
			t.Errorf("NetworkPolicy %s selects none of the rendered pods", np.Name)
		}
		if len(np.Spec.PolicyTypes) != 2 {
			t.Errorf("NetworkPolicy %s: policyTypes %v, want Ingress and Egress (deny what is not listed)", np.Name, np.Spec.PolicyTypes)
		}
		// Another driver's controller in the same namespace, with the usual labels.
		if sel.Matches(labels.Set{"app": "openstack-cinder-csi-driver-controller"}) {
			t.Errorf("NetworkPolicy %s selects another driver's pods", np.Name)
		}
	}
	for _, p := range pods {
		if !p.hostNetwork && selected[p.owner] != 1 {
			t.Errorf("%s: selected by %d NetworkPolicies, want 1", p.owner, selected[p.owner])
		}
	}
}

// Every container either runs hardened (no privilege escalation, no capability, read-only root
// filesystem) in a pod with the runtime's seccomp profile, or is one of the node plugins' that
// need privilege (each says why in its asset).
func TestPodsAreHardened(t *testing.T) {
	privileged := map[string]bool{"node.yaml/csi-driver": true, "node.yaml/csi-node-driver-registrar": true, "node_nfs.yaml/csi-driver": true}
	pods, _, pdbs := renderedPods(t)
	for _, p := range pods {
		if !p.hostNetwork {
			if sc := p.spec.SecurityContext; sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("%s: pod without the RuntimeDefault seccomp profile", p.owner)
			}
		}
		for _, c := range p.spec.Containers {
			where := p.owner + "/" + c.Name
			sc := c.SecurityContext
			if privileged[where] {
				if sc == nil || sc.Privileged == nil || !*sc.Privileged {
					t.Errorf("%s: expected privileged (listed as such)", where)
				}
				continue
			}
			if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
				sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" ||
				(sc.Privileged != nil && *sc.Privileged) {
				t.Errorf("%s: not hardened: %+v", where, sc)
			}
		}
	}
	for _, pdb := range pdbs {
		if pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
			t.Errorf("PodDisruptionBudget %s: an unhealthy pod would block node drains", pdb.Name)
		}
	}
	if len(pdbs) == 0 {
		t.Error("no PodDisruptionBudget rendered")
	}
}
