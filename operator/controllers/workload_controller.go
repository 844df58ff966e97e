package controllers

import (
	"context"
	"crypto/sha256"
	"fmt"
	"github.com/manila-setup/manila-setup/operator"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// workloadKind is one of the driver's three workloads.
type workloadKind struct {
	prefix    string // condition prefix and controller name
	asset     string
	kind      *kind // the Deployment or DaemonSet row of kindTable
	name      string
	sa        string
	needsCred bool // waits for csi-manila-secrets
}

var (
	workloadControllerService = workloadKind{"ManilaDriverControllerService", "controller.yaml", kindsByGVK[appsv1.SchemeGroupVersion.WithKind("Deployment")], operator.ControllerDeploymentName, "manila-csi-driver-controller-sa", true}
	workloadNodeService       = workloadKind{"ManilaDriverNodeService", "node.yaml", kindsByGVK[appsv1.SchemeGroupVersion.WithKind("DaemonSet")], operator.NodeDaemonSetName, "manila-csi-driver-node-sa", false}
	workloadNFSNodeService    = workloadKind{"NFSDriverNodeService", "node_nfs.yaml", kindsByGVK[appsv1.SchemeGroupVersion.WithKind("DaemonSet")], operator.NFSNodeDaemonSetName, "manila-csi-driver-node-sa", false}
)

// workloadController keeps one Deployment or DaemonSet as the assets say, adjusted to the
// cluster (replicas and placement, proxy, CA bundle, log level), and reports whether it runs.
type workloadController struct {
	o *Operator
	k workloadKind

	// lastGeneration is the generation of the operator's own last write; the status (and the
	// cache) may not show it yet at the next sync.
	lastGeneration int64
}

func newWorkloadController(o *Operator, k workloadKind) *controller {
	c := &workloadController{o: o, k: k}
	inf := []cache.SharedIndexInformer{
		o.inf.serviceAccounts,
		o.inf.configMaps,
		o.inf.infrastructures,
		o.inf.proxies,
		k.kind.informer(&o.inf),
	}
	if k.needsCred {
		inf = append(inf, o.inf.secrets)
	}
	if k == workloadControllerService {
		inf = append(inf, o.inf.nodes) // placement on control-plane nodes
	}
	return o.newController(k.prefix+"Controller", c.sync, inf...)
}

func (c *workloadController) sync(ctx context.Context, _ *controller) error {
	o, k := c.o, c.k
	spec, status, err := o.spec()
	if err != nil || spec == nil || spec.ManagementState == operatorv1.Unmanaged {
		return err
	}
	if spec.ManagementState == operatorv1.Removed {
		obj := k.kind.newObject()
		obj.(metav1.Object).SetName(k.name)
		err := o.deleteIfPresent(ctx, obj)
		return firstErr(o.applyStatus(ctx, k.prefix, removedStatus(k.prefix, err)), err)
	}
	if !o.enabled() {
		return nil
	}
	// Wait for what the pods need, so the workload is created once, complete: no rollout
	// caused by its own dependencies appearing later.
	if waiting := c.missingDependency(); waiting != "" {
		return o.applyStatus(ctx, k.prefix, newStatus().WithConditions(
			condition(k.prefix+"Available", operatorv1.ConditionFalse, "Waiting", waiting),
			condition(k.prefix+"Progressing", operatorv1.ConditionTrue, "Waiting", waiting),
			condition(k.prefix+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""),
		))
	}
	obj, err := operator.ReadAsset(k.asset, o.vars(spec))
	if err != nil {
		return err
	}
	var generations []operatorv1.GenerationStatus
	if status != nil {
		generations = status.Generations
	}
	last := int64(-1)
	if g := generationFor(generations, "apps", k.kind.resource, o.cfg.Namespace, k.name); g != nil {
		last = g.LastGeneration
	}
	last = max(last, c.lastGeneration)
	if d, ok := obj.(*appsv1.Deployment); ok {
		c.placeController(d)
	}
	c.decoratePodSpec(k.kind.podTemplate(obj))
	// What apply compares the cached generation with (it is never sent).
	obj.(metav1.Object).SetGeneration(last)
	applied, err := o.apply(ctx, obj)
	if err != nil {
		return c.failed(ctx, err)
	}
	gen := applied.(metav1.Object).GetGeneration()
	c.lastGeneration = gen
	st := k.kind.status(k.prefix, applied)
	st.WithGenerations(operatorv1.GenerationStatus{Group: "apps", Resource: k.kind.resource, Namespace: o.cfg.Namespace, Name: k.name,
		LastGeneration: gen})
	return o.applyStatus(ctx, k.prefix, st)
}

func (c *workloadController) failed(ctx context.Context, err error) error {
	msg := fmt.Sprintf("applying %s/%s: %s", c.k.kind.resource, c.k.name, apiReason(err))
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		msg = fmt.Sprintf("applying %s/%s: %v", c.k.kind.resource, c.k.name, err)
	}
	return firstErr(c.o.applyStatus(ctx, c.k.prefix, newStatus().WithConditions(
		condition(c.k.prefix+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", msg),
	)), err)
}

// missingDependency names what the workload still waits for, or "".
func (c *workloadController) missingDependency() string {
	o, ns := c.o, c.o.cfg.Namespace
	if _, err := o.lister.serviceAccounts.ServiceAccounts(ns).Get(c.k.sa); err != nil {
		return fmt.Sprintf("waiting for ServiceAccount %s/%s", ns, c.k.sa)
	}
	if _, err := o.lister.configMaps.ConfigMaps(ns).Get(trustedCAConfigMap); err != nil {
		return fmt.Sprintf("waiting for ConfigMap %s/%s", ns, trustedCAConfigMap)
	}
	if c.k.needsCred {
		if _, err := o.lister.secrets.Secrets(ns).Get(operator.DriverSecretName); err != nil {
			return fmt.Sprintf("waiting for Secret %s/%s", ns, operator.DriverSecretName)
		}
	}
	return ""
}

// placeController sets replicas and node selector from the cluster's topology: one replica on
// single-node control planes; on dedicated control-plane nodes when the cluster has them.
func (c *workloadController) placeController(d *appsv1.Deployment) {
	o := c.o
	replicas := int32(2)
	external := false
	if infra := o.infrastructure(); infra != nil {
		switch infra.Status.ControlPlaneTopology {
		case configv1.SingleReplicaTopologyMode:
			replicas = 1
		case configv1.ExternalTopologyMode:
			external = true
		}
	}
	d.Spec.Replicas = ptr.To(replicas)
	if !external && o.hasControlPlaneNodes() {
		d.Spec.Template.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/master": ""}
	}
}

func (o *Operator) hasControlPlaneNodes() bool {
	nodes, err := o.lister.nodes.List(everything)
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
	o := c.o
	if p := o.proxy(); p != nil {
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
	if cm, err := o.lister.configMaps.ConfigMaps(o.cfg.Namespace).Get(trustedCAConfigMap); err == nil {
		if ca := cm.Data[trustedCAKey]; ca != "" {
			if t.Annotations == nil {
				t.Annotations = map[string]string{}
			}
			t.Annotations[trustedCAHashAnnot] = fmt.Sprintf("%x", sha256.Sum256([]byte(ca)))[:16]
		}
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

func deploymentStatus(prefix string, d *appsv1.Deployment) *operatorStatus {
	want := ptr.Deref(d.Spec.Replicas, 1)
	s := d.Status
	msg := fmt.Sprintf("Deployment %s: %d of %d pods available", d.Name, s.AvailableReplicas, want)
	avail := condition(prefix+"Available", operatorv1.ConditionTrue, "AsExpected", msg)
	if s.AvailableReplicas == 0 {
		avail = condition(prefix+"Available", operatorv1.ConditionFalse, "Deploying", msg+": no controller pod is ready yet (kubectl -n "+d.Namespace+" get pods -l component=controller)")
	}
	prog := condition(prefix+"Progressing", operatorv1.ConditionFalse, "AsExpected", msg)
	if s.ObservedGeneration < d.Generation || s.UpdatedReplicas < want || s.AvailableReplicas < want || s.Replicas > want {
		prog = condition(prefix+"Progressing", operatorv1.ConditionTrue, "Deploying", msg)
	}
	return newStatus().WithConditions(avail, prog,
		condition(prefix+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""))
}

func daemonSetStatus(prefix string, d *appsv1.DaemonSet) *operatorStatus {
	s := d.Status
	msg := fmt.Sprintf("DaemonSet %s: %d of %d pods available", d.Name, s.NumberAvailable, s.DesiredNumberScheduled)
	avail := condition(prefix+"Available", operatorv1.ConditionTrue, "AsExpected", msg)
	if s.NumberAvailable == 0 && s.DesiredNumberScheduled > 0 || s.ObservedGeneration == 0 {
		avail = condition(prefix+"Available", operatorv1.ConditionFalse, "Deploying", msg+": no node plugin pod is ready yet")
	}
	prog := condition(prefix+"Progressing", operatorv1.ConditionFalse, "AsExpected", msg)
	if s.ObservedGeneration < d.Generation || s.UpdatedNumberScheduled < s.DesiredNumberScheduled || s.NumberAvailable < s.DesiredNumberScheduled {
		prog = condition(prefix+"Progressing", operatorv1.ConditionTrue, "Deploying", msg)
	}
	return newStatus().WithConditions(avail, prog,
		condition(prefix+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""))
}
