package bundle

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/operator"
)

const testImage = "quay.io/example/manila-setup-operator:v0.4.0"

// csv is the part of a ClusterServiceVersion the tests read.
type csv struct {
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Version  string `json:"version"`
		Replaces string `json:"replaces"`
		Install  struct {
			Spec struct {
				ClusterPermissions []struct {
					ServiceAccountName string              `json:"serviceAccountName"`
					Rules              []rbacv1.PolicyRule `json:"rules"`
				} `json:"clusterPermissions"`
				Permissions []struct {
					ServiceAccountName string              `json:"serviceAccountName"`
					Rules              []rbacv1.PolicyRule `json:"rules"`
				} `json:"permissions"`
				Deployments []struct {
					Name string                `json:"name"`
					Spec appsv1.DeploymentSpec `json:"spec"`
				} `json:"deployments"`
			} `json:"spec"`
		} `json:"install"`
		RelatedImages []struct {
			Name  string `json:"name"`
			Image string `json:"image"`
		} `json:"relatedImages"`
	} `json:"spec"`
}

// The CSV says what `operator render` says: the same Deployment (but for where the namespace
// comes from), the same rules, every image.
func TestCSVComesFromTheRenderedAssets(t *testing.T) {
	files, err := Files(Options{Version: "v0.4.0", OperatorImage: testImage, Images: operator.DefaultImages})
	if err != nil {
		t.Fatal(err)
	}
	var got csv
	if err := yaml.Unmarshal(files[CSVPath], &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Name != "manila-setup-operator.v0.4.0" || got.Spec.Version != "0.4.0" {
		t.Errorf("name %q, version %q", got.Metadata.Name, got.Spec.Version)
	}
	rendered, err := operator.Render(operator.RenderOptions{Namespace: "ns1", OperatorImage: testImage, Images: operator.DefaultImages})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := operator.Objects(rendered)
	if err != nil {
		t.Fatal(err)
	}
	var wantCluster, wantNamespaced []rbacv1.PolicyRule
	var wantDeployment appsv1.Deployment
	for _, u := range objs {
		switch {
		case u.GetKind() == "ClusterRole":
			var r rbacv1.ClusterRole
			_ = fromUnstructured(u, &r)
			wantCluster = append(wantCluster, r.Rules...)
		case u.GetKind() == "Role" && u.GetNamespace() == "ns1":
			var r rbacv1.Role
			_ = fromUnstructured(u, &r)
			wantNamespaced = append(wantNamespaced, r.Rules...)
		case u.GetKind() == "Role":
			var r rbacv1.Role
			_ = fromUnstructured(u, &r)
			wantCluster = append(wantCluster, r.Rules...)
		case u.GetKind() == "Deployment":
			_ = fromUnstructured(u, &wantDeployment)
		}
	}
	spec := got.Spec.Install.Spec
	if len(spec.ClusterPermissions) != 1 || !reflect.DeepEqual(spec.ClusterPermissions[0].Rules, wantCluster) {
		t.Errorf("clusterPermissions differ from the ClusterRole and the kube-system Role:\n%+v\nwant\n%+v", spec.ClusterPermissions, wantCluster)
	}
	if len(spec.Permissions) != 1 || !reflect.DeepEqual(spec.Permissions[0].Rules, wantNamespaced) {
		t.Errorf("permissions differ from the operator's Role:\n%+v", spec.Permissions)
	}
	if sa := spec.Permissions[0].ServiceAccountName; sa != wantDeployment.Spec.Template.Spec.ServiceAccountName {
		t.Errorf("permissions for %q, the Deployment runs as %q", sa, wantDeployment.Spec.Template.Spec.ServiceAccountName)
	}
	if len(spec.Deployments) != 1 {
		t.Fatalf("%d deployments", len(spec.Deployments))
	}
	d := spec.Deployments[0].Spec
	c := &d.Template.Spec.Containers[0]
	if c.Env[0].Name != namespaceEnv || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("first env %+v, want %s from metadata.namespace", c.Env[0], namespaceEnv)
	}
	if !slices.Contains(c.Args, "--namespace=$(OPERATOR_NAMESPACE)") {
		t.Errorf("args %v", c.Args)
	}
	// Undo the two changes: the rest is the rendered Deployment.
	c.Env = c.Env[1:]
	c.Args[slices.Index(c.Args, "--namespace=$(OPERATOR_NAMESPACE)")] = "--namespace=ns1"
	if !reflect.DeepEqual(d, wantDeployment.Spec) {
		t.Errorf("the CSV's Deployment differs from the rendered one")
	}

	var images []string
	for _, r := range got.Spec.RelatedImages {
		images = append(images, r.Image)
	}
	for _, want := range append([]string{testImage}, imagesOf(operator.DefaultImages)...) {
		if !slices.Contains(images, want) {
			t.Errorf("relatedImages lack %s (a mirror would miss it): %v", want, images)
		}
	}
	if got.Metadata.Annotations["operatorframework.io/suggested-namespace"] != operator.DefaultNamespace {
		t.Errorf("suggested namespace %q", got.Metadata.Annotations["operatorframework.io/suggested-namespace"])
	}
	for path, b := range files {
		if strings.Contains(string(b), namespaceToken) {
			t.Errorf("%s names the render-time namespace", path)
		}
	}
	if df := string(files["bundle.Dockerfile"]); !strings.Contains(df, "LABEL operators.operatorframework.io.bundle.package.v1=manila-setup-operator") {
		t.Errorf("bundle.Dockerfile:\n%s", df)
	}
}

