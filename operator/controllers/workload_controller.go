package controllers

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/tlsprofile"
)

// workloadKind is one of the driver's three workloads.
type workloadKind struct {
	prefix    string // condition prefix and controller name
	asset     string
	kind      *machinery.Kind // the Deployment or DaemonSet row of machinery.Kinds
	name      string
	sa        string
	needsCred bool // waits for csi-manila-secrets
}

var (
	workloadControllerService = workloadKind{"ManilaDriverControllerService", "controller.yaml", machinery.KindFor(appsv1.SchemeGroupVersion.WithKind("Deployment")), operator.ControllerDeploymentName, "manila-csi-driver-controller-sa", true}
	workloadNodeService       = workloadKind{"ManilaDriverNodeService", "node.yaml", machinery.KindFor(appsv1.SchemeGroupVersion.WithKind("DaemonSet")), operator.NodeDaemonSetName, "manila-csi-driver-node-sa", false}
	workloadNFSNodeService    = workloadKind{"NFSDriverNodeService", "node_nfs.yaml", machinery.KindFor(appsv1.SchemeGroupVersion.WithKind("DaemonSet")), operator.NFSNodeDaemonSetName, "manila-csi-driver-node-sa", false}
)

// workloadController keeps one Deployment or DaemonSet as the assets say, adjusted to the
// cluster (replicas and placement, proxy, CA bundle, log level), and reports whether it runs.
type workloadController struct {
	operands
	workloadInputs
	k workloadKind

	// lastGeneration is the generation of the operator's own last write; the status (and the
	// cache) may not show it yet at the next sync.
	lastGeneration int64
}

// workloadInputs is what a workload controller reads besides its operands.
type workloadInputs struct {
	vars            func(*operatorv1.OperatorSpec) map[string]string
	serviceAccounts corelisters.ServiceAccountLister
	configMaps      corelisters.ConfigMapLister
	secrets         corelisters.SecretLister
	nodes           cache.GenericLister
	infrastructure  func() *configv1.Infrastructure
	proxy           func() *configv1.ProxyStatus
	// tlsProfile is the cluster's TLS security profile and tlsReport says what becomes of it,
	// for a workload with kube-rbac-proxy sidecars (the vars render it into their flags); nil
	// for the others.
	tlsProfile func() (tlsprofile.Profile, error)
	tlsReport  *tlsProfileReport
}

// workloadControllerOf is the constructor of the controller of workload k, which watches what
// its pods need, the cluster's topology and proxy, its workload's kind, and for the controller
// Deployment (its kube-rbac-proxy sidecars) the cluster's TLS security profile.
func workloadControllerOf(k workloadKind) newController {
	return func(w wiring) *machinery.Controller {
		c := &workloadController{operands: w.ops, k: k, workloadInputs: workloadInputs{vars: w.vars, serviceAccounts: w.l.ServiceAccounts,
			configMaps: w.l.ConfigMaps, secrets: w.l.Secrets, nodes: w.l.Nodes, infrastructure: w.infrastructure, proxy: proxyOf(w.l.Proxies)}}
		i := w.inf
		informers := []cache.SharedIndexInformer{i.ServiceAccounts, i.ConfigMaps, i.Infrastructures, i.Proxies, k.kind.Informer(i)}
		if k.needsCred {
			informers = append(informers, i.Secrets)
		}
		if k == workloadControllerService {
			informers = append(informers, i.Nodes) // placement on control-plane nodes
			informers = append(informers, i.APIServers)
			c.tlsProfile = w.tlsProfile
			c.tlsReport = &tlsProfileReport{what: "kube-rbac-proxy sidecars of Deployment " + k.name, recorder: w.recorder}
		}
		return w.loop.Controller(k.prefix+"Controller", c.sync, informers...)
	}
}

func (c *workloadController) sync(ctx context.Context, _ *machinery.Controller) error {
	k := c.k
	spec, status := ownObject(c.self).spec()
	if spec == nil || spec.ManagementState == operatorv1.Unmanaged {
		return nil
	}
	if spec.ManagementState == operatorv1.Removed {
		obj := k.kind.NewObject()
		obj.(metav1.Object).SetName(k.name)
		err := c.deleteIfPresent(ctx, obj)
		return firstErr(c.applyStatus(ctx, k.prefix, machinery.RemovedStatus(k.prefix, err)), err)
	}
	if !c.enabled() {
		return nil
	}
	// Wait for what the pods need, so the workload is created once, complete: no rollout
	// caused by its own dependencies appearing later.
	if waiting := c.missingDependency(); waiting != "" {
		return c.applyStatus(ctx, k.prefix, machinery.NewStatus().WithConditions(
			machinery.Condition(k.prefix+"Available", operatorv1.ConditionFalse, "Waiting", waiting),
			machinery.Condition(k.prefix+"Progressing", operatorv1.ConditionTrue, "Waiting", waiting),
			machinery.Condition(k.prefix+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""),
		))
	}
	obj, err := operator.ReadAsset(k.asset, c.vars(spec))
	if err != nil {
		return err
	}
	var generations []operatorv1.GenerationStatus
	if status != nil {
		generations = status.Generations
	}
	last := int64(-1)
	if g := machinery.GenerationFor(generations, "apps", k.kind.Resource, c.namespace, k.name); g != nil {
		last = g.LastGeneration
	}
	last = max(last, c.lastGeneration)
	if d, ok := obj.(*appsv1.Deployment); ok {
		c.placeController(d)
	}
	c.withTLSProfile(k.kind.PodTemplate(obj))
	c.decoratePodSpec(k.kind.PodTemplate(obj))
	// What apply compares the cached generation with (it is never sent).
	obj.(metav1.Object).SetGeneration(last)
	applied, err := c.apply(ctx, obj)
	if err != nil {
		return c.failed(ctx, err)
	}
	gen := applied.(metav1.Object).GetGeneration()
	c.lastGeneration = gen
	st := k.kind.Status(k.prefix, applied)
	st.WithGenerations(operatorv1.GenerationStatus{Group: "apps", Resource: k.kind.Resource, Namespace: c.namespace, Name: k.name,
		LastGeneration: gen})
	return c.applyStatus(ctx, k.prefix, st)
}

