//go:build integration

package controllers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/attach/record"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// forwardProxy is an HTTP forward proxy that serves one made-up host name by passing its
// requests to a real server: a request for that name can only have come through the proxy.
type forwardProxy struct {
	*httptest.Server
	host string
	seen atomic.Int64
}

func newForwardProxy(t *testing.T, host, target string) *forwardProxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &forwardProxy{host: host}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = u.Scheme, u.Host, u.Host
	}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Hostname() != host {
			http.Error(w, "this proxy serves "+host+" only", http.StatusBadGateway)
			return
		}
		p.seen.Add(1)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// podTemplates returns the pod templates of the three driver workloads, nil where missing.
func podTemplates(ctx context.Context, h *harness) map[string]*corev1.PodTemplateSpec {
	out := map[string]*corev1.PodTemplateSpec{}
	if d, err := h.kube.AppsV1().Deployments(testNS).Get(ctx, workloadControllerService.name, metav1.GetOptions{}); err == nil {
		out[d.Name] = &d.Spec.Template
	}
	for _, k := range []workloadKind{workloadNodeService, workloadNFSNodeService} {
		if ds, err := h.kube.AppsV1().DaemonSets(testNS).Get(ctx, k.name, metav1.GetOptions{}); err == nil {
			out[ds.Name] = &ds.Spec.Template
		}
	}
	return out
}

func envOf(c corev1.Container) map[string]string {
	m := map[string]string{}
	for _, e := range c.Env {
		m[e.Name] = e.Value
	}
	return m
}

// verbosities returns every --v=N of every container of the templates, by container.
func verbosities(tpls map[string]*corev1.PodTemplateSpec) map[string]string {
	out := map[string]string{}
	for name, t := range tpls {
		for _, c := range t.Spec.Containers {
			for _, a := range c.Args {
				if v, ok := strings.CutPrefix(a, "--v="); ok {
					out[name+"/"+c.Name] = v
				}
			}
		}
	}
	return out
}

