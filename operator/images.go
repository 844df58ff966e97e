package operator

import (
	"fmt"
	"strings"
)

// Operand is one image the operator deploys: where it comes from and the version rendered by
// default. Versions are pinned; a digest is pinned as well where it is known (none can be read
// from a registry on the machines that build this project, so none is claimed).
type Operand struct {
	// Env is the operator's environment variable (and the render placeholder).
	Env        string `json:"env"`
	Repository string `json:"repository"`
	Version    string `json:"version"`
	Digest     string `json:"digest,omitempty"` // "sha256:..." when known
	// Module is the Go module whose binary test/env/csi/build.sh or test/env/node/operands.sh
	// builds at Version and the tests run, when this operand is built from source here (the
	// module proxy serves no source of the registrar, the liveness probe and the NFS plugin:
	// the real node runs stand-ins for them, test/env/node/standins).
	Module string `json:"testedModule,omitempty"`
}

// Reference is the image reference: repository@digest when the digest is known, else
// repository:version.
func (o Operand) Reference() string {
	if o.Digest != "" {
		return o.Repository + "@" + o.Digest
	}
	return o.Repository + ":" + o.Version
}

// Operands is the one table of operand images. Those with a Module are the versions the tests
// build from source and run (a test compares this table with the build scripts); the other
// sidecars are the releases that go with them.
var Operands = []Operand{
	{Env: "DRIVER_IMAGE", Repository: "registry.k8s.io/provider-os/manila-csi-plugin", Version: "v1.35.0", Module: "k8s.io/cloud-provider-openstack"},
	{Env: "NFS_DRIVER_IMAGE", Repository: "registry.k8s.io/sig-storage/nfsplugin", Version: "v4.11.0"},
	{Env: "PROVISIONER_IMAGE", Repository: "registry.k8s.io/sig-storage/csi-provisioner", Version: "v5.3.0", Module: "github.com/kubernetes-csi/external-provisioner/v5"},
	{Env: "SNAPSHOTTER_IMAGE", Repository: "registry.k8s.io/sig-storage/csi-snapshotter", Version: "v8.3.0", Module: "github.com/kubernetes-csi/external-snapshotter/v8"},
	{Env: "RESIZER_IMAGE", Repository: "registry.k8s.io/sig-storage/csi-resizer", Version: "v1.14.0", Module: "github.com/kubernetes-csi/external-resizer"},
	{Env: "LIVENESS_PROBE_IMAGE", Repository: "registry.k8s.io/sig-storage/livenessprobe", Version: "v2.16.0"},
	{Env: "NODE_DRIVER_REGISTRAR_IMAGE", Repository: "registry.k8s.io/sig-storage/csi-node-driver-registrar", Version: "v2.14.0"},
	{Env: "KUBE_RBAC_PROXY_IMAGE", Repository: "quay.io/brancz/kube-rbac-proxy", Version: "v0.19.1", Module: "github.com/brancz/kube-rbac-proxy"},
}

// DefaultImages are the references of Operands, what `operator render` and `operator install`
// use when the corresponding environment variable (DRIVER_IMAGE, ...) is not set. The operator
// itself never defaults: it takes its operand images from its environment only.
var DefaultImages = func() Images {
	var im Images
	env := im.ImageEnv()
	for _, o := range Operands {
		*env[o.Env] = o.Reference()
	}
	return im
}()

// OperatorImageName and CLIImageName are the images' names under an image repository (make
// image builds REPO/manila-setup-operator:VERSION and REPO/manila-setup:VERSION).
const (
	OperatorImageName = "manila-setup-operator"
	CLIImageName      = "manila-setup"
)

// CLIImage is the CLI's image of a version in a repository, as make image tags it: also the
// must-gather image (its /usr/bin/gather runs must-gather into /must-gather).
func CLIImage(repo, version string) (string, error) {
	if version == "" || version == "dev" {
		return "", fmt.Errorf("this manila-setup was built without a version, so it has no CLI image of its own")
	}
	ref := strings.TrimSuffix(repo, "/") + "/" + CLIImageName + ":" + version
	return ref, CheckImageReference(ref)
}

// OperatorImage is the operator image a binary of version renders by default: the image of the
// same version under repo (the IMAGE_REPO it was built with). A build without a release version
// has no image to point at.
func OperatorImage(repo, version string) (string, error) {
	if version == "" || version == "dev" {
		return "", fmt.Errorf("this manila-setup was built without a version, so it has no operator image of its own: give --image (or OPERATOR_IMAGE), e.g. the one make image built")
	}
	ref := strings.TrimSuffix(repo, "/") + "/" + OperatorImageName + ":" + version
	return ref, CheckImageReference(ref)
}

// CheckImageReference refuses references that do not pin a version: no tag (which means
// :latest) or the tag latest. What runs in a cluster must be what was tested.
func CheckImageReference(ref string) error {
	if strings.Contains(ref, "@sha256:") {
		return nil
	}
	name := ref[strings.LastIndex(ref, "/")+1:]
	tag := ""
	if i := strings.LastIndex(name, ":"); i >= 0 {
		tag = name[i+1:]
	}
	switch tag {
	case "":
		return fmt.Errorf("image %q has no tag, which means :latest: give a version tag or a digest", ref)
	case "latest":
		return fmt.Errorf("image %q: :latest is refused; give a version tag or a digest, so that what runs is what was tested", ref)
	}
	return nil
}
