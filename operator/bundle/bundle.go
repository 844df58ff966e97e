// Package bundle writes the operator as an OLM bundle (registry+v1): a ClusterServiceVersion
// whose deployment, service account and permissions come from the same assets as
// `manila-setup operator render`, the bundle's metadata/annotations.yaml, and a bundle.Dockerfile
// that packages both as a bundle image. Nothing here is written by hand twice: a new asset either
// finds its place in the CSV or makes Files fail, so the two install paths cannot drift.
//
// What the bundle leaves out, and why:
//   - The ClusterCSIDriver CRD: on OpenShift it belongs to the platform (the cluster-version
//     operator installs it). A bundle that owned it would let OLM replace the platform's CRD.
//     The operator needs only to use it; on Kubernetes without it, apply the CRD from
//     `manila-setup operator render` first.
//   - The ClusterCSIDriver itself: OLM creates no custom resources, and a CSV may offer examples
//     (alm-examples) only of APIs it owns; the CSV's description gives it, for `oc apply`.
//   - The namespace, the bindings: OLM makes them for the namespace the operator is installed
//     in (suggested: openshift-cluster-csi-drivers, where the driver runs).
//   - The CredentialsRequest: its Secret must name the install namespace, which a bundle cannot
//     know; create it (or the Secret) after the install, as docs/install.md says.
package bundle

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/operator"
)

const (
	// PackageName is the OLM package, and the prefix of the CSV's name.
	PackageName = "manila-setup-operator"
	// Channel is the only channel.
	Channel = "stable"
	// SuggestedNamespace is where the console proposes to install: the driver runs beside the
	// operator, in the namespace OpenShift gives CSI drivers.
	SuggestedNamespace = operator.DefaultNamespace

	// namespaceToken stands for the install namespace while rendering; none may survive.
	namespaceToken = "manila-setup-bundle-install-namespace"
	// namespaceEnv carries the install namespace into the operator (downward API).
	namespaceEnv = "OPERATOR_NAMESPACE"
)

// Options shape the bundle.
type Options struct {
	// Version is the CSV's version: semantic versioning, without a leading "v".
	Version       string
	OperatorImage string
	// MustGatherImage is the image oc adm must-gather runs for this operator (the CLI's, whose
	// /usr/bin/gather collects the driver's objects): the CSV names it in
	// operators.openshift.io/must-gather-image. "": none named.
	MustGatherImage string
	Images          operator.Images
	// Replaces is the version this one upgrades in a catalog's channel (spec.replaces); "" for
	// the first.
	Replaces string
	// SkipRange is the olm.skipRange annotation: the versions a catalog may upgrade from straight
	// to this one. "" means every earlier one (">=0.0.0 <Version"); "none" leaves it out.
	SkipRange string
}

// semverRE is semver.org's regular expression for a version.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// CSVPath is where Files puts the ClusterServiceVersion.
const CSVPath = "manifests/" + PackageName + ".clusterserviceversion.yaml"

// Files returns the bundle's files by path relative to the bundle directory.
func Files(opts Options) (map[string][]byte, error) {
	v, err := versionsOf(opts)
	if err != nil {
		return nil, err
	}
	rendered, err := operator.Render(operator.RenderOptions{Namespace: namespaceToken, OperatorImage: opts.OperatorImage, Images: opts.Images})
	if err != nil {
		return nil, err
	}
	objs, err := operator.Objects(rendered)
	if err != nil {
		return nil, err
	}
	p, err := place(objs)
	if err != nil {
		return nil, err
	}
	csv, err := clusterServiceVersion(opts, v, p)
	if err != nil {
		return nil, err
	}
	b, err := yaml.Marshal(csv)
	if err != nil {
		return nil, err
	}
	files := p.files
	files[CSVPath] = b
	for path, b := range files {
		if strings.Contains(string(b), namespaceToken) {
			return nil, fmt.Errorf("bundle: %s still names the install namespace literally; it must come from OLM", path)
		}
	}

	annotations := Annotations()
	b, err = yaml.Marshal(map[string]any{"annotations": annotations})
	if err != nil {
		return nil, err
	}
	files["metadata/annotations.yaml"] = b
	files["bundle.Dockerfile"] = dockerfile(annotations)
	return files, nil
}

