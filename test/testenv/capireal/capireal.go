// Package capireal runs the real Cluster API machine controllers against a sim cluster and the
// loopback OpenStack with Nova, for tests that assert on the servers and ports that come out:
// capi-controllers (test/env/clusterapi: Cluster API's MachineDeployment, MachineSet and Machine
// controllers and CAPO's OpenStackMachine and OpenStackServer controllers, built from their own
// module) with the CRDs of the same versions, one Cluster and OpenStackCluster shaped as a
// provisioned cluster on a pre-made network (the loopback cloud's tenant network; managed
// security groups, bastion and API load balancer off), the Secrets they read (clouds.yaml,
// the workload cluster's kubeconfig, bootstrap data), an image in Glance, and a kubelet's part:
// a kwok Node for each ACTIVE server, with its providerID, node IP and addresses
// (test/testenv/nodeboot, as for the Machine API's servers).
//
// What is not real: the Cluster's status (written here as a provisioned cluster has it: Cluster
// API would wait for a control plane provider), the OpenStackCluster's status (as CAPO reports a
// pre-made network), and the Nodes (kwok, registered here; no kubelet boots in a fake server).
package capireal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/nodeboot"
)

// The resources the tests create and read.
var (
	ClusterGVR           = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "clusters"}
	MachineDeploymentGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "machinedeployments"}
	MachineSetGVR        = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "machinesets"}
	MachineGVR           = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "machines"}
	OpenStackClusterGVR  = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "openstackclusters"}
	TemplateGVR          = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "openstackmachinetemplates"}
	OpenStackMachineGVR  = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "openstackmachines"}
)

// ClusterName is the name of the one Cluster (and OpenStackCluster) of an Env.
const ClusterName = "ostest"

// Env is the running controllers and what they act on.
type Env struct {
	// Namespace holds the Cluster and every object the tests make; the controllers watch only it.
	Namespace string
	// Prefix starts the name of every MachineDeployment and MachineSet the tests make, hence of
	// every Machine, OpenStackMachine and server: the cloud is shared with other tests.
	Prefix string
	// MachineNetwork is the ID of the cluster's network (the loopback cloud's tenant network),
	// where CAPO puts a Machine's default port.
	MachineNetwork string
	// ImageID is the Glance image the templates boot, Flavor the Nova flavor.
	ImageID, Flavor string
	Dyn             dynamic.Interface
	Kube            kubernetes.Interface

	cloud  *cloudClients
	proc   *testenv.Process
	booter *nodeboot.Booter
}

