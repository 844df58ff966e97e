package testenv

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"embed"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	sigsyaml "sigs.k8s.io/yaml"

	// The CRDs installed are read from the module that provides these Go types, so the two always
	// match; the imports also keep that module in go.mod.
	_ "github.com/openshift/api/config/v1"
	_ "github.com/openshift/api/machine/v1"
	_ "github.com/openshift/api/machine/v1beta1"
	_ "github.com/openshift/api/operator/v1"
)

// openshiftCRDs are the CustomResourceDefinitions the project works with, as shipped in the
// github.com/openshift/api module (the feature set an ordinary cluster runs: Default).
var openshiftCRDs = []string{
	"machine/v1beta1/zz_generated.crd-manifests/0000_10_machine-api_01_machines-Default.crd.yaml",
	"machine/v1beta1/zz_generated.crd-manifests/0000_10_machine-api_01_machinesets-Default.crd.yaml",
	"machine/v1/zz_generated.crd-manifests/0000_10_control-plane-machine-set_01_controlplanemachinesets-Default.crd.yaml",
	"operator/v1/zz_generated.crd-manifests/0000_50_csi-driver_01_clustercsidrivers-Default.crd.yaml",
	"config/v1/zz_generated.crd-manifests/0000_10_config-operator_01_infrastructures-Default.crd.yaml",
	"config/v1/zz_generated.crd-manifests/0000_03_config-operator_01_proxies.crd.yaml",
	// What the cluster-version operator keeps: capabilities, and the storage ClusterOperator of
	// the platform's cluster-storage-operator (PlatformManila stands in for it).
	"config/v1/zz_generated.crd-manifests/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
	"config/v1/zz_generated.crd-manifests/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
}

var (
	openshiftAPIDirOnce sync.Once
	openshiftAPIDir     string
	openshiftAPIDirErr  error
)

// crdFiles are CRDs of OpenShift components that github.com/openshift/api does not ship.
//
//go:embed crds/*.yaml
var crdFiles embed.FS

func ownCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := crdFiles.ReadDir("crds")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		b, err := crdFiles.ReadFile("crds/" + e.Name())
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := sigsyaml.Unmarshal(b, crd); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", e.Name(), err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// OpenShiftCRDPaths returns the CRD files of openshiftCRDs inside the module cache, at exactly the
// openshift/api version go.mod pins, so the CRDs always match the Go types.
func OpenShiftCRDPaths() ([]string, error) {
	openshiftAPIDirOnce.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
		if err != nil {
			openshiftAPIDirErr = fmt.Errorf("locating the github.com/openshift/api module (go list -m): %w", err)
			return
		}
		openshiftAPIDir = strings.TrimSpace(string(out))
	})
	if openshiftAPIDirErr != nil {
		return nil, openshiftAPIDirErr
	}
	paths := make([]string, 0, len(openshiftCRDs))
	for _, rel := range openshiftCRDs {
		p := filepath.Join(openshiftAPIDir, rel)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("CRD %s: %w", rel, err)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// APIServer is a real kube-apiserver with etcd and the OpenShift CRDs installed.
type APIServer struct {
	// Config talks to the apiserver as a cluster admin.
	Config *rest.Config
	// Client is a typed client built from Config.
	Client kubernetes.Interface
	// AuditLog is the API server's audit log (JSON lines): every write, at Metadata level, so
	// that tests can prove who wrote what (see Writes).
	AuditLog string

	env      *envtest.Environment
	auditDir string
	nodes    *nodeProxy // with APIServerOptions.GuestNodes
}

// auditPolicy records every write (who, what, when), and every request of a ServiceAccount (the
// pods that run for real on a real node: Refused finds what RBAC denied them). Other reads would
// make the log grow by the informers' watches and say nothing tests look for.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

// APIServerOptions shape an APIServer.
type APIServerOptions struct {
	// ServiceAccountTokens turns on the ServiceAccount admission plugin, which envtest turns
	// off: pods get their ServiceAccount's token and the cluster's CA mounted, as on a real
	// cluster, and a pod naming a ServiceAccount that does not exist is refused. For clusters
	// whose pods run for real (a real node); kwok's pods never read a token.
	ServiceAccountTokens bool
	// PlainKubernetes leaves out every OpenShift CRD (config, machine, operator, Cloud Credential
	// Operator): a cluster that serves none of OpenShift's APIs, as upstream Kubernetes.
	PlainKubernetes bool
	// GuestNodes sends the apiserver's traffic to kubelets through a proxy of the test's
	// (nodeProxy), which reaches the kubelets of guest nodes (StartGuestNode) behind their
	// forwarded loopback ports: kubectl logs and exec work for their pods.
	GuestNodes bool
}

// kubernetesServiceIP is the ClusterIP of the kubernetes Service: the first address of envtest's
// service range (10.0.0.0/24), what in-cluster clients dial.
var kubernetesServiceIP = net.IPv4(10, 0, 0, 1)

// StartAPIServer starts kube-apiserver and etcd from the cached binaries and installs the CRDs.
// Call Stop when done; tests use NewAPIServer, which stops it in t.Cleanup.
func StartAPIServer() (*APIServer, error) {
	return StartAPIServerWith(APIServerOptions{})
}

// StartAPIServerWith starts an APIServer shaped by opts.
func StartAPIServerWith(opts APIServerOptions) (*APIServer, error) {
	assets, err := KubeAssets()
	if err != nil {
		return nil, err
	}
	var crds []string
	if !opts.PlainKubernetes {
		if crds, err = OpenShiftCRDPaths(); err != nil {
			return nil, err
		}
	}
	auditDir, err := os.MkdirTemp("", "manila-setup-audit-")
	if err != nil {
		return nil, err
	}
	policy, auditLog := filepath.Join(auditDir, "policy.yaml"), filepath.Join(auditDir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	leashed, err := leashAssets(assets, filepath.Join(auditDir, "bin"))
	if err != nil {
		_ = os.RemoveAll(auditDir)
		return nil, err
	}
	var own []*apiextensionsv1.CustomResourceDefinition
	if !opts.PlainKubernetes {
		if own, err = ownCRDs(); err != nil {
			return nil, err
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: crds, CRDs: own, ErrorIfPathMissing: true, MaxTime: crdWait},
		// envtest's defaults (20 s to start each of etcd and the apiserver) are close to what a
		// start takes when the whole suite starts its servers at once on two cores.
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// A serving certificate of its own, which names the kubernetes Service's ClusterIP as a real
	// apiserver's does (envtest's names localhost and 127.0.0.1 only): a pod's client dials
	// that address and checks it. envtest generates nothing in a CertDir that has one already.
	certDir := filepath.Join(auditDir, "pki")
	servingCA, err := writeAPIServerCerts(certDir)
	if err != nil {
		_ = os.RemoveAll(auditDir)
		return nil, err
	}
	api := env.ControlPlane.GetAPIServer()
	// The paths, not BinaryAssetsDirectory: envtest takes $KUBEBUILDER_ASSETS before that
	// directory, and make test sets it.
	api.Path = filepath.Join(leashed, "kube-apiserver")
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(leashed, "etcd")}
	api.CertDir = certDir
	api.SecureServing.CA = servingCA
	args := api.Configure().
		Set("audit-policy-file", policy).
		Set("audit-log-path", auditLog).
		Set("audit-log-format", "json").
		Set("audit-log-mode", "blocking") // every write is in the file once its request returns
	if opts.ServiceAccountTokens {
		args.Set("disable-admission-plugins", "").Set("enable-admission-plugins", "ServiceAccount")
	}
	var nodes *nodeProxy
	if opts.GuestNodes {
		proxy, conf, err := startNodeProxy(auditDir)
		if err != nil {
			_ = os.RemoveAll(auditDir)
			return nil, err
		}
		nodes = proxy
		args.Set("egress-selector-config-file", conf)
	}
	// envtest logs through controller-runtime, which otherwise complains with a stack trace
	// that nobody set its logger; what it would log is in the returned errors.
	ctrllog.SetLogger(logr.Discard())
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		if nodes != nil {
			nodes.close()
		}
		_ = os.RemoveAll(auditDir)
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(auditDir)
		return nil, err
	}
	return &APIServer{Config: cfg, Client: client, AuditLog: auditLog, env: env, auditDir: auditDir, nodes: nodes}, nil
}

// writeAPIServerCerts writes to dir what envtest would generate there: the serving certificate
// (apiserver.crt and .key), here for localhost, 127.0.0.1 and the kubernetes Service (its
// ClusterIP and names), and the service accounts' signing key (sa-signer.key and .crt, the
// public key). It returns the PEM of the CA that signed the serving certificate.
func writeAPIServerCerts(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	chain, key, err := certutil.GenerateSelfSignedCertKey("localhost",
		[]net.IP{net.IPv4(127, 0, 0, 1), kubernetesServiceIP},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return nil, fmt.Errorf("the apiserver's serving certificate: %w", err)
	}
	// The chain is the serving certificate, then its CA.
	first, ca := pem.Decode(chain)
	if first == nil || len(bytes.TrimSpace(ca)) == 0 {
		return nil, fmt.Errorf("the apiserver's serving certificate: no CA after it in the chain")
	}
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	private, err := x509.MarshalECPrivateKey(signer)
	if err != nil {
		return nil, err
	}
	public, err := x509.MarshalPKIXPublicKey(&signer.PublicKey)
	if err != nil {
		return nil, err
	}
	for name, content := range map[string][]byte{
		"apiserver.crt": chain,
		"apiserver.key": key,
		"sa-signer.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: private}),
		"sa-signer.crt": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: public}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			return nil, err
		}
	}
	return bytes.TrimSpace(ca), nil
}