// versions are the bundle's version and its place in the upgrade path, without a leading v.
type versions struct {
	version, replaces, skipRange string
}

// versionsOf checks the versions of opts: OLM orders bundles by semantic version, so each must
// be one; skipRange defaults to every older version.
func versionsOf(opts Options) (versions, error) {
	v := versions{version: strings.TrimPrefix(opts.Version, "v"), replaces: strings.TrimPrefix(opts.Replaces, "v"), skipRange: opts.SkipRange}
	if !semverRE.MatchString(v.version) {
		return v, fmt.Errorf("version: Invalid value: %q: an OLM bundle needs a semantic version such as 0.4.0 (build from a tag, or give --version)", opts.Version)
	}
	if v.replaces != "" && (!semverRE.MatchString(v.replaces) || v.replaces == v.version) {
		return v, fmt.Errorf("replaces: Invalid value: %q: the semantic version of an earlier bundle, not %s", opts.Replaces, v.version)
	}
	if v.skipRange == "" {
		v.skipRange = ">=0.0.0 <" + v.version
	}
	return v, nil
}

// placed is where the rendered objects go in a bundle: the CSV's install strategy (service
// account, permissions, Deployment), its example (the ClusterCSIDriver), and the files of the
// objects OLM creates as they are.
type placed struct {
	serviceAccount     string
	permissions        []rbacv1.PolicyRule
	clusterPermissions []rbacv1.PolicyRule
	deployment         *appsv1.Deployment
	example            map[string]any
	files              map[string][]byte
}

// place sorts the objects that operator.Render prints into a bundle's places. An object of a
// kind it does not know is an error, so that a new manifest is not silently left out.
func place(objs []*unstructured.Unstructured) (placed, error) {
	p := placed{files: map[string][]byte{}}
	for _, u := range objs {
		if err := p.add(u); err != nil {
			return p, err
		}
	}
	if p.deployment == nil || p.serviceAccount == "" || p.example == nil {
		return p, fmt.Errorf("bundle: the rendered manifests lack the operator's Deployment, ServiceAccount or ClusterCSIDriver")
	}
	return p, installNamespaceFromDownwardAPI(p.deployment)
}

// add places one object.
func (p *placed) add(u *unstructured.Unstructured) error {
	switch kind, ns := u.GetKind(), u.GetNamespace(); {
	case kind == "CustomResourceDefinition", kind == "Namespace", kind == "ClusterRoleBinding", kind == "RoleBinding":
		// See the package comment.
	case kind == "ClusterCSIDriver":
		p.example = u.Object
	case kind == "ServiceAccount":
		p.serviceAccount = u.GetName()
	case kind == "ClusterRole":
		var r rbacv1.ClusterRole
		if err := fromUnstructured(u, &r); err != nil {
			return err
		}
		p.clusterPermissions = append(p.clusterPermissions, r.Rules...)
	case kind == "Role" && ns == namespaceToken:
		var r rbacv1.Role
		if err := fromUnstructured(u, &r); err != nil {
			return err
		}
		p.permissions = append(p.permissions, r.Rules...)
	case kind == "Role":
		// A CSV grants in the install namespace or cluster-wide, nothing between: a Role in
		// another namespace (kube-system's install-config) becomes a cluster rule limited to
		// the same object names.
		var r rbacv1.Role
		if err := fromUnstructured(u, &r); err != nil {
			return err
		}
		for _, rule := range r.Rules {
			if len(rule.ResourceNames) == 0 {
				return fmt.Errorf("bundle: Role %s/%s grants on every object of its namespace; a CSV could grant that only cluster-wide", ns, u.GetName())
			}
			p.clusterPermissions = append(p.clusterPermissions, rule)
		}
	case kind == "Deployment":
		p.deployment = &appsv1.Deployment{}
		if err := fromUnstructured(u, p.deployment); err != nil {
			return err
		}
	case kind == "ConfigMap", kind == "NetworkPolicy":
		// Created by OLM in the install namespace.
		u.SetNamespace("")
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		p.files["manifests/"+u.GetName()+"."+strings.ToLower(kind)+".yaml"] = b
	default:
		return fmt.Errorf("bundle: the rendered manifests hold a %s (%s), which the bundle does not place yet", kind, u.GetName())
	}
	return nil
}