// Dir is the folder test/env/clusterapi/build.sh fills (the controllers and their CRDs): from
// MANILA_SETUP_CLUSTERAPI (make test exports it), else built or found in the cache now.
func Dir() (string, error) {
	if dir := os.Getenv("MANILA_SETUP_CLUSTERAPI"); dir != "" {
		return dir, nil
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/manila-setup/manila-setup").Output()
	if err != nil {
		return "", fmt.Errorf("locating the repository (go list -m) to run test/env/clusterapi/build.sh: %w", err)
	}
	cmd := exec.Command("bash", filepath.Join(strings.TrimSpace(string(root)), "test", "env", "clusterapi", "build.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("test/env/clusterapi/build.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Start installs the CRDs into the sim cluster, makes the Cluster, its OpenStackCluster, the
// Secrets and the image, and starts the controllers and the Node registration for the rest of
// the test; at its end every MachineDeployment and MachineSet of the namespace is deleted and
// the test waits (2 minutes at most) for the controllers to delete their servers and ports.
func Start(t *testing.T, sim *testenv.SimCluster, cloud *testenv.Cloud) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if err := installCRDs(sim, filepath.Join(dir, "crds")); err != nil {
		t.Fatal(err)
	}
	e := &Env{
		Namespace: "capi-" + testenv.NameSuffix(), Prefix: "capi-" + testenv.NameSuffix(),
		MachineNetwork: cloud.Seed.Networks["tenant"],
		Dyn:            dynamic.NewForConfigOrDie(sim.Config), Kube: sim.Client,
	}
	if e.MachineNetwork == "" {
		t.Fatalf("the loopback cloud's seed has no tenant network: %v", cloud.Seed.Networks)
	}
	// The smallest seeded flavor: Nova's fake driver boots any.
	if e.Flavor = "m1.small"; cloud.Seed.Flavors[e.Flavor] == "" {
		t.Fatalf("the loopback cloud's seed has no flavor %s: %v", e.Flavor, cloud.Seed.Flavors)
	}
	if e.cloud, err = connect(ctx); err != nil {
		t.Fatal(err)
	}
	e.ImageID, err = testenv.UploadImage(ctx, e.cloud.image, e.Prefix+"-image", 1<<20)
	if e.ImageID != "" {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := e.cloud.deleteImage(ctx, e.ImageID); err != nil {
				t.Errorf("deleting image %s: %v", e.ImageID, err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := e.makeCluster(ctx, sim, cloud); err != nil {
		t.Fatal(err)
	}
	if err := e.startControllers(t, dir, sim.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	e.bootNodesUntilDone(t, sim)
	t.Cleanup(func() { e.deleteMachines(t) })
	return e
}

// installCRDs installs the CRDs build.sh copied, with the label that tells Cluster API which
// versions of a provider's CRD follow its v1beta1 contract: CAPO's kustomization adds it
// (sigs.k8s.io/cluster-api-provider-openstack config/crd/kustomization.yaml, commonLabels), the
// bare CRD files lack it, and without it the Machine controller refuses the references to
// OpenStackMachines and OpenStackMachineTemplates.
func installCRDs(sim *testenv.SimCluster, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRD in %s (%v): run test/env/clusterapi/build.sh", dir, err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := sigsyaml.Unmarshal(b, crd); err != nil {
			return fmt.Errorf("CRD file %s: %w", f, err)
		}
		if crd.Spec.Group == OpenStackMachineGVR.Group {
			if crd.Labels == nil {
				crd.Labels = map[string]string{}
			}
			crd.Labels["cluster.x-k8s.io/v1beta1"] = "v1alpha7_v1beta1"
		}
		crds = append(crds, crd)
	}
	if _, err := envtest.InstallCRDs(sim.Config, envtest.CRDInstallOptions{CRDs: crds, MaxTime: 2 * time.Minute}); err != nil {
		return fmt.Errorf("installing the Cluster API and CAPO CRDs of %s: %w", dir, err)
	}
	return nil
}

// Name is a name for a MachineDeployment or MachineSet of this Env: Prefix-suffix.
func (e *Env) Name(suffix string) string { return e.Prefix + "-" + suffix }

// BootstrapSecret is the Secret every Machine's spec.bootstrap.dataSecretName names: the user
// data a bootstrap provider would write (there is none here).
func (e *Env) BootstrapSecret() string { return ClusterName + "-bootstrap" }

func (e *Env) create(ctx context.Context, gvr schema.GroupVersionResource, doc map[string]any) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: doc}
	u.SetNamespace(e.Namespace)
	got, err := e.Dyn.Resource(gvr).Namespace(e.Namespace).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating %s %s/%s: %w", u.GetKind(), e.Namespace, u.GetName(), err)
	}
	return got, nil
}

// setStatus writes status into the object's status subresource.
func (e *Env) setStatus(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, status map[string]any) error {
	u.Object["status"] = status
	if _, err := e.Dyn.Resource(gvr).Namespace(e.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("writing the status of %s %s/%s: %w", u.GetKind(), e.Namespace, u.GetName(), err)
	}
	return nil
}

func (e *Env) makeCluster(ctx context.Context, sim *testenv.SimCluster, cloud *testenv.Cloud) error {
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", e.Namespace, err)
	}
	clouds, err := os.ReadFile(cloud.CloudsFile)
	if err != nil {
		return fmt.Errorf("reading the loopback cloud's clouds.yaml: %w", err)
	}
	kubeconfig, err := os.ReadFile(sim.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the sim cluster's kubeconfig: %w", err)
	}
	clusterLabel := map[string]string{"cluster.x-k8s.io/cluster-name": ClusterName}
	for _, s := range []*corev1.Secret{
		// CAPO's identityRef: a clouds.yaml under the key clouds.yaml.
		{ObjectMeta: metav1.ObjectMeta{Name: ClusterName + "-cloud-config"}, Data: map[string][]byte{"clouds.yaml": clouds}},
		// How Cluster API reaches the workload cluster (here the same apiserver): the key value,
		// the type and label Cluster API gives the Secrets it writes.
		{ObjectMeta: metav1.ObjectMeta{Name: ClusterName + "-kubeconfig", Labels: clusterLabel}, Type: "cluster.x-k8s.io/secret", Data: map[string][]byte{"value": kubeconfig}},
		{ObjectMeta: metav1.ObjectMeta{Name: e.BootstrapSecret(), Labels: clusterLabel}, Type: "cluster.x-k8s.io/secret",
			Data: map[string][]byte{"value": []byte("#cloud-config\n"), "format": []byte("cloud-config")}},
	} {
		if _, err := e.Kube.CoreV1().Secrets(e.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", e.Namespace, s.Name, err)
		}
	}
	api, err := url.Parse(sim.Config.Host)
	if err != nil {
		return fmt.Errorf("the sim cluster's apiserver address %q: %w", sim.Config.Host, err)
	}
	port, _ := strconv.ParseInt(api.Port(), 10, 64)
	endpoint := map[string]any{"host": api.Hostname(), "port": port}

	network, err := e.cloud.networkStatus(ctx, e.MachineNetwork)
	if err != nil {
		return err
	}
	osc, err := e.create(ctx, OpenStackClusterGVR, map[string]any{
		"apiVersion": OpenStackClusterGVR.GroupVersion().String(), "kind": "OpenStackCluster",
		"metadata": map[string]any{"name": ClusterName, "labels": map[string]any{"cluster.x-k8s.io/cluster-name": ClusterName}},
		"spec": map[string]any{
			"identityRef":                map[string]any{"name": ClusterName + "-cloud-config", "cloudName": testenv.CloudDemo},
			"network":                    map[string]any{"id": e.MachineNetwork},
			"disableAPIServerFloatingIP": true,
			"disableExternalNetwork":     true,
			"controlPlaneEndpoint":       endpoint,
		},
	})
	if err != nil {
		return err
	}
	// As CAPO's OpenStackCluster controller reports a cluster on a pre-made network.
	if err := e.setStatus(ctx, OpenStackClusterGVR, osc, map[string]any{"ready": true, "network": network}); err != nil {
		return err
	}
	cluster, err := e.create(ctx, ClusterGVR, map[string]any{
		"apiVersion": ClusterGVR.GroupVersion().String(), "kind": "Cluster",
		"metadata": map[string]any{"name": ClusterName},
		"spec": map[string]any{
			"controlPlaneEndpoint": endpoint,
			"infrastructureRef": map[string]any{"apiVersion": OpenStackClusterGVR.GroupVersion().String(), "kind": "OpenStackCluster",
				"name": ClusterName, "namespace": e.Namespace},
		},
	})
	if err != nil {
		return err
	}
	// As Cluster API's Cluster controller reports a provisioned cluster whose control plane is up
	// (the Machine controller looks for a Node only then, and the ClusterCache connects only to a
	// cluster whose infrastructure is ready).
	now := time.Now().UTC().Format(time.RFC3339)
	var conditions []any
	for _, c := range []string{"Ready", "ControlPlaneInitialized", "ControlPlaneReady", "InfrastructureReady"} {
		conditions = append(conditions, map[string]any{"type": c, "status": "True", "lastTransitionTime": now})
	}
	return e.setStatus(ctx, ClusterGVR, cluster, map[string]any{
		"phase": "Provisioned", "infrastructureReady": true, "controlPlaneReady": true, "conditions": conditions,
		"observedGeneration": cluster.GetGeneration(),
	})
}

// startControllers runs capi-controllers on the namespace, its log in the test's temporary
// folder (its end is printed when the test fails); it is stopped (SIGTERM, then killed after
// 10 s) at the end.
func (e *Env) startControllers(t *testing.T, dir, kubeconfig string) error {
	proc, err := testenv.StartProcess(t.TempDir(), "capi-controllers", filepath.Join(dir, "capi-controllers"), nil,
		"--kubeconfig="+kubeconfig, "--namespace="+e.Namespace)
	if err != nil {
		return err
	}
	e.proc = proc
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("end of the capi-controllers log (%s):\n%s", proc.Log(), e.LogTail(80))
		}
		proc.Stop()
	})
	return nil
}