// TestOperatorClusterSettings checks, on a real apiserver with the operator running as its
// ServiceAccount (RBAC exactly as rendered), what the cluster's settings do to the operands:
// a ServiceMonitor when its CRD exists, the operator's own metrics over HTTPS for Prometheus
// (with its ServiceMonitor and PrometheusRule), a VolumeSnapshotClass only once the snapshot CRD
// exists, the cluster Proxy for the operator's own OpenStack requests and in every operand
// container, the trusted CA bundle restarting exactly the pods that mount it, SingleReplica
// topology giving one controller replica, and logLevel reaching every container's --v.
func TestOperatorClusterSettings(t *testing.T) {
	cloud := testenv.NewCloud(t)
	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := &harness{t: t, ctx: ctx, kube: api.Client, dyn: dynamic.NewForConfigOrDie(api.Config), logs: &testenv.SyncBuffer{}}

	// The Prometheus Operator's CRDs are there from the start; the snapshot CRD comes later.
	for _, f := range []string{"testdata/crds/servicemonitors.yaml", "testdata/crds/prometheusrules.yaml"} {
		crd, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := deploy.Install(ctx, api.Config, crd, testNS, deploy.InstallOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A single-node control plane behind a proxy. Keystone is reachable only through the proxy,
	// under a name nothing else resolves.
	keystone, err := url.Parse(cloud.Seed.KeystoneURL)
	if err != nil {
		t.Fatal(err)
	}
	const fakeHost = "keystone.manila-setup.test"
	fwd := newForwardProxy(t, fakeHost, keystone.Scheme+"://"+keystone.Host)
	cfgc := configclient.NewForConfigOrDie(api.Config)
	infra, err := cfgc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "sno-xyz", ControlPlaneTopology: configv1.SingleReplicaTopologyMode,
		InfrastructureTopology: configv1.SingleReplicaTopologyMode, PlatformStatus: &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType}}
	if _, err := cfgc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	px, err := cfgc.ConfigV1().Proxies().Create(ctx, &configv1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: configv1.ProxySpec{HTTPProxy: fwd.URL, HTTPSProxy: fwd.URL, NoProxy: ".cluster.local"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	px.Status = configv1.ProxyStatus{HTTPProxy: fwd.URL, HTTPSProxy: fwd.URL, NoProxy: ".cluster.local,.svc,127.0.0.1,localhost"}
	if _, err := cfgc.ConfigV1().Proxies().UpdateStatus(ctx, px, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	rendered, err := operator.Render(operator.RenderOptions{Namespace: testNS, OperatorImage: "example.test/op:1", Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	creds := cloudsYAMLFor(t, cloud, testenv.CloudDemo, "http://"+net2host(fakeHost, keystone.Port()))
	if _, err := deploy.Install(ctx, api.Config, rendered, testNS, deploy.InstallOptions{Credentials: map[string][]byte{operator.CredentialsKey: creds}}); err != nil {
		t.Fatal(err)
	}
	saCfg, err := api.UserConfig("system:serviceaccount:"+testNS+":"+operator.OperatorName, "system:serviceaccounts", "system:serviceaccounts:"+testNS, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	// What else lives in a shared namespace: other operators' Secrets and CA bundles (never to
	// be cached), and a driver Secret and CA ConfigMap of the operator's names made by someone
	// else, without its label (to be taken over).
	for _, obj := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "other-driver-token", Namespace: testNS}, Data: map[string][]byte{"token": []byte("x")}},
		{ObjectMeta: metav1.ObjectMeta{Name: operator.DriverSecretName, Namespace: testNS}, Data: map[string][]byte{"os-authURL": []byte("http://stale.example.test/v3")}},
	} {
		if _, err := api.Client.CoreV1().Secrets(testNS).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"other-trusted-ca-bundle", trustedCAConfigMap} {
		if _, err := api.Client.CoreV1().ConfigMaps(testNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(h.logs)
	defer klog.SetOutput(os.Stderr)
	h.resync = 2 * time.Second
	op, err := New(saCfg, nil, Config{Namespace: testNS, Images: testImages, Resync: h.resync, MachineNetworks: []string{"10.0.0.0/16"}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h.op = op
	opCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	OpenStackCalls.Discoveries.Store(0) // this operator's, not those of a test before
	h.started = time.Now()
	go func() { defer close(done); _ = op.Run(opCtx) }()
	defer func() { stop(); <-done }()

	h.eventually("operands created", settle, h.operandsExist)
	h.eventually("Manila found through the proxy", settle, h.condIs(operator.ConditionDisabled, operatorv1.ConditionFalse, "ManilaAvailable"))
	h.eventually("static resources applied", settle, h.condIs(staticName+"Available", operatorv1.ConditionTrue, ""))

	t.Run("only the operator's own objects are cached; unlabelled namesakes are taken over", func(t *testing.T) {
		secrets, _ := op.listers.Secrets.List(machinery.Everything)
		creds, _ := op.listers.Credentials.List(machinery.Everything)
		cms, _ := op.listers.ConfigMaps.List(machinery.Everything)
		var names []string
		for _, o := range secrets {
			names = append(names, "secret/"+o.Name)
		}
		for _, o := range creds {
			names = append(names, "secret/"+o.Name)
		}
		for _, o := range cms {
			names = append(names, "configmap/"+o.Name)
		}
		sort.Strings(names)
		got := strings.Join(names, " ")
		want := "configmap/manila-csi-driver-runtime-config configmap/" + trustedCAConfigMap + " secret/" + operator.DriverSecretName + " secret/" + operator.CredentialsSecretName
		if got != want {
			t.Errorf("cached %q, want %q", got, want)
		}
		s, err := h.kube.CoreV1().Secrets(testNS).Get(ctx, operator.DriverSecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Labels[operator.LabelManagedBy] != operator.ManagedByValue || !strings.Contains(string(s.Data["os-authURL"]), fakeHost) {
			t.Errorf("driver Secret not taken over: labels %v, os-authURL %q", s.Labels, s.Data["os-authURL"])
		}
	})

	t.Run("the operator's OpenStack requests go through the cluster proxy", func(t *testing.T) {
		if n := fwd.seen.Load(); n == 0 {
			t.Errorf("no request reached Keystone at %s through the cluster proxy", fakeHost)
		}
	})

	t.Run("every operand container gets the cluster proxy", func(t *testing.T) {
		tpls := podTemplates(ctx, h)
		if len(tpls) != 3 {
			t.Fatalf("%d workloads", len(tpls))
		}
		for name, tpl := range tpls {
			for _, c := range tpl.Spec.Containers {
				env := envOf(c)
				if env["HTTP_PROXY"] != fwd.URL || env["HTTPS_PROXY"] != fwd.URL || env["NO_PROXY"] != px.Status.NoProxy {
					t.Errorf("%s/%s: proxy env %q %q %q", name, c.Name, env["HTTP_PROXY"], env["HTTPS_PROXY"], env["NO_PROXY"])
				}
			}
		}
	})

	t.Run("SingleReplica control plane: one controller replica", func(t *testing.T) {
		d, err := h.kube.AppsV1().Deployments(testNS).Get(ctx, workloadControllerService.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("controller replicas %v, want 1", d.Spec.Replicas)
		}
		if got := argValue(d.Spec.Template.Spec.Containers, "--cluster-id="); got != "sno-xyz" {
			t.Errorf("cluster id %q, want the Infrastructure's name", got)
		}
	})

	t.Run("ServiceMonitor applied when its CRD exists", func(t *testing.T) {
		h.eventually("ServiceMonitor", settle, func() (bool, string) {
			sm, err := h.dyn.Resource(machinery.ServiceMonitorGVR).Namespace(testNS).Get(ctx, "manila-csi-driver-controller-monitor", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			eps, _, _ := unstructuredSlice(sm.Object, "spec", "endpoints")
			return eps == 3, fmt.Sprintf("%d endpoints", eps)
		})
	})

	t.Run("the operator's metrics, for Prometheus", func(t *testing.T) { checkOperatorMetrics(t, h, saCfg) })
	t.Run("a volume whose share's access rules failed is counted and named", func(t *testing.T) { checkAccessRulesMetric(t, h, cloud) })

	t.Run("VolumeSnapshotClass only once the snapshot CRD exists, naming the classes that can snapshot", func(t *testing.T) {
		h.waitSyncs(2, manilaName) // a whole sync without the CRD
		h.noDegraded()
		vscCRD, err := os.ReadFile("testdata/crds/volumesnapshotclasses.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := deploy.Install(ctx, api.Config, vscCRD, testNS, deploy.InstallOptions{}); err != nil {
			t.Fatal(err)
		}
		took := h.eventually("VolumeSnapshotClass", settle, func() (bool, string) {
			v, err := h.dyn.Resource(machinery.SnapshotClassGVR).Get(ctx, "csi-manila-standard", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			// The loopback share type default has snapshot_support and
			// create_share_from_snapshot_support, cephfs-fast neither.
			which := v.GetAnnotations()[operator.AnnotationSnapshotStorageClasses]
			return v.Object["driver"] == operator.DriverName && which == "csi-manila-default", fmt.Sprintf("driver %v, %s %q", v.Object["driver"], operator.AnnotationSnapshotStorageClasses, which)
		})
		t.Logf("VolumeSnapshotClass created %.1fs after its CRD", took.Seconds())
		for class, want := range map[string]string{"csi-manila-default": operator.SnapshotsSupported, "csi-manila-cephfs-fast": `not supported: share type "cephfs-fast" lacks snapshot_support=True and create_share_from_snapshot_support=True;`} {
			sc, err := h.kube.StorageV1().StorageClasses().Get(ctx, class, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := sc.Annotations[operator.AnnotationSnapshots]; !strings.HasPrefix(got, want) {
				t.Errorf("StorageClass %s: %s %q, want it to start %q", class, operator.AnnotationSnapshots, got, want)
			}
		}
	})

	t.Run("a new trusted CA bundle restarts the pods that mount it, and only those", func(t *testing.T) {
		before := podTemplates(ctx, h)
		for name, tpl := range before {
			if name == workloadNFSNodeService.name {
				continue
			}
			if !mountsConfigMap(&tpl.Spec, trustedCAConfigMap) {
				t.Errorf("%s does not mount ConfigMap %s", name, trustedCAConfigMap)
			}
		}
		cm, err := h.kube.CoreV1().ConfigMaps(testNS).Get(ctx, trustedCAConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Labels["config.openshift.io/inject-trusted-cabundle"] != "true" {
			t.Errorf("ConfigMap %s is not labelled for injection: %v", trustedCAConfigMap, cm.Labels)
		}
		// What the cluster network operator does.
		cm.Data = map[string]string{trustedCAKey: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}
		if _, err := h.kube.CoreV1().ConfigMaps(testNS).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.eventually("CA hash on the pods that mount the bundle", settle, func() (bool, string) {
			tpls := podTemplates(ctx, h)
			c, n := tpls[workloadControllerService.name], tpls[workloadNodeService.name]
			return c != nil && n != nil && c.Annotations[trustedCAHashAnnot] != "" && n.Annotations[trustedCAHashAnnot] != "",
				fmt.Sprintf("controller %v, node %v", c.Annotations, n.Annotations)
		})
		// The NFS plugin's controller watches the ConfigMap too: it has seen the new bundle.
		h.waitSyncs(2, workloadNFSNodeService.prefix+"Controller")
		nfs, err := h.kube.AppsV1().DaemonSets(testNS).Get(ctx, workloadNFSNodeService.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if nfs.Generation != 1 || nfs.Spec.Template.Annotations[trustedCAHashAnnot] != "" {
			t.Errorf("the NFS node plugin, which does not use the bundle, was rolled out (generation %d)", nfs.Generation)
		}
	})

	t.Run("logLevel reaches every container's --v; operatorLogLevel the operator's", func(t *testing.T) {
		for _, v := range verbosities(podTemplates(ctx, h)) {
			if v != "2" {
				t.Fatalf("logLevel Normal: --v=%s, want 2", v)
			}
		}
		gens := map[string]int64{}
		for _, d := range []string{workloadControllerService.name} {
			dep, _ := h.kube.AppsV1().Deployments(testNS).Get(ctx, d, metav1.GetOptions{})
			gens[d] = dep.Generation
		}
		if _, err := h.dyn.Resource(machinery.ClusterCSIDriverGVR).Patch(ctx, operator.DriverName, types.MergePatchType,
			[]byte(`{"spec":{"logLevel":"Debug","operatorLogLevel":"Debug"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		h.eventually("--v=4 everywhere", settle, func() (bool, string) {
			vs := verbosities(podTemplates(ctx, h))
			if len(vs) < 8 {
				return false, fmt.Sprintf("only %d containers with --v: %v", len(vs), vs)
			}
			for c, v := range vs {
				if v != "4" {
					return false, c + " --v=" + v
				}
			}
			return true, ""
		})
		dep, _ := h.kube.AppsV1().Deployments(testNS).Get(ctx, workloadControllerService.name, metav1.GetOptions{})
		if dep.Generation != gens[dep.Name]+1 {
			t.Errorf("controller generation %d -> %d: want exactly one rollout", gens[dep.Name], dep.Generation)
		}
		h.eventually("operator at verbosity 4", settle, func() (bool, string) {
			return bool(klog.V(4).Enabled()), "klog -v below 4"
		})
		h.noDegraded()
	})

	t.Run("StorageNetworkReachable from discovery and the MachineSets", func(t *testing.T) {
		h.t = t
		testStorageNetworkFromDiscovery(t, h, cloud)
	})

	// Last: the driver removed on purpose takes its monitoring along, so that no ServiceMonitor
	// is left without its Service (ManilaOperatorDown would fire for nothing).
	t.Run("Removed deletes the ServiceMonitors, the PrometheusRule and the metrics Services", func(t *testing.T) {
		h.t = t
		h.setManagementState(operatorv1.Removed)
		h.eventually("monitoring deleted", settle, func() (bool, string) {
			for _, o := range []struct {
				gvr  schema.GroupVersionResource
				name string
			}{
				{machinery.ServiceMonitorGVR, "manila-csi-driver-controller-monitor"},
				{machinery.ServiceMonitorGVR, "manila-csi-driver-operator-monitor"},
				{machinery.PrometheusRuleGVR, "manila-csi-driver-operator"},
				{corev1.SchemeGroupVersion.WithResource("services"), OperatorMetricsService},
				{corev1.SchemeGroupVersion.WithResource("services"), metricsServiceName},
			} {
				if _, err := h.dyn.Resource(o.gvr).Namespace(testNS).Get(ctx, o.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return false, fmt.Sprintf("%s %s: %v", o.gvr.Resource, o.name, err)
				}
			}
			return true, ""
		})
	})
}

// testStorageNetworkFromDiscovery: without --storage-network, discovery on the loopback cloud finds the
// storage network from where its share is exported, and the condition checks the MachineSets
// against it, naming the fix.
func testStorageNetworkFromDiscovery(t *testing.T, h *harness, cloud *testenv.Cloud) {
	ctx := h.ctx
	storage := cloud.Seed.Networks["storage"]
	if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinery.MachineAPINamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ms := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
		"metadata": map[string]any{"name": "sim-worker-a", "namespace": machinery.MachineAPINamespace},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"set": "a"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"set": "a"}},
				"spec": map[string]any{"providerSpec": map[string]any{"value": map[string]any{
					"networks": []any{map[string]any{"uuid": cloud.Seed.Networks["tenant"]}},
				}}},
			},
		},
	}}
	created, err := h.dyn.Resource(machinery.MachineSetGVR).Namespace(machinery.MachineAPINamespace).Create(ctx, ms, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// One Machine of the set, running (its Node joined), with its address on the machine
	// network (10.0.0.0/16 here, the installer's default, which holds the storage subnet
	// 10.0.0.0/24). It was made before the set was attached: its own spec has no storage port.
	machine := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
		"metadata": map[string]any{"name": "sim-worker-a-x1", "namespace": machinery.MachineAPINamespace, "labels": map[string]any{"set": "a"},
			"ownerReferences": []any{map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet", "name": "sim-worker-a",
				"uid": string(created.GetUID()), "controller": true}}},
		"spec": map[string]any{},
	}}
	machineAt := func(addrs ...string) {
		t.Helper()
		m, err := h.dyn.Resource(machinery.MachineGVR).Namespace(machinery.MachineAPINamespace).Get(ctx, machine.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			m, err = h.dyn.Resource(machinery.MachineGVR).Namespace(machinery.MachineAPINamespace).Create(ctx, machine, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		var list []any
		for _, a := range addrs {
			list = append(list, map[string]any{"type": "InternalIP", "address": a})
		}
		_ = unstructured.SetNestedSlice(m.Object, list, "status", "addresses")
		_ = unstructured.SetNestedMap(m.Object, map[string]any{"kind": "Node", "name": machine.GetName()}, "status", "nodeRef")
		if _, err := h.dyn.Resource(machinery.MachineGVR).Namespace(machinery.MachineAPINamespace).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	machineAt("10.0.5.11")
	// The classes' nfs-shareClient follows where the workers mount from.
	classesAdmit := func(what, want string) {
		t.Helper()
		h.eventually("every StorageClass admits "+want+" ("+what+")", settle, func() (bool, string) {
			list, err := h.kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: operator.LabelManagedBy + "=" + operator.ManagedByValue})
			if err != nil || len(list.Items) == 0 {
				return false, fmt.Sprintf("%v, %d classes", err, len(list.Items))
			}
			var got []string
			for _, sc := range list.Items {
				got = append(got, sc.Name+"="+sc.Parameters["nfs-shareClient"])
				if sc.Parameters["nfs-shareClient"] != want {
					return false, strings.Join(got, " ")
				}
			}
			return true, ""
		})
	}
	classesAdmit("before the attach: the machine network", "10.0.0.0/16")
	h.eventually("StorageNetworkReachable=False from discovery", settle, h.condIs(operator.ConditionStorageNetworkReachable, operatorv1.ConditionFalse, "MachineSetsNotAttached"))
	c := h.condition(operator.ConditionStorageNetworkReachable)
	for _, want := range []string{"sim-worker-a", storage, "discovery", "manila-setup networks attach"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message lacks %q: %s", want, c.Message)
		}
	}
	// What `manila-setup machinesets patch` does when it attaches the set: a port on the
	// storage network in the providerSpec, and its record. Only the providerSpec counts.
	recorded := fmt.Sprintf(`{"networks":[%q],"time":"2026-11-22T08:00:00Z","by":"manila-setup test"}`, storage)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"template":{"spec":{"providerSpec":{"value":{"ports":[{"networkID":%q}]}}}}}}`,
		record.Annotation, recorded, strings.ToUpper(storage))
	if _, err := h.dyn.Resource(machinery.MachineSetGVR).Namespace(machinery.MachineAPINamespace).Patch(ctx, "sim-worker-a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("StorageNetworkReachable=True once attached", settle, h.condIs(operator.ConditionStorageNetworkReachable, operatorv1.ConditionTrue, "AsExpected"))
	// Half-way: the set gives new machines the storage port, its running Machine has none yet,
	// so the workers mount from both networks; here the machine network holds the storage
	// subnet, so one rule covers both.
	classesAdmit("half-way", "10.0.0.0/16")
	h.eventually("StorageNetworkReachable says both networks", settle, func() (bool, string) {
		c := h.condition(operator.ConditionStorageNetworkReachable)
		return c != nil && c.Status == operatorv1.ConditionTrue && strings.Contains(c.Message, "the StorageClasses admit 10.0.0.0/16 to their shares: the workers mount from two networks"), fmt.Sprint(c)
	})
	// The rollout replaced the Machine: its server has a port on the storage subnet. The
	// classes are recreated under the same names for the storage subnet alone.
	machineAt("10.0.5.11", "10.0.0.31")
	classesAdmit("after the rollout: the storage subnet", "10.0.0.0/24")
	h.eventually("StorageNetworkReachable says the storage subnet", settle, func() (bool, string) {
		c := h.condition(operator.ConditionStorageNetworkReachable)
		return c != nil && c.Status == operatorv1.ConditionTrue && strings.Contains(c.Message, "the StorageClasses admit 10.0.0.0/24 to their shares: every worker has a port on the storage network"), fmt.Sprint(c)
	})

	// The driver's runtime configuration names the subnet the shares are exported in, so that
	// mounts use the export location the attached nodes can reach.
	var want string
	for _, sn := range cloud.Seed.Subnets {
		for _, sh := range cloud.Seed.Shares {
			for _, loc := range sh.ExportLocations {
				host, _, _ := strings.Cut(loc, ":/")
				if p, err := netip.ParsePrefix(sn.CIDR); err == nil && p.Contains(netip.MustParseAddr(host)) {
					want = p.Masked().String()
				}
			}
		}
	}
	h.eventually("runtime config with the export subnet "+want, settle, func() (bool, string) {
		cm, err := h.kube.CoreV1().ConfigMaps(testNS).Get(ctx, "manila-csi-driver-runtime-config", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := cm.Data["runtimeconfig.json"]
		return want != "" && got == `{"nfs":{"matchExportLocationAddress":"`+want+`"}}`, got
	})
	t.Logf("%s: %s", operator.ConditionStorageNetworkReachable, h.condition(operator.ConditionStorageNetworkReachable).Message)
	// Discovery runs once for new credentials and then every discoveryEvery resyncs: how many
	// ran depends on how long the test took to get here, which the load of the machine decides.
	elapsed := time.Since(h.started)
	if n, most := OpenStackCalls.Discoveries.Load(), 3+int64(elapsed/(discoveryEvery*h.resync)); n == 0 || n > most {
		t.Errorf("%d discoveries in %s, want 1 (new credentials) or a few, at most %d (one every %d resyncs of %s)", n, elapsed.Round(time.Second), most, discoveryEvery, h.resync)
	}
}

func net2host(host, port string) string {
	if port == "" {
		return host
	}
	return host + ":" + port
}

func argValue(cs []corev1.Container, prefix string) string {
	for _, c := range cs {
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, prefix); ok {
				return v
			}
		}
	}
	return ""
}

func unstructuredSlice(obj map[string]any, fields ...string) (int, bool, error) {
	var cur any = obj
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[f]
	}
	s, ok := cur.([]any)
	return len(s), ok, nil
}
