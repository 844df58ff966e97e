package operator

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/assets"
	"github.com/manila-setup/manila-setup/operator/platform"
)

// DefaultOperatorImage is the operator image `render` and `install` point at unless told
// otherwise: the image of the CLI's own version (set by cmd/manila-setup from its build
// stamps, see OperatorImage). Empty: no default, OPERATOR_IMAGE or --image is needed.
var DefaultOperatorImage = ""

// RenderOptions shape the manifests that deploy the operator.
type RenderOptions struct {
	// Mode is driver (the default: the operator deploys the driver under the platform's names)
	// or companion (beside the platform's own Manila operator: names and a namespace of its own,
	// no driver, see companion.go).
	Mode          platform.Mode
	Namespace     string
	OperatorImage string
	Images        Images
	// WithoutClusterCSIDriver leaves out the ClusterCSIDriver (the operator then waits for one).
	WithoutClusterCSIDriver bool
	// CredentialsRequest adds a CredentialsRequest for the cloud-credential operator, which then
	// writes the credentials Secret (OpenShift's way; without it, the Secret comes from
	// clouds.yaml).
	CredentialsRequest bool
	// MachineNetworks, when given, are passed to the operator (--machine-network): the CIDRs its
	// StorageClasses admit where the cluster keeps no install-config (kube-system/
	// cluster-config-v1), as plain Kubernetes does not.
	MachineNetworks []string
}

// CompanionMonitoringAssets are the objects that let Prometheus scrape the companion and alert
// on what it finds: the same as the driver-mode operator keeps for itself. Install writes the
// ServiceMonitor and the PrometheusRule only where the cluster serves their kinds.
var CompanionMonitoringAssets = []string{"rbac/prometheus_role.yaml", "rbac/prometheus_rolebinding.yaml",
	"operator_metrics_service.yaml", "operator_servicemonitor.yaml", "prometheusrule.yaml"}

// CredentialsRequestAsset is the CredentialsRequest Render adds with RenderOptions.CredentialsRequest.
const CredentialsRequestAsset = "credentials/credentialsrequest.yaml"

// RenderOptionsFromEnv fills images from the environment, else the defaults.
func RenderOptionsFromEnv(getenv func(string) string) RenderOptions {
	o := RenderOptions{Namespace: DefaultNamespace, OperatorImage: DefaultOperatorImage, Images: DefaultImages}
	if v := getenv("OPERATOR_IMAGE"); v != "" {
		o.OperatorImage = v
	}
	for k, p := range o.Images.ImageEnv() {
		if v := getenv(k); v != "" {
			*p = v
		}
	}
	return o
}

// Render returns the multi-document YAML that deploys the operator: CRD, namespace, RBAC,
// Deployment and (unless left out) the ClusterCSIDriver; in companion mode the ManilaCompanion
// CRD and object instead of the ClusterCSIDriver's, and no operand image.
func Render(opts RenderOptions) ([]byte, error) {
	names := NamesFor(opts.Mode)
	if opts.Mode != "" && opts.Mode != platform.ModeDriver && opts.Mode != platform.ModeCompanion {
		return nil, fmt.Errorf("mode %q: expected driver or companion", opts.Mode)
	}
	if opts.Namespace == "" {
		opts.Namespace = names.Namespace
	}
	vars := map[string]string{"NAMESPACE": opts.Namespace, "OPERATOR_IMAGE": opts.OperatorImage, "OPERATOR_NAME": names.Operator}
	if names.Mode == platform.ModeDriver {
		for k, p := range opts.Images.ImageEnv() {
			if *p == "" {
				return nil, fmt.Errorf("image %s is empty", k)
			}
			vars[k] = *p
		}
	}
	if opts.OperatorImage == "" {
		return nil, fmt.Errorf("no operator image: give --image (or OPERATOR_IMAGE)")
	}
	if err := CheckImageReference(opts.OperatorImage); err != nil {
		return nil, err
	}
	for i, c := range opts.MachineNetworks {
		if _, err := netip.ParsePrefix(c); err != nil {
			return nil, fmt.Errorf("--machine-network[%d]: Invalid value: %q: must be a CIDR such as 10.0.0.0/16", i, c)
		}
	}
	files, err := assets.List(names.AssetDir)
	if err != nil {
		return nil, err
	}
	if opts.CredentialsRequest {
		files = append(files, CredentialsRequestAsset)
	}
	if names.Mode == platform.ModeCompanion {
		// In driver mode the operator keeps these itself (operator/controllers: static.go); the
		// companion writes nothing but StorageClasses, so they come with its install.
		files = append(files, CompanionMonitoringAssets...)
	}
	var out bytes.Buffer
	for _, name := range files {
		if opts.WithoutClusterCSIDriver && strings.HasSuffix(name, "_clustercsidriver.yaml") {
			continue
		}
		b, err := assets.Render(name, vars)
		if err != nil {
			return nil, err
		}
		for _, doc := range assets.SplitDocuments(b) {
			if doc, err = withMachineNetworks(doc, names.Operator, opts.MachineNetworks); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out.WriteString("---\n")
			out.Write(bytes.TrimLeft(doc, "\n"))
			if !bytes.HasSuffix(doc, []byte("\n")) {
				out.WriteByte('\n')
			}
		}
	}
	return out.Bytes(), nil
}

// withMachineNetworks adds --machine-network to the operator container's arguments when doc is
// the operator's Deployment and networks are given; any other document is returned as it is.
func withMachineNetworks(doc []byte, operatorName string, networks []string) ([]byte, error) {
	if len(networks) == 0 {
		return doc, nil
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(doc, &u.Object); err != nil || u.GetKind() != "Deployment" || u.GetName() != operatorName {
		return doc, nil
	}
	containers, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if err != nil || len(containers) == 0 {
		return nil, fmt.Errorf("Deployment %s: no containers", operatorName)
	}
	c := containers[0].(map[string]any)
	args, _ := c["args"].([]any)
	c["args"] = append(args, "--machine-network="+strings.Join(networks, ","))
	if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
		return nil, err
	}
	return yaml.Marshal(u.Object)
}

// Objects decodes rendered YAML into objects, in order.
func Objects(rendered []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for i, doc := range assets.SplitDocuments(rendered) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		objs = append(objs, u)
	}
	return objs, nil
}