func (e *Env) exited() bool { return e.proc.Exited() }

// LogTail is the last lines of the controllers' log.
func (e *Env) LogTail(lines int) string { return e.proc.Tail(lines) }

// Alive fails when the controllers exited or the Node registration keeps failing.
func (e *Env) Alive() error {
	if e.exited() {
		return fmt.Errorf("capi-controllers exited:\n%s", e.LogTail(40))
	}
	if err := e.booter.Stuck(); err != nil {
		return fmt.Errorf("registering the Nodes of the servers: %w", err)
	}
	return nil
}

// bootNodesUntilDone registers the Node of each ACTIVE server of the Env every 500 ms until the
// test ends, as its kubelet would (test/testenv/nodeboot, as for the Machine API's servers).
func (e *Env) bootNodesUntilDone(t *testing.T, sim *testenv.SimCluster) {
	e.booter = &nodeboot.Booter{Servers: e.servers, Compute: e.cloud.compute, Network: e.cloud.network,
		Nodes: sim, Kube: e.Kube, MachineNetwork: e.MachineNetwork}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		e.booter.Run(ctx, nodeboot.Interval)
	}()
	t.Cleanup(func() { cancel(); <-stopped })
}

// servers are the Env's servers, by their names: a Cluster API Machine learns its server's ID
// only after the server is ACTIVE.
func (e *Env) servers(ctx context.Context) ([]nodeboot.Server, error) {
	all, err := e.cloud.serversNamed(ctx, e.Prefix)
	if err != nil {
		return nil, err
	}
	out := make([]nodeboot.Server, 0, len(all))
	for _, s := range all {
		out = append(out, nodeboot.Server{ID: s.ID})
	}
	return out, nil
}

