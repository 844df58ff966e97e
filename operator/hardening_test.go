package operator

import (
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"

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
		if unstructuredAssets[name] {
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
		for _, c := range append(slices.Clone(p.spec.InitContainers), p.spec.Containers...) {
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

// TestNodePluginWaitsForTheNFSSocket: the Manila node plugin's init container waits for the
// socket the NFS node plugin serves, and the plugin forwards to that same socket: each path is
// followed through its container's volume mounts to the host.
func TestNodePluginWaitsForTheNFSSocket(t *testing.T) {
	pods, _, _ := renderedPods(t)
	byOwner := map[string]*corev1.PodSpec{}
	for _, p := range pods {
		byOwner[p.owner] = p.spec
	}
	node, nfs := byOwner["node.yaml"], byOwner["node_nfs.yaml"]
	if node == nil || nfs == nil {
		t.Fatalf("node plugins not rendered: %v", byOwner)
	}
	served := hostPath(t, nfs, container(t, nfs.Containers, "csi-driver"), strings.TrimPrefix(flagValue(container(t, nfs.Containers, "csi-driver"), "--endpoint"), "unix://"))
	forwarded := hostPath(t, node, container(t, node.Containers, "csi-driver"), strings.TrimPrefix(flagValue(container(t, node.Containers, "csi-driver"), "--fwdendpoint"), "unix://"))
	wait := container(t, node.InitContainers, "wait-for-nfs-plugin")
	script := strings.Join(wait.Command, " ")
	start := strings.Index(script, "[ -S ")
	if start < 0 {
		t.Fatalf("the init container tests no socket: %q", script)
	}
	waited := hostPath(t, node, wait, strings.Fields(script[start+len("[ -S "):])[0])
	if served == "" || served != forwarded || served != waited {
		t.Errorf("the NFS plugin serves %q, the Manila plugin forwards to %q, its init container waits for %q", served, forwarded, waited)
	}
	if !strings.Contains(script, served) {
		t.Errorf("the init container's message does not name the host path %s: %q", served, script)
	}
}

func container(t *testing.T, cs []corev1.Container, name string) *corev1.Container {
	t.Helper()
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	t.Fatalf("no container %s", name)
	return nil
}

func flagValue(c *corev1.Container, flag string) string {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// hostPath is where a path inside a container is on the host, through a hostPath volume mount.
func hostPath(t *testing.T, spec *corev1.PodSpec, c *corev1.Container, p string) string {
	t.Helper()
	for _, m := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				return path.Join(v.HostPath.Path, rel)
			}
		}
	}
	t.Errorf("%s: %s is on no hostPath volume", c.Name, p)
	return ""
}

// Files the operand containers read from volumes land where the readers look: the cluster's
// trusted CA bundle as tls-ca-bundle.pem under /etc/pki/ca-trust/extracted/pem (the RHEL path
// Go's x509 reads), and in the Manila plugins the client certificate and key at the paths the
// driver Secret names (os-clientCertPath, os-clientKeyPath). The CA bundle's items once sat
// under the controller's runtime-config volume: the controller then saw no trusted CA.
func TestMountedFilesLandWhereTheyAreRead(t *testing.T) {
	pods, _, _ := renderedPods(t)
	creds := &Credentials{Cloud: clouds.Cloud{AuthInfo: &clouds.AuthInfo{AuthURL: "https://k:5000/v3", Username: "u", Password: "p"}}}
	creds.ClientCertPEM, creds.ClientKeyPEM = []byte("cert"), []byte("key")
	secret := creds.DriverSecretData()
	want := map[string]string{ // file path -> the Secret key or ConfigMap key it must hold
		string(secret["os-clientCertPath"]): DriverClientCertKey,
		string(secret["os-clientKeyPath"]):  DriverClientKeyKey,
	}
	checked := 0
	for _, p := range pods {
		files := map[string]string{} // path in the container -> key
		for _, c := range p.spec.Containers {
			for _, m := range c.VolumeMounts {
				for _, v := range p.spec.Volumes {
					if v.Name != m.Name {
						continue
					}
					var items []corev1.KeyToPath
					switch {
					case v.ConfigMap != nil:
						items = v.ConfigMap.Items
					case v.Secret != nil:
						items = v.Secret.Items
						if v.Name == "client-tls" && (v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400 || v.Secret.Optional == nil || !*v.Secret.Optional) {
							t.Errorf("%s: the client certificate volume is not optional with mode 0400: %+v", p.owner, v.Secret)
						}
					}
					for _, it := range items {
						files[c.Name+":"+m.MountPath+"/"+it.Path] = it.Key
					}
					if v.Name == "trusted-ca" {
						checked++
						if key := files[c.Name+":/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"]; key != "ca-bundle.crt" {
							t.Errorf("%s container %s: the trusted CA volume does not give tls-ca-bundle.pem from ca-bundle.crt (items %v)", p.owner, c.Name, items)
						}
					}
				}
			}
			if c.Name == "csi-driver" && (p.owner == "controller.yaml" || p.owner == "node.yaml") {
				for path, key := range want {
					checked++
					if files[c.Name+":"+path] != key {
						t.Errorf("%s container %s: %s does not hold the driver Secret's key %s (files %v)", p.owner, c.Name, path, key, files)
					}
				}
			}
		}
	}
	if checked < 6 {
		t.Errorf("checked %d mounts, want the trusted CA of every Manila plugin and the client certificate of both", checked)
	}
}
