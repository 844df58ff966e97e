// Package deploy installs the operator into a cluster (server-side apply of what
// operator.Render prints, plus the credentials Secret) and reads its status back. It is the
// CLI's half: the operator binary does not link it, nor client-go's clientset with its scheme of
// every API group.
package deploy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/health"
	"github.com/manila-setup/manila-setup/operator/platform"
)

// InstallOptions shape Install.
type InstallOptions struct {
	// Credentials, when not nil, becomes Secret manila-cloud-credentials (key clouds.yaml, and
	// cacert when given).
	Credentials map[string][]byte
	// ForceConflicts writes every object, also over another manager's fields and objects
	// (server-side apply with force): for the user who means it.
	ForceConflicts bool
	// OnSkipped hears of each object left out because the cluster does not serve its kind
	// (optionalKinds), and why.
	OnSkipped func(object, why string)
}

// Install applies the rendered objects with server-side apply (field manager manila-setup),
// the CRD first and established before the rest, and the credentials Secret before the
// operator's Deployment. A real cluster is not empty: every object is checked first (ownership),
// and where one is another manager's, nothing is written (OwnershipError) unless
// opts.ForceConflicts. A CustomResourceDefinition that exists and is not ours is used as it is.
func Install(ctx context.Context, cfg *rest.Config, rendered []byte, namespace string, opts InstallOptions) ([]string, error) {
	objs, err := operator.Objects(rendered)
	if err != nil {
		return nil, err
	}
	if opts.Credentials != nil {
		secret, err := credentialsSecret(namespace, opts.Credentials)
		if err != nil {
			return nil, err
		}
		objs = withCredentials(objs, secret)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	// Know who owns the names before writing any of them.
	if _, err := checkPlatform(ctx, dyn, RenderedMode(objs)); err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	in := &installer{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), force: opts.ForceConflicts}
	skip, err := in.checkAll(ctx, objs)
	if err != nil {
		return nil, err
	}
	var applied []string
	apply := func(u *unstructured.Unstructured) error {
		if skip[objectKey(u)] {
			return nil
		}
		if err := in.apply(ctx, u, false); err != nil {
			return err
		}
		applied = append(applied, fmt.Sprintf("%s/%s", strings.ToLower(u.GetKind()), u.GetName()))
		return nil
	}
	// CRDs first, then wait until they serve.
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			if err := apply(u); err != nil {
				return applied, err
			}
			if err := waitEstablished(ctx, dyn, u.GetName()); err != nil {
				return applied, err
			}
			in.mapper.Reset()
		}
	}
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if optionalKinds[u.GroupVersionKind().GroupKind()] && !in.serves(u) {
			// The cluster has no Prometheus Operator: the operator's metrics stay served, and
			// nothing else is missing.
			if opts.OnSkipped != nil {
				opts.OnSkipped(fmt.Sprintf("%s/%s", strings.ToLower(u.GetKind()), u.GetName()),
					fmt.Sprintf("the cluster does not serve %s (group %s): no Prometheus Operator", u.GetKind(), u.GroupVersionKind().GroupVersion()))
			}
			continue
		}
		if err := apply(u); err != nil {
			return applied, err
		}
	}
	return applied, nil
}

// optionalKinds are kinds of other projects' CRDs that install writes only where the cluster
// serves them: the Prometheus Operator's, for the operator's ServiceMonitor and alerts.
var optionalKinds = map[schema.GroupKind]bool{
	{Group: "monitoring.coreos.com", Kind: "ServiceMonitor"}: true,
	{Group: "monitoring.coreos.com", Kind: "PrometheusRule"}: true,
}

// serves tells whether the cluster serves u's kind.
func (in *installer) serves(u *unstructured.Unstructured) bool {
	_, err := in.resource(u)
	return err == nil
}

// withCredentials puts the credentials Secret just before the operator's Deployment: the
// operator should find its credentials when it starts.
func withCredentials(objs []*unstructured.Unstructured, secret *unstructured.Unstructured) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, 0, len(objs)+1)
	placed := false
	for _, u := range objs {
		if u.GetKind() == "Deployment" && !placed {
			out = append(out, secret)
			placed = true
		}
		out = append(out, u)
	}
	if !placed {
		out = append(out, secret)
	}
	return out
}