// clusterServiceVersion is the CSV of the bundle: what the catalog shows of the operator, the
// install strategy from p, and its place in the upgrade path.
func clusterServiceVersion(opts Options, v versions, p placed) (map[string]any, error) {
	exampleYAML, err := yaml.Marshal(p.example)
	if err != nil {
		return nil, err
	}
	csv := map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1",
		"kind":       "ClusterServiceVersion",
		"metadata": map[string]any{
			"name":        PackageName + ".v" + v.version,
			"annotations": catalogAnnotations(opts),
			"labels": map[string]any{
				"operatorframework.io/arch.amd64": "supported",
				"operatorframework.io/arch.arm64": "supported",
				"operatorframework.io/os.linux":   "supported",
			},
		},
		"spec": map[string]any{
			"displayName": "Manila CSI driver (manila-setup)",
			"description": description + "\n\n```yaml\n" + string(exampleYAML) + "```\n",
			"version":     v.version,
			"maturity":    "alpha",
			"provider":    map[string]any{"name": "manila-setup", "url": "https://github.com/manila-setup/manila-setup"},
			"links":       []any{map[string]any{"name": "Source", "url": "https://github.com/manila-setup/manila-setup"}},
			"maintainers": []any{map[string]any{"name": "manila-setup", "email": "manila-setup@users.noreply.github.com"}},
			"keywords":    []any{"manila", "openstack", "nfs", "rwx", "csi", "storage"},
			// The server-side apply and the APIs the operator and the driver use.
			"minKubeVersion": "1.28.0",
			"installModes": []any{
				map[string]any{"type": "OwnNamespace", "supported": true},
				map[string]any{"type": "SingleNamespace", "supported": false},
				map[string]any{"type": "MultiNamespace", "supported": false},
				map[string]any{"type": "AllNamespaces", "supported": false},
			},
			"install": map[string]any{
				"strategy": "deployment",
				"spec": map[string]any{
					"clusterPermissions": []any{map[string]any{"serviceAccountName": p.serviceAccount, "rules": p.clusterPermissions}},
					"permissions":        []any{map[string]any{"serviceAccountName": p.serviceAccount, "rules": p.permissions}},
					"deployments": []any{map[string]any{
						"name":  p.deployment.Name,
						"label": p.deployment.Labels,
						"spec":  p.deployment.Spec,
					}},
				},
			},
			"customresourcedefinitions": map[string]any{},
			"relatedImages":             relatedImages(opts),
		},
	}
	// The upgrade path a catalog takes: this version replaces the one before it in the channel,
	// and may be reached straight from any in skipRange (one bundle for every older install).
	if v.replaces != "" {
		csv["spec"].(map[string]any)["replaces"] = PackageName + ".v" + v.replaces
	}
	if v.skipRange != "none" {
		csv["metadata"].(map[string]any)["annotations"].(map[string]any)["olm.skipRange"] = v.skipRange
	}
	if opts.MustGatherImage != "" {
		csv["metadata"].(map[string]any)["annotations"].(map[string]any)["operators.openshift.io/must-gather-image"] = opts.MustGatherImage
	}
	return csv, nil
}

// catalogAnnotations are what the catalog shows and filters the operator by.
func catalogAnnotations(opts Options) map[string]any {
	return map[string]any{
		"capabilities":   "Basic Install",
		"categories":     "Storage",
		"containerImage": opts.OperatorImage,
		"description":    "Deploys the OpenStack Manila CSI driver (ReadWriteMany NFS shares) and keeps one StorageClass per Manila share type.",
		"repository":     "https://github.com/manila-setup/manila-setup",
		"support":        "manila-setup",
		"operatorframework.io/suggested-namespace": SuggestedNamespace,
		// OpenShift's feature annotations: every image is listed in relatedImages (so a
		// mirror has them all); OpenStack calls go through the cluster Proxy.
		"features.operators.openshift.io/disconnected":     "true",
		"features.operators.openshift.io/proxy-aware":      "true",
		"features.operators.openshift.io/fips-compliant":   "false",
		"features.operators.openshift.io/tls-profiles":     "false",
		"features.operators.openshift.io/token-auth-aws":   "false",
		"features.operators.openshift.io/token-auth-azure": "false",
		"features.operators.openshift.io/token-auth-gcp":   "false",
		"features.operators.openshift.io/cnf":              "false",
		"features.operators.openshift.io/cni":              "false",
		"features.operators.openshift.io/csi":              "true",
	}
}

