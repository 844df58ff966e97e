// Package capictl is a test-only stand-in for Cluster API's MachineSet and Machine controllers
// with CAPO, for a test apiserver that serves their CRDs (testenv.APIServer.InstallClusterAPICRDs)
// but runs no controller. Much smaller than machinectl: bare Nodes (no kwok), no cloud.
//
//   - For each MachineSet of its namespace that no MachineDeployment owns, it keeps
//     spec.replicas live Machines: a new one is an OpenStackMachine cloned from the set's
//     current OpenStackMachineTemplate (with the cloned-from-name annotation, as Cluster API
//     writes it) and then a Machine with the set-name label and the set as controller; on
//     scale-down it deletes the Machines annotated cluster.x-k8s.io/delete-machine first, then
//     the oldest, with their OpenStackMachines. It writes the set's status replicas,
//     readyReplicas and availableReplicas.
//   - A new Machine goes Provisioning, then after Options.RunDelay Running with a nodeRef (a
//     Node of its name, registered with the machine's address, as a kubelet does) and that
//     address, or Failed with a failureReason and failureMessage
//     when told to (FailNext).
//
// Deleted objects go at once: there are no finalizers. It polls every Options.Interval.
package capictl

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

var (
	machineSetGVR       = clusterv1.GroupVersion.WithResource("machinesets")
	machineGVR          = clusterv1.GroupVersion.WithResource("machines")
	templateGVR         = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "openstackmachinetemplates"}
	openStackMachineGVR = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "openstackmachines"}
)

// Options tune the controller; zero values take the defaults.
type Options struct {
	// Namespace of the MachineSets (required).
	Namespace string
	// RunDelay is the time from a Machine's creation to phase Running; default 300ms.
	RunDelay time.Duration
	// Interval is the reconcile period; default 50ms.
	Interval time.Duration
	// Ports, when set, gives each Machine's server (its ID is the Machine's UID) a real Neutron
	// port on every network its OpenStackMachine's ports name by ID, as CAPO does, and deletes
	// them with the Machine; the Machine's addresses then include theirs.
	Ports machinectl.PortMaker
}

// Controller is the simulated Cluster API. Create it with Start.
type Controller struct {
	dyn  dynamic.Interface
	opts Options

	mu       sync.Mutex
	failNext []string
	failing  map[string]string // Machine name -> failure message
	created  []string
	born     map[string]time.Time // Machine name -> when this controller created it
	deleted  []Deletion
	lastErr  error
}

// Deletion is a Machine the controller deleted to scale a set down.
type Deletion struct {
	Name string
	// Marked says it carried cluster.x-k8s.io/delete-machine: it was chosen by whoever marked
	// it, not by the controller's fallback (the oldest).
	Marked bool
}

// Start runs a controller against the apiserver of cfg for the duration of a test.
func Start(t testing.TB, cfg *rest.Config, opts Options) *Controller {
	t.Helper()
	if opts.Namespace == "" {
		t.Fatal("capictl: Options.Namespace is required")
	}
	if opts.RunDelay == 0 {
		opts.RunDelay = 300 * time.Millisecond
	}
	if opts.Interval == 0 {
		opts.Interval = 50 * time.Millisecond
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 200, 400
	c := &Controller{dyn: dynamic.NewForConfigOrDie(cfg), opts: opts, failing: map[string]string{}, born: map[string]time.Time{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(opts.Interval)
		defer ticker.Stop()
		for {
			err := c.reconcile(ctx)
			c.mu.Lock()
			c.lastErr = err
			c.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		c.deleteAllPorts()
	})
	return c
}

// FailNext makes the next Machine this controller creates fail with message, as CAPO does when
// the cloud refuses to create the server.
func (c *Controller) FailNext(message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext = append(c.failNext, message)
}

// Created returns the names of the Machines this controller created, oldest first.
func (c *Controller) Created() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.created)
}

// Deleted returns the Machines this controller deleted on scale-down, first deleted first.
func (c *Controller) Deleted() []Deletion {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.deleted)
}

// Err returns the error of the last reconcile round (conflicts, mostly, retried on the next).
func (c *Controller) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