func imagesOf(im operator.Images) []string {
	var out []string
	for _, p := range im.ImageEnv() {
		out = append(out, *p)
	}
	return out
}

func TestBadInput(t *testing.T) {
	for _, v := range []string{"dev", "0.4", "v0.4.0-3-gabc1234-dirty+", "latest"} {
		_, err := Files(Options{Version: v, OperatorImage: testImage, Images: operator.DefaultImages})
		if err == nil || !strings.Contains(err.Error(), `version: Invalid value: "`+v+`"`) {
			t.Errorf("version %q: %v", v, err)
		}
	}
	if _, err := Files(Options{Version: "0.4.0", OperatorImage: "quay.io/example/op:latest", Images: operator.DefaultImages}); err == nil {
		t.Error(":latest accepted")
	}
}

// TestUpgradePath: a bundle reaches a catalog's channel after the one it replaces, and may be
// installed straight over any earlier version (skipRange) unless told otherwise.
func TestUpgradePath(t *testing.T) {
	for _, tt := range []struct {
		name                        string
		opts                        Options
		wantReplaces, wantSkipRange string
	}{
		{"first bundle", Options{Version: "0.4.0"}, "", ">=0.0.0 <0.4.0"},
		{"replaces", Options{Version: "0.5.0", Replaces: "v0.4.0"}, PackageName + ".v0.4.0", ">=0.0.0 <0.5.0"},
		{"a range of its own", Options{Version: "0.5.0", Replaces: "0.4.0", SkipRange: ">=0.3.0 <0.5.0"}, PackageName + ".v0.4.0", ">=0.3.0 <0.5.0"},
		{"no range", Options{Version: "0.5.0", Replaces: "0.4.0", SkipRange: "none"}, PackageName + ".v0.4.0", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.OperatorImage, tt.opts.Images = testImage, operator.DefaultImages
			files, err := Files(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got csv
			if err := yaml.Unmarshal(files[CSVPath], &got); err != nil {
				t.Fatal(err)
			}
			if got.Spec.Replaces != tt.wantReplaces {
				t.Errorf("spec.replaces = %q, want %q", got.Spec.Replaces, tt.wantReplaces)
			}
			if r := got.Metadata.Annotations["olm.skipRange"]; r != tt.wantSkipRange {
				t.Errorf("olm.skipRange = %q, want %q", r, tt.wantSkipRange)
			}
		})
	}
	for _, bad := range []string{"0.4", "latest", "0.5.0"} {
		_, err := Files(Options{Version: "0.5.0", Replaces: bad, OperatorImage: testImage, Images: operator.DefaultImages})
		if err == nil || !strings.Contains(err.Error(), `replaces: Invalid value: "`+bad+`"`) {
			t.Errorf("replaces %q: %v", bad, err)
		}
	}
}

func TestWrite(t *testing.T) {
	files, err := Files(Options{Version: "0.4.0-rc.1", OperatorImage: testImage, Images: operator.DefaultImages})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := Write(dir, files); err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: %v", path, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("left beside the bundle: %v", entries)
	}
	// A second write into the same directory is refused and changes nothing.
	before, _ := os.ReadFile(filepath.Join(dir, CSVPath))
	if err := Write(dir, map[string][]byte{CSVPath: []byte("other")}); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("write into a full directory: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, CSVPath))
	if string(before) != string(after) {
		t.Error("the refused write changed the bundle")
	}
}

// The CSV names the must-gather image oc adm must-gather runs, and lists it for mirrors; without
// one it names none.
func TestCSVNamesTheMustGatherImage(t *testing.T) {
	const mg = "quay.io/team/manila-setup:v0.4.0"
	for _, image := range []string{mg, ""} {
		files, err := Files(Options{Version: "v0.4.0", OperatorImage: testImage, MustGatherImage: image, Images: operator.DefaultImages})
		if err != nil {
			t.Fatal(err)
		}
		var got csv
		if err := yaml.Unmarshal(files[CSVPath], &got); err != nil {
			t.Fatal(err)
		}
		annotation, named := got.Metadata.Annotations["operators.openshift.io/must-gather-image"]
		listed := slices.ContainsFunc(got.Spec.RelatedImages, func(r struct {
			Name  string `json:"name"`
			Image string `json:"image"`
		}) bool {
			return r.Image == mg && r.Name == "manila-setup-must-gather"
		})
		if image == "" && (named || listed) || image != "" && (annotation != mg || !listed) {
			t.Errorf("must-gather image %q: annotation %q (%t), in relatedImages %t", image, annotation, named, listed)
		}
	}
}
