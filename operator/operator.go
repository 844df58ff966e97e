// Package operator is what the manila-setup CLI and the in-cluster operator share about the
// Manila CSI driver: the manifests that deploy the operator (Render), names, operand images,
// the credentials translation, StorageClass naming and the decoding of the embedded assets.
// Installing into a cluster and reading the status back is operator/deploy; the running
// operator is operator/controllers, in its own binary, manila-setup-operator. This package
// links neither client-go's clientset nor library-go, so both binaries stay small.
package operator

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/assets"
)

const (
	// DriverName is the CSI driver, and the name of the ClusterCSIDriver the operator watches.
	DriverName = "manila.csi.openstack.org"
	// DefaultNamespace is where the operator and the driver run.
	DefaultNamespace = "openshift-cluster-csi-drivers"
	// OperatorName names the operator's Deployment, ServiceAccount, lease and event source.
	OperatorName = "manila-csi-driver-operator"
	// DefaultResync is how often every controller re-checks, and so how often Manila is asked
	// for its share types.
	DefaultResync = time.Minute

	// ControllerDeploymentName, NodeDaemonSetName and NFSNodeDaemonSetName are the driver's
	// workloads.
	ControllerDeploymentName = "manila-csi-driver-controller"
	NodeDaemonSetName        = "manila-csi-driver-node"
	NFSNodeDaemonSetName     = "manila-csi-driver-nfs-node"

	// ConditionDisabled is True when the cloud offers no usable Manila (reason says why).
	ConditionDisabled = "ManilaControllerDisabled"
	// ConditionManilaReachable says whether Manila answered the last check (reason and message
	// say why not: which host, which error). Apart from ConditionDisabled: an outage does not
	// uninstall anything.
	ConditionManilaReachable = "ManilaReachable"
	// ConditionStorageNetworkReachable says whether the MachineSets attach their machines to
	// the network Manila exports on.
	ConditionStorageNetworkReachable = "StorageNetworkReachable"
)

// Images are the operand images; they come only from the operator's environment.
type Images struct {
	Driver, NFSDriver, Provisioner, Snapshotter, Resizer, LivenessProbe, NodeDriverRegistrar, KubeRBACProxy string
}

// ImageEnv maps each placeholder/environment variable to its field.
func (i *Images) ImageEnv() map[string]*string {
	return map[string]*string{
		"DRIVER_IMAGE":                &i.Driver,
		"NFS_DRIVER_IMAGE":            &i.NFSDriver,
		"PROVISIONER_IMAGE":           &i.Provisioner,
		"SNAPSHOTTER_IMAGE":           &i.Snapshotter,
		"RESIZER_IMAGE":               &i.Resizer,
		"LIVENESS_PROBE_IMAGE":        &i.LivenessProbe,
		"NODE_DRIVER_REGISTRAR_IMAGE": &i.NodeDriverRegistrar,
		"KUBE_RBAC_PROXY_IMAGE":       &i.KubeRBACProxy,
	}
}

// ImagesFromEnv reads every image from its environment variable and names those missing.
func ImagesFromEnv(getenv func(string) string) (Images, error) {
	var im Images
	var missing []string
	for k, p := range im.ImageEnv() {
		*p = strings.TrimSpace(getenv(k))
		if *p == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return im, fmt.Errorf("operand images come from the environment; not set: %s", strings.Join(missing, ", "))
	}
	return im, nil
}