func (c *Controller) reconcile(ctx context.Context) error {
	ns := c.opts.Namespace
	sets, err := c.dyn.Resource(machineSetGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	machines, err := c.dyn.Resource(machineGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	// Listed after the Machines and before this round creates any: one without its Machine is
	// an orphan, not one being created.
	infra, err := c.dyn.Resource(openStackMachineGVR).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: clusterv1.MachineSetNameLabel})
	if err != nil {
		return err
	}
	var errs []error
	for i := range sets.Items {
		set := &sets.Items[i]
		if ownedByDeployment(set) {
			continue
		}
		if err := c.reconcileSet(ctx, set, machines.Items); err != nil {
			errs = append(errs, fmt.Errorf("MachineSet %s: %w", set.GetName(), err))
		}
	}
	if err := c.collectOrphans(ctx, infra.Items, machines.Items); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

func ownedByDeployment(set *unstructured.Unstructured) bool {
	for _, ref := range set.GetOwnerReferences() {
		if ref.Kind == "MachineDeployment" {
			return true
		}
	}
	return false
}

func (c *Controller) reconcileSet(ctx context.Context, set *unstructured.Unstructured, all []unstructured.Unstructured) error {
	var live []*unstructured.Unstructured
	for i := range all {
		m := &all[i]
		if m.GetLabels()[clusterv1.MachineSetNameLabel] == set.GetName() && m.GetDeletionTimestamp() == nil {
			live = append(live, m)
		}
	}
	replicas, _, _ := unstructured.NestedInt64(set.Object, "spec", "replicas")
	for n := len(live); n < int(replicas); n++ {
		if err := c.createMachine(ctx, set); err != nil {
			return err
		}
	}
	if surplus := len(live) - int(replicas); surplus > 0 {
		// Marked first, then the oldest (by creation, then name).
		slices.SortStableFunc(live, func(a, b *unstructured.Unstructured) int {
			_, ma := a.GetAnnotations()[clusterv1.DeleteMachineAnnotation]
			_, mb := b.GetAnnotations()[clusterv1.DeleteMachineAnnotation]
			if ma != mb {
				if ma {
					return -1
				}
				return 1
			}
			if byAge := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); byAge != 0 {
				return byAge
			}
			return strings.Compare(a.GetName(), b.GetName())
		})
		for _, m := range live[:surplus] {
			if err := c.deleteMachine(ctx, m); err != nil {
				return err
			}
		}
		live = live[surplus:]
	}
	running := 0
	for _, m := range live {
		phase, err := c.advance(ctx, m)
		if err != nil {
			return err
		}
		if phase == string(clusterv1.MachinePhaseRunning) {
			running++
		}
	}
	return c.writeStatus(ctx, set, len(live), running)
}

// createMachine clones the set's template into an OpenStackMachine, then creates the Machine
// that points at it, in the order Cluster API's MachineSet controller does.
func (c *Controller) createMachine(ctx context.Context, set *unstructured.Unstructured) error {
	ns := c.opts.Namespace
	ref, _, _ := unstructured.NestedMap(set.Object, "spec", "template", "spec", "infrastructureRef")
	templateName, _ := ref["name"].(string)
	template, err := c.dyn.Resource(templateGVR).Namespace(ns).Get(ctx, templateName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading its OpenStackMachineTemplate: %w", err)
	}
	name := set.GetName() + "-" + testenv.NameSuffix()
	labels := map[string]string{clusterv1.MachineSetNameLabel: set.GetName()}
	if cluster, _, _ := unstructured.NestedString(set.Object, "spec", "clusterName"); cluster != "" {
		labels[clusterv1.ClusterNameLabel] = cluster
	}
	spec, _, _ := unstructured.NestedMap(template.Object, "spec", "template", "spec")
	infra := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": template.GetAPIVersion(), "kind": "OpenStackMachine",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	infra.SetLabels(labels)
	infra.SetAnnotations(map[string]string{
		clusterv1.TemplateClonedFromNameAnnotation:      templateName,
		clusterv1.TemplateClonedFromGroupKindAnnotation: "OpenStackMachineTemplate.infrastructure.cluster.x-k8s.io",
	})
	if _, err := c.dyn.Resource(openStackMachineGVR).Namespace(ns).Create(ctx, infra, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating OpenStackMachine %s: %w", name, err)
	}

	machineSpec, _, _ := unstructured.NestedMap(set.Object, "spec", "template", "spec")
	machineSpec["infrastructureRef"] = map[string]any{"apiVersion": template.GetAPIVersion(), "kind": "OpenStackMachine", "name": name, "namespace": ns}
	templateLabels, _, _ := unstructured.NestedStringMap(set.Object, "spec", "template", "metadata", "labels")
	for k, v := range templateLabels {
		if _, ok := labels[k]; !ok {
			labels[k] = v
		}
	}
	m := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": clusterv1.GroupVersion.String(), "kind": "Machine",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     machineSpec,
	}}
	m.SetLabels(labels)
	yes := true
	m.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachineSet", Name: set.GetName(), UID: set.GetUID(), Controller: &yes}})
	if _, err := c.dyn.Resource(machineGVR).Namespace(ns).Create(ctx, m, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Machine %s: %w", name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created = append(c.created, name)
	c.born[name] = time.Now()
	if len(c.failNext) > 0 {
		c.failing[name] = c.failNext[0]
		c.failNext = c.failNext[1:]
	}
	return nil
}