// Annotations are the bundle's metadata, also the labels of its image.
func Annotations() map[string]string {
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         PackageName,
		"operators.operatorframework.io.bundle.channels.v1":        Channel,
		"operators.operatorframework.io.bundle.channel.default.v1": Channel,
	}
}

const description = `Deploys the [OpenStack Manila CSI driver](https://github.com/kubernetes/cloud-provider-openstack/tree/master/docs/manila-csi-plugin)
and its NFS node plugin, turns the cloud credentials into the driver's Secret, keeps one
StorageClass per Manila share type (never deleting one when Manila is briefly unreachable), and
reports its conditions on the ClusterCSIDriver manila.csi.openstack.org.

**For clusters where the platform does not run its own Manila operator**: on OpenShift on
OpenStack with the Storage capability enabled, the cluster-storage-operator already runs one under
the same names; this operator then writes nothing (see docs/operator.md). Use
` + "`manila-setup networks attach`" + ` there to attach the workers to Manila's storage network.

After installing, create the Secret manila-cloud-credentials (key clouds.yaml) in the install
namespace, or a CredentialsRequest for it, and then the ClusterCSIDriver:`

// installNamespaceFromDownwardAPI makes the operator read its namespace from its pod instead of
// a literal: OLM decides the namespace at install time.
func installNamespaceFromDownwardAPI(d *appsv1.Deployment) error {
	found := false
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		for j, a := range c.Args {
			if a == "--namespace="+namespaceToken {
				c.Args[j] = "--namespace=$(" + namespaceEnv + ")"
				// First, so that $(OPERATOR_NAMESPACE) expands in later variables too.
				c.Env = append([]corev1.EnvVar{{Name: namespaceEnv, ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}, c.Env...)
				found = true
			}
		}
	}
	if !found {
		return fmt.Errorf("bundle: the operator's Deployment takes no --namespace argument to point at the install namespace")
	}
	d.Namespace = ""
	return nil
}

func relatedImages(opts Options) []any {
	env := opts.Images.ImageEnv()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := []any{map[string]any{"name": "manila-setup-operator", "image": opts.OperatorImage}}
	if opts.MustGatherImage != "" {
		out = append(out, map[string]any{"name": "manila-setup-must-gather", "image": opts.MustGatherImage})
	}
	for _, k := range keys {
		name := strings.ReplaceAll(strings.ToLower(strings.TrimSuffix(k, "_IMAGE")), "_", "-")
		out = append(out, map[string]any{"name": name, "image": *env[k]})
	}
	return out
}

func dockerfile(annotations map[string]string) []byte {
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# The bundle image: `podman build -f bundle.Dockerfile -t <registry>/manila-setup-operator-bundle:v<version> .`\nFROM scratch\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "LABEL %s=%s\n", k, annotations[k])
	}
	b.WriteString("COPY manifests /manifests/\nCOPY metadata /metadata/\n")
	return []byte(b.String())
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("bundle: %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// ErrNotEmpty: Write never writes over an earlier bundle or anything else.
var ErrNotEmpty = errors.New("the directory is not empty")

// Write writes the bundle into dir, which must not exist yet or be empty: a half-written bundle
// never appears under its name (the files go to a sibling directory that is renamed at the end).
func Write(dir string, files map[string][]byte) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%w: %q holds %d entries; give a new or empty directory", ErrNotEmpty, dir, len(entries))
	}
	parent := filepath.Dir(filepath.Clean(dir))
	tmp, err := os.MkdirTemp(parent, ".bundle-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(tmp, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := writeSynced(full, files[p]); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	_ = os.Remove(dir) // empty or absent
	return os.Rename(tmp, dir)
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