func (c *workloadController) failed(ctx context.Context, err error) error {
	msg := fmt.Sprintf("applying %s/%s: %s", c.k.kind.Resource, c.k.name, machinery.APIReason(err))
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		msg = fmt.Sprintf("applying %s/%s: %v", c.k.kind.Resource, c.k.name, err)
	}
	return firstErr(c.applyStatus(ctx, c.k.prefix, machinery.NewStatus().WithConditions(
		machinery.Condition(c.k.prefix+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", msg),
	)), err)
}

// missingDependency names what the workload still waits for, or "".
func (c *workloadController) missingDependency() string {
	ns := c.namespace
	if _, err := c.serviceAccounts.ServiceAccounts(ns).Get(c.k.sa); err != nil {
		return fmt.Sprintf("waiting for ServiceAccount %s/%s", ns, c.k.sa)
	}
	if _, err := c.configMaps.ConfigMaps(ns).Get(trustedCAConfigMap); err != nil {
		return fmt.Sprintf("waiting for ConfigMap %s/%s", ns, trustedCAConfigMap)
	}
	if c.k.needsCred {
		if _, err := c.secrets.Secrets(ns).Get(operator.DriverSecretName); err != nil {
			return fmt.Sprintf("waiting for Secret %s/%s", ns, operator.DriverSecretName)
		}
	}
	return ""
}

// placeController sets replicas and node selector from the cluster's topology: one replica on
// single-node control planes; on dedicated control-plane nodes when the cluster has them.
func (c *workloadController) placeController(d *appsv1.Deployment) {
	replicas := int32(2)
	external := false
	if infra := c.infrastructure(); infra != nil {
		switch infra.Status.ControlPlaneTopology {
		case configv1.SingleReplicaTopologyMode:
			replicas = 1
		case configv1.ExternalTopologyMode:
			external = true
		}
	}
	d.Spec.Replicas = ptr.To(replicas)
	if !external && c.hasControlPlaneNodes() {
		d.Spec.Template.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/master": ""}
	}
}

func (c *workloadController) hasControlPlaneNodes() bool {
	nodes, err := c.nodes.List(machinery.Everything)
	if err != nil {
		return false
	}
	for _, n := range nodes {
		m, ok := n.(metav1.Object)
		if !ok {
			continue
		}
		if _, ok := m.GetLabels()["node-role.kubernetes.io/master"]; ok {
			return true
		}
	}
	return false
}

// decoratePodSpec adds the cluster proxy to every container and a hash of the trusted CA
// bundle to the pod template, so a new bundle restarts the pods (and nothing else does).
func (c *workloadController) decoratePodSpec(t *corev1.PodTemplateSpec) {
	if p := c.proxy(); p != nil {
		var env []corev1.EnvVar
		for _, kv := range [][2]string{{"HTTP_PROXY", p.HTTPProxy}, {"HTTPS_PROXY", p.HTTPSProxy}, {"NO_PROXY", p.NoProxy}} {
			if kv[1] != "" {
				env = append(env, corev1.EnvVar{Name: kv[0], Value: kv[1]})
			}
		}
		for i := range t.Spec.Containers {
			t.Spec.Containers[i].Env = append(t.Spec.Containers[i].Env, env...)
		}
	}
	if !mountsConfigMap(&t.Spec, trustedCAConfigMap) {
		// Pods that do not use the bundle (the NFS node plugin talks to no one) are not
		// restarted when it changes.
		return
	}
	if cm, err := c.configMaps.ConfigMaps(c.namespace).Get(trustedCAConfigMap); err == nil {
		if ca := cm.Data[trustedCAKey]; ca != "" {
			if t.Annotations == nil {
				t.Annotations = map[string]string{}
			}
			t.Annotations[trustedCAHashAnnot] = fmt.Sprintf("%x", sha256.Sum256([]byte(ca)))[:16]
		}
	}
}

// withTLSProfile makes the TLS flags of the kube-rbac-proxy sidecars (the containers whose
// arguments the vars gave a --tls-min-version) exactly the profile's KubeRBACProxyArgs, in
// their place, and says what became of the profile. The vars rendered the minimal version and
// the suites; what they cannot say is no --tls-cipher-suites under TLS 1.3 (Go offers no
// choice of suites there) and --http2-disable for a list HTTP/2 cannot run on.
func (c *workloadController) withTLSProfile(t *corev1.PodTemplateSpec) {
	if c.tlsProfile == nil {
		return
	}
	p, err := c.tlsProfile()
	c.tlsReport.note(p, err)
	for i := range t.Spec.Containers {
		ct := &t.Spec.Containers[i]
		at := slices.IndexFunc(ct.Args, func(a string) bool { return strings.HasPrefix(a, "--tls-min-version=") })
		if at < 0 {
			continue
		}
		args := slices.DeleteFunc(slices.Clone(ct.Args), tlsprofile.IsKubeRBACProxyFlag)
		ct.Args = slices.Insert(args, min(at, len(args)), p.KubeRBACProxyArgs()...)
	}
}

func mountsConfigMap(spec *corev1.PodSpec, name string) bool {
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			return true
		}
	}
	return false
}