// deleteMachines deletes every MachineDeployment and MachineSet of the namespace and waits until
// the controllers deleted the servers (so the cloud is left as found); what is left after 2
// minutes is reported and deleted here.
func (e *Env) deleteMachines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, gvr := range []schema.GroupVersionResource{MachineDeploymentGVR, MachineSetGVR} {
		if err := e.Dyn.Resource(gvr).Namespace(e.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting the %s of %s: %v", gvr.Resource, e.Namespace, err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		left, err := e.cloud.serversNamed(ctx, e.Prefix)
		if err == nil && len(left) == 0 {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil || e.exited() {
			var names []string
			for _, s := range left {
				names = append(names, s.Name)
				_ = e.cloud.deleteServer(ctx, s.ID)
			}
			t.Errorf("servers left 2 minutes after their MachineDeployments and MachineSets were deleted (deleted now): %v (%v)\n%s", names, err, e.LogTail(40))
			return
		}
		time.Sleep(time.Second)
	}
}

// Machine is a Cluster API Machine as the tests see it.
type Machine struct {
	Name, Phase, NodeName string
	// ServerID is the Nova server of its providerID.
	ServerID string
	// Template is the OpenStackMachineTemplate its OpenStackMachine was cloned from.
	Template string
	Deleting bool
}

// Machines lists the Machines matching a label selector, with the template of each.
func (e *Env) Machines(ctx context.Context, selector string) ([]Machine, error) {
	list, err := e.Dyn.Resource(MachineGVR).Namespace(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing the Machines of %s (%s): %w", e.Namespace, selector, err)
	}
	var out []Machine
	for _, m := range list.Items {
		got := Machine{Name: m.GetName(), Deleting: m.GetDeletionTimestamp() != nil}
		got.Phase, _, _ = unstructured.NestedString(m.Object, "status", "phase")
		got.NodeName, _, _ = unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		providerID, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		got.ServerID = strings.TrimPrefix(providerID, ProviderIDPrefix)
		infra, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
		if o, err := e.Dyn.Resource(OpenStackMachineGVR).Namespace(e.Namespace).Get(ctx, infra, metav1.GetOptions{}); err == nil {
			got.Template = o.GetAnnotations()["cluster.x-k8s.io/cloned-from-name"]
		}
		out = append(out, got)
	}
	return out, nil
}

// WaitMachines waits until exactly n Machines match the selector, none being deleted, each
// Running with a Node and made from a template for which fromTemplate says yes (nil: any), and
// returns them.
func (e *Env) WaitMachines(t *testing.T, selector string, n int, fromTemplate func(string) bool, timeout time.Duration) []Machine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last []Machine
	var lastErr error
	for {
		if err := e.Alive(); err != nil {
			t.Fatal(err)
		}
		last, lastErr = e.Machines(ctx, selector)
		if lastErr == nil && len(last) == n && allReady(last, fromTemplate) {
			return last
		}
		select {
		case <-ctx.Done():
			b, _ := json.Marshal(last)
			t.Fatalf("after %s, not %d Machines Running with Nodes for %s: %s (%v)\nNodes: %s (last registration round: %v)\n%s",
				timeout, n, selector, b, lastErr, e.nodesByProviderID(), e.booter.Err(), e.LogTail(60))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// nodesByProviderID lists the cluster's Nodes as name=providerID, for a failure message: whether
// a Machine stuck in Provisioned has a Node its controller did not link, or none at all.
func (e *Env) nodesByProviderID() string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := e.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, n := range nodes.Items {
		out = append(out, n.Name+"="+n.Spec.ProviderID)
	}
	return strings.Join(out, " ")
}

func allReady(ms []Machine, fromTemplate func(string) bool) bool {
	for _, m := range ms {
		if m.Deleting || m.Phase != "Running" || m.NodeName == "" || m.ServerID == "" || (fromTemplate != nil && !fromTemplate(m.Template)) {
			return false
		}
	}
	return true
}