// credentialsSecret is Secret manila-cloud-credentials holding data, labelled ours.
func credentialsSecret(namespace string, data map[string][]byte) (*unstructured.Unstructured, error) {
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: operator.CredentialsSecretName, Namespace: namespace, Labels: map[string]string{operator.LabelManagedBy: "manila-setup"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: u}, nil
}

// apiReason is an API error's reason and code, without the object it carried.
func apiReason(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok {
		st := s.Status()
		return fmt.Sprintf("%s (HTTP %d)", st.Reason, st.Code)
	}
	return "request failed"
}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// Status is what `operator status` reports.
type Status struct {
	// Mode is the kind of cluster (operator/platform): in companion mode the ClusterCSIDriver and
	// the driver are the platform's, and their health is read from the conditions alone.
	Mode            platform.Detection `json:"mode"`
	ManagementState string             `json:"managementState"`
	// Credentials says where the cloud credentials Secret came from (never its content).
	Credentials    string            `json:"credentials"`
	ObservedGen    int64             `json:"observedGeneration"`
	Generation     int64             `json:"generation"`
	Version        string            `json:"version,omitempty"`
	Conditions     []StatusCondition `json:"conditions"`
	Operands       []OperandHealth   `json:"operands"`
	StorageClasses []string          `json:"storageClasses"`
	// Companion is manila-setup's companion operator, where the platform runs the driver and
	// the companion is installed (ManilaCompanion "cluster").
	Companion *CompanionStatus `json:"companion,omitempty"`
	// Healthy: nothing Degraded, and either Manila is disabled or every operand is available.
	Healthy bool `json:"healthy"`
}

// CompanionStatus is what the companion operator reports on its ManilaCompanion.
type CompanionStatus struct {
	Namespace   string            `json:"namespace"`
	Credentials string            `json:"credentials"`
	Version     string            `json:"version,omitempty"`
	Conditions  []StatusCondition `json:"conditions"`
	// StorageClasses are the companion's own (restricted to the machine network).
	StorageClasses []string `json:"storageClasses"`
}

// Detect tells which kind of cluster this is (operator/platform).
func Detect(ctx context.Context, cfg *rest.Config) (platform.Detection, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return platform.Detection{}, err
	}
	return platform.Detect(ctx, platform.Dynamic(dyn))
}

var companionGVR = schema.GroupVersionResource{Group: operator.CompanionGroup, Version: operator.CompanionVersion, Resource: operator.CompanionResource}

// getCompanion reads the ManilaCompanion "cluster", nil when the companion is not installed.
func getCompanion(ctx context.Context, dyn dynamic.Interface, kube kubernetes.Interface, scs []string) (*CompanionStatus, error) {
	u, err := dyn.Resource(companionGVR).Get(ctx, operator.CompanionName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", operator.CompanionKind, operator.CompanionName, err)
	}
	var d operatorv1.ClusterCSIDriver // the same status shape
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		return nil, err
	}
	c := &CompanionStatus{Namespace: operator.CompanionNamespace, Version: d.Status.Version, Conditions: []StatusCondition{}, StorageClasses: []string{}}
	for _, cond := range d.Status.Conditions {
		c.Conditions = append(c.Conditions, StatusCondition{Type: cond.Type, Status: string(cond.Status), Reason: cond.Reason, Message: cond.Message})
	}
	sort.Slice(c.Conditions, func(i, j int) bool { return c.Conditions[i].Type < c.Conditions[j].Type })
	secret, err := getSecret(ctx, func(ctx context.Context, name string) (*corev1.Secret, error) {
		return kube.CoreV1().Secrets(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	}, operator.CredentialsSecretName)
	if err != nil {
		return nil, fmt.Errorf("Secret %s/%s: %w", c.Namespace, operator.CredentialsSecretName, err)
	}
	c.Credentials = CredentialsSource(secret)
	for _, name := range scs {
		if strings.HasPrefix(name, operator.CompanionStorageClassPrefix) {
			c.StorageClasses = append(c.StorageClasses, name)
		}
	}
	return c, nil
}