// assetDecoder knows the kinds of the operand manifests and no others: client-go's scheme of
// every API group would cost the operator binary, which links this package, about 10 MiB of
// resident memory (docs/performance.md).
var assetDecoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme, storagev1.AddToScheme, policyv1.AddToScheme, networkingv1.AddToScheme} {
		utilruntime.Must(add(s))
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// decodedAssets keeps the last object each manifest rendered to, by its rendered bytes: the
// controllers render the same manifests with the same values at every resync, and decoding the
// YAML was a third of the operator's CPU in steady state.
var decodedAssets = struct {
	sync.Mutex
	last map[string]decodedAsset
}{last: map[string]decodedAsset{}}

type decodedAsset struct {
	rendered string
	obj      runtime.Object
}

// decodeAsset decodes a rendered manifest with decode, or returns a copy of what the same bytes
// decoded to last time.
func decodeAsset(name string, b []byte, decode func([]byte) (runtime.Object, error)) (runtime.Object, error) {
	decodedAssets.Lock()
	last, ok := decodedAssets.last[name]
	decodedAssets.Unlock()
	if ok && last.rendered == string(b) {
		return last.obj.DeepCopyObject(), nil
	}
	obj, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	decodedAssets.Lock()
	decodedAssets.last[name] = decodedAsset{rendered: string(b), obj: obj.DeepCopyObject()}
	decodedAssets.Unlock()
	return obj, nil
}

// ReadAsset renders a manifest of assets/ and decodes it into its typed object.
func ReadAsset(name string, vars map[string]string) (runtime.Object, error) {
	b, err := assets.Render(name, vars)
	if err != nil {
		return nil, err
	}
	return decodeAsset(name, b, func(b []byte) (runtime.Object, error) {
		obj, _, err := assetDecoder.Decode(b, nil, nil)
		return obj, err
	})
}

// ReadUnstructuredAsset renders a manifest whose kind has no Go type here (ServiceMonitor,
// VolumeSnapshotClass).
func ReadUnstructuredAsset(name string, vars map[string]string) (*unstructured.Unstructured, error) {
	b, err := assets.Render(name, vars)
	if err != nil {
		return nil, err
	}
	obj, err := decodeAsset("unstructured:"+name, b, func(b []byte) (runtime.Object, error) {
		u := &unstructured.Unstructured{}
		return u, yaml.Unmarshal(b, &u.Object)
	})
	if err != nil {
		return nil, err
	}
	return obj.(*unstructured.Unstructured), nil
}

// InstallConfigNetworks are the networks and VIPs of the install-config a cluster keeps
// (kube-system/cluster-config-v1): what a storage subnet must neither overlap nor hold, and
// where a node's IP belongs.
type InstallConfigNetworks struct {
	Machine, Cluster, Service []netip.Prefix
	// VIPs are platform.openstack's apiVIPs and ingressVIPs (or the older apiVIP, ingressVIP).
	VIPs []netip.Addr
}

// All are the machine, cluster and service networks.
func (n InstallConfigNetworks) All() []netip.Prefix {
	return slices.Concat(n.Machine, n.Cluster, n.Service)
}

// ParseInstallConfigNetworks reads the networks and VIPs of an install-config. It is lenient:
// what does not parse is left out (a storage subnet is then not checked against it), as the
// file was checked by the installer and the StorageClasses' reading reports its errors
// (MachineNetworksFromInstallConfig).
func ParseInstallConfigNetworks(b []byte) InstallConfigNetworks {
	var ic struct {
		Networking struct {
			MachineNetwork []struct {
				CIDR string `json:"cidr"`
			} `json:"machineNetwork"`
			ClusterNetwork []struct {
				CIDR string `json:"cidr"`
			} `json:"clusterNetwork"`
			ServiceNetwork []string `json:"serviceNetwork"`
		} `json:"networking"`
		Platform struct {
			OpenStack struct {
				APIVIPs     []string `json:"apiVIPs"`
				IngressVIPs []string `json:"ingressVIPs"`
				APIVIP      string   `json:"apiVIP"`
				IngressVIP  string   `json:"ingressVIP"`
			} `json:"openstack"`
		} `json:"platform"`
	}
	var out InstallConfigNetworks
	if yaml.Unmarshal(b, &ic) != nil {
		return out
	}
	prefixes := func(cidrs []string) []netip.Prefix {
		var ps []netip.Prefix
		for _, c := range cidrs {
			if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
				ps = append(ps, p.Masked())
			}
		}
		return ps
	}
	var machine, cluster []string
	for _, n := range ic.Networking.MachineNetwork {
		machine = append(machine, n.CIDR)
	}
	for _, n := range ic.Networking.ClusterNetwork {
		cluster = append(cluster, n.CIDR)
	}
	out.Machine, out.Cluster, out.Service = prefixes(machine), prefixes(cluster), prefixes(ic.Networking.ServiceNetwork)
	o := ic.Platform.OpenStack
	for _, s := range slices.Concat(o.APIVIPs, o.IngressVIPs, []string{o.APIVIP, o.IngressVIP}) {
		if a, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil && !slices.Contains(out.VIPs, a) {
			out.VIPs = append(out.VIPs, a)
		}
	}
	return out
}

// MachineNetworksFromInstallConfig reads networking.machineNetwork[].cidr.
func MachineNetworksFromInstallConfig(b []byte) ([]string, error) {
	var ic struct {
		Networking struct {
			MachineNetwork []struct {
				CIDR string `json:"cidr"`
			} `json:"machineNetwork"`
		} `json:"networking"`
	}
	if err := yaml.Unmarshal(b, &ic); err != nil {
		return nil, fmt.Errorf("install-config is not valid YAML")
	}
	var out []string
	for _, n := range ic.Networking.MachineNetwork {
		p, err := netip.ParsePrefix(strings.TrimSpace(n.CIDR))
		if err != nil {
			return nil, fmt.Errorf("install-config networking.machineNetwork: %q is not a CIDR", n.CIDR)
		}
		out = append(out, p.Masked().String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("install-config has no networking.machineNetwork")
	}
	return out, nil
}