func (c *Controller) deleteMachine(ctx context.Context, m *unstructured.Unstructured) error {
	ns := c.opts.Namespace
	if c.opts.Ports != nil {
		if err := c.opts.Ports.DeletePorts(ctx, string(m.GetUID())); err != nil {
			return err
		}
	}
	if err := c.dyn.Resource(nodeGVR).Delete(ctx, m.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := c.dyn.Resource(machineGVR).Namespace(ns).Delete(ctx, m.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, marked := m.GetAnnotations()[clusterv1.DeleteMachineAnnotation]
	c.mu.Lock()
	c.deleted = append(c.deleted, Deletion{Name: m.GetName(), Marked: marked})
	c.mu.Unlock()
	infra, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
	if err := c.dyn.Resource(openStackMachineGVR).Namespace(ns).Delete(ctx, infra, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// deleteAllPorts deletes, with Ports, the ports of the servers of every Machine still there, so
// that a stopped stand-in leaves nothing in the cloud.
func (c *Controller) deleteAllPorts() {
	if c.opts.Ports == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	machines, err := c.dyn.Resource(machineGVR).Namespace(c.opts.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, m := range machines.Items {
		_ = c.opts.Ports.DeletePorts(ctx, string(m.GetUID()))
	}
}

// serverAddresses are the addresses of a Machine's server: its address on the machine network,
// and with Ports, those of its ports on the networks its OpenStackMachine names (made now, as
// CAPO makes them before the server boots), in Nova's order (by network name). The Machine gets
// its providerID, as CAPO sets it, so that its server can be found by ID.
func (c *Controller) serverAddresses(ctx context.Context, m *unstructured.Unstructured) ([]string, error) {
	primary := netip.MustParseAddr(testenv.NodeIP(m.GetName()))
	nics := []machinectl.NIC{{Network: "ostest-openshift", Addr: primary, Subnet: netip.PrefixFrom(primary, 16).Masked(), DefaultRoute: true}}
	if c.opts.Ports != nil {
		infra, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
		om, err := c.dyn.Resource(openStackMachineGVR).Namespace(c.opts.Namespace).Get(ctx, infra, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading OpenStackMachine %s of Machine %s: %w", infra, m.GetName(), err)
		}
		var networks []string
		ports, _, _ := unstructured.NestedSlice(om.Object, "spec", "ports")
		for _, p := range ports {
			if id, _, _ := unstructured.NestedString(p.(map[string]any), "network", "id"); id != "" {
				networks = append(networks, strings.ToLower(id))
			}
		}
		made, err := c.opts.Ports.CreatePorts(ctx, m.GetName(), string(m.GetUID()), networks)
		if err != nil {
			return nil, err
		}
		nics = append(nics, made...)
		if id, _, _ := unstructured.NestedString(m.Object, "spec", "providerID"); id == "" {
			_ = unstructured.SetNestedField(m.Object, "openstack:///"+string(m.GetUID()), "spec", "providerID")
			updated, err := c.dyn.Resource(machineGVR).Namespace(c.opts.Namespace).Update(ctx, m, metav1.UpdateOptions{})
			if err != nil {
				return nil, fmt.Errorf("setting the providerID of Machine %s: %w", m.GetName(), err)
			}
			m.Object = updated.Object // its status is written next, on this resourceVersion
		}
	}
	var out []string
	for _, a := range machinectl.MachineAddresses(nics) {
		out = append(out, a.String())
	}
	return out, nil
}

// nodeGVR is the core Nodes: a Running Machine's nodeRef names one, with the machine's address.
var nodeGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// registerNode makes the Node of a Machine (as a kubelet registers it), with its address on the
// machine network; nothing keeps it Ready: Cluster API's Running phase is what the rollout reads.
func (c *Controller) registerNode(ctx context.Context, name string) error {
	node := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"kubernetes.io/hostname": name}},
	}}
	created, err := c.dyn.Resource(nodeGVR).Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("registering the Node of Machine %s: %w", name, err)
	}
	_ = unstructured.SetNestedSlice(created.Object, []any{
		map[string]any{"type": "InternalIP", "address": testenv.NodeIP(name)},
		map[string]any{"type": "Hostname", "address": name},
	}, "status", "addresses")
	if _, err := c.dyn.Resource(nodeGVR).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("the addresses of Node %s: %w", name, err)
	}
	return nil
}