// NewAPIServer starts an APIServer for one test and stops it when the test ends. A missing
// environment fails the test: `make test` builds the binaries first.
func NewAPIServer(t testing.TB) *APIServer {
	t.Helper()
	s, err := StartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stopping the apiserver: %v", err)
		}
	})
	return s
}

// Stop stops the apiserver and etcd and removes their data.
func (s *APIServer) Stop() error {
	err := s.env.Stop()
	if s.nodes != nil {
		s.nodes.close()
	}
	_ = os.RemoveAll(s.auditDir)
	return err
}

// KubeconfigFor writes a kubeconfig for a user with the given groups (e.g. "system:masters") to
// dir and returns its path: what a CLI under test or an extra control-plane component uses.
func (s *APIServer) KubeconfigFor(dir, user string, groups ...string) (string, error) {
	u, err := s.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return "", fmt.Errorf("adding user %s: %w", user, err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, user+".kubeconfig")
	return path, os.WriteFile(path, b, 0o600)
}

// UserConfig returns a rest.Config for a user with the given groups, for RBAC tests.
func (s *APIServer) UserConfig(user string, groups ...string) (*rest.Config, error) {
	u, err := s.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// UseMachineAPIFeatureSet replaces the Machine and MachineSet CRDs with those of an OpenShift
// feature set, as a cluster that enabled it serves them: TechPreviewNoUpgrade brings the fields
// of the Machine API → Cluster API migration (spec and status authoritativeAPI).
func (s *APIServer) UseMachineAPIFeatureSet(featureSet string) error {
	paths, err := OpenShiftCRDPaths()
	if err != nil {
		return err
	}
	var machineAPI []string
	for _, p := range paths {
		if strings.Contains(filepath.Base(p), "_machine-api_") {
			machineAPI = append(machineAPI, strings.Replace(p, "-Default.crd.yaml", "-"+featureSet+".crd.yaml", 1))
		}
	}
	_, err = envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Paths: machineAPI, ErrorIfPathMissing: true, MaxTime: crdWait})
	return err
}

// crdWait bounds the wait for installed CRDs to be served; envtest's default of 10 s is close to
// what it takes on a loaded machine. It only caps a failure.
const crdWait = 2 * time.Minute

// InstallHyperShiftCRDs installs HyperShift's NodePool and HostedCluster CRDs (the OpenStack
// feature set) from the github.com/openshift/hypershift/api module at the version go.mod pins,
// as a HyperShift management cluster serves them.
func (s *APIServer) InstallHyperShiftCRDs() error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/hypershift/api").Output()
	if err != nil {
		return fmt.Errorf("locating the github.com/openshift/hypershift/api module (go list -m): %w", err)
	}
	var paths []string
	for _, crd := range []string{"nodepools.hypershift.openshift.io", "hostedclusters.hypershift.openshift.io"} {
		paths = append(paths, filepath.Join(strings.TrimSpace(string(out)), "hypershift", "v1beta1", "zz_generated.featuregated-crd-manifests", crd, "OpenStack.yaml"))
	}
	_, err = envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true, MaxTime: crdWait})
	return err
}

// InstallClusterAPICRDs installs the Cluster API CRDs of machines (MachineSet,
// MachineDeployment, Machine) and CAPO's OpenStackMachineTemplate and OpenStackMachine, from the
// sigs.k8s.io/cluster-api and sigs.k8s.io/cluster-api-provider-openstack modules at the versions
// go.mod pins, as a cluster running Cluster API on OpenStack serves them (v1beta1, the only
// version these serve).
func (s *APIServer) InstallClusterAPICRDs() error {
	var paths []string
	for module, files := range map[string][]string{
		"sigs.k8s.io/cluster-api":                    {"cluster.x-k8s.io_machinesets.yaml", "cluster.x-k8s.io_machinedeployments.yaml", "cluster.x-k8s.io_machines.yaml"},
		"sigs.k8s.io/cluster-api-provider-openstack": {"infrastructure.cluster.x-k8s.io_openstackmachinetemplates.yaml", "infrastructure.cluster.x-k8s.io_openstackmachines.yaml"},
	} {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
		if err != nil {
			return fmt.Errorf("locating the %s module (go list -m): %w", module, err)
		}
		for _, f := range files {
			paths = append(paths, filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "bases", f))
		}
	}
	_, err := envtest.InstallCRDs(s.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true, MaxTime: crdWait})
	return err
}