// StatusCondition is one condition of the ClusterCSIDriver.
type StatusCondition = health.Condition

// OperandHealth is one workload of the driver.
type OperandHealth struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Ready     int32  `json:"ready"`
	Desired   int32  `json:"desired"`
	Present   bool   `json:"present"`
	UpToDate  bool   `json:"upToDate"`
	Available bool   `json:"available"`
}

// GetStatus reads the ClusterCSIDriver and the operands.
func GetStatus(ctx context.Context, cfg *rest.Config, namespace string) (*Status, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mode, err := platform.Detect(ctx, platform.Dynamic(dyn))
	if err != nil {
		return nil, err
	}
	u, err := dyn.Resource(operatorv1.GroupVersion.WithResource("clustercsidrivers")).Get(ctx, operator.DriverName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("ClusterCSIDriver %s: %w", operator.DriverName, err)
	}
	var d operatorv1.ClusterCSIDriver
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		return nil, err
	}
	secret, err := getSecret(ctx, func(ctx context.Context, name string) (*corev1.Secret, error) {
		return kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	}, operator.CredentialsSecretName)
	if err != nil {
		return nil, fmt.Errorf("Secret %s/%s: %w", namespace, operator.CredentialsSecretName, err)
	}
	st := &Status{Mode: mode, Credentials: CredentialsSource(secret), ManagementState: string(d.Spec.ManagementState), ObservedGen: d.Status.ObservedGeneration, Generation: d.Generation, Version: d.Status.Version}
	for _, c := range d.Status.Conditions {
		st.Conditions = append(st.Conditions, StatusCondition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	sort.Slice(st.Conditions, func(i, j int) bool { return st.Conditions[i].Type < st.Conditions[j].Type })
	scs, err := kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err == nil {
		st.StorageClasses = health.StorageClasses(scs.Items)
	}
	if mode.Mode == platform.ModeCompanion {
		// The platform's operator runs its driver under names of its own choosing: its
		// conditions say how it is; the companion's, when installed, say the rest.
		if st.Companion, err = getCompanion(ctx, dyn, kube, st.StorageClasses); err != nil {
			return nil, err
		}
		st.Healthy = health.ConditionsHealthy(st.Conditions) && (st.Companion == nil || health.ConditionsHealthy(st.Companion.Conditions))
		return st, nil
	}
	allAvailable := true
	dep, err := kube.AppsV1().Deployments(namespace).Get(ctx, operator.ControllerDeploymentName, metav1.GetOptions{})
	st.Operands = append(st.Operands, deploymentHealth(dep, err))
	for _, name := range []string{operator.NodeDaemonSetName, operator.NFSNodeDaemonSetName} {
		ds, err := kube.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		st.Operands = append(st.Operands, daemonSetHealth(name, ds, err))
	}
	for _, o := range st.Operands {
		allAvailable = allAvailable && o.Available
	}
	st.Healthy = health.Healthy(st.Conditions, allAvailable, st.Operands[0].Present)
	return st, nil
}

func deploymentHealth(d *appsv1.Deployment, err error) OperandHealth {
	h := OperandHealth{Kind: "Deployment", Name: operator.ControllerDeploymentName}
	if err != nil || d == nil {
		return h
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	h.Present, h.Ready, h.Desired = true, d.Status.ReadyReplicas, want
	h.UpToDate = d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want
	h.Available = d.Status.AvailableReplicas > 0
	return h
}

func daemonSetHealth(name string, d *appsv1.DaemonSet, err error) OperandHealth {
	h := OperandHealth{Kind: "DaemonSet", Name: name}
	if apierrors.IsNotFound(err) || err != nil || d == nil {
		return h
	}
	h.Present, h.Ready, h.Desired = true, d.Status.NumberReady, d.Status.DesiredNumberScheduled
	h.UpToDate = d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedNumberScheduled == d.Status.DesiredNumberScheduled
	h.Available = d.Status.NumberAvailable > 0 || d.Status.DesiredNumberScheduled == 0
	return h
}