// advance moves a Machine along: no phase -> Provisioning -> (after RunDelay) Running with a
// nodeRef, or Failed. It returns the phase the Machine has now.
func (c *Controller) advance(ctx context.Context, m *unstructured.Unstructured) (string, error) {
	phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
	c.mu.Lock()
	failure, failing := c.failing[m.GetName()]
	// creationTimestamp has whole seconds: it would make RunDelay anything from 0 to 1s longer
	// or shorter.
	born, ok := c.born[m.GetName()]
	c.mu.Unlock()
	if !ok {
		born = m.GetCreationTimestamp().Time
	}
	next := phase
	switch {
	case phase == string(clusterv1.MachinePhaseRunning), phase == string(clusterv1.MachinePhaseFailed):
		return phase, nil
	case failing:
		next = string(clusterv1.MachinePhaseFailed)
		_ = unstructured.SetNestedField(m.Object, "CreateError", "status", "failureReason")
		_ = unstructured.SetNestedField(m.Object, failure, "status", "failureMessage")
	case time.Since(born) >= c.opts.RunDelay:
		addresses, err := c.serverAddresses(ctx, m)
		if err != nil {
			return phase, err
		}
		if err := c.registerNode(ctx, m.GetName()); err != nil {
			return phase, err
		}
		next = string(clusterv1.MachinePhaseRunning)
		_ = unstructured.SetNestedMap(m.Object, map[string]any{"apiVersion": "v1", "kind": "Node", "name": m.GetName()}, "status", "nodeRef")
		list := []any{}
		for _, a := range addresses {
			list = append(list, map[string]any{"type": "InternalIP", "address": a})
		}
		list = append(list, map[string]any{"type": "Hostname", "address": m.GetName()})
		_ = unstructured.SetNestedSlice(m.Object, list, "status", "addresses")
	default:
		next = string(clusterv1.MachinePhaseProvisioning)
	}
	if next == phase {
		return phase, nil
	}
	_ = unstructured.SetNestedField(m.Object, next, "status", "phase")
	if _, err := c.dyn.Resource(machineGVR).Namespace(c.opts.Namespace).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		return phase, fmt.Errorf("Machine %s to phase %s: %w", m.GetName(), next, err)
	}
	return next, nil
}

func (c *Controller) writeStatus(ctx context.Context, set *unstructured.Unstructured, live, running int) error {
	status := map[string]any{"replicas": int64(live), "readyReplicas": int64(running), "availableReplicas": int64(running), "observedGeneration": set.GetGeneration()}
	old, _, _ := unstructured.NestedMap(set.Object, "status")
	same := true
	for k, v := range status {
		if old[k] != v {
			same = false
		}
	}
	if same {
		return nil
	}
	for k, v := range status {
		_ = unstructured.SetNestedField(set.Object, v, "status", k)
	}
	_, err := c.dyn.Resource(machineSetGVR).Namespace(c.opts.Namespace).UpdateStatus(ctx, set, metav1.UpdateOptions{})
	return err
}

// collectOrphans deletes the OpenStackMachines of this controller (set-name label) whose
// Machine is gone (deleted by someone else), as the garbage collector does through the owner
// reference Cluster API gives them; so that a template no Machine uses counts as unused.
func (c *Controller) collectOrphans(ctx context.Context, infra, machines []unstructured.Unstructured) error {
	has := map[string]bool{}
	for _, m := range machines {
		name, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
		has[name] = true
	}
	for _, o := range infra {
		if !has[o.GetName()] {
			if err := c.dyn.Resource(openStackMachineGVR).Namespace(c.opts.Namespace).Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}
