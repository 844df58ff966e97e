// Package machinectl is a test-only stand-in for the OpenShift Machine API controllers, for sim
// clusters (test/testenv) where no cloud creates servers. It plays two parts:
//
//   - the MachineSet controller: it creates Machines from a MachineSet's template until the set
//     has spec.replicas live Machines, and deletes the surplus when it has more, choosing first
//     those annotated machine.openshift.io/delete-machine, then failed ones, then those without
//     a Ready Node, then the newest (as the real controller's default policy does); it keeps
//     the set's status (replicas, readyReplicas, availableReplicas) up to date;
//   - the machine actuator: a new Machine goes Provisioning; after half of Options.NodeDelay its
//     server exists (its ports made) and it goes Provisioned with spec.providerID, addresses and
//     a providerStatus, but no Node yet; after Options.NodeDelay it gets a kwok Node of its name
//     (Ready within a second or so) and turns Running with status.nodeRef, as the real Machine
//     API's nodelink does once the Node joins; a deleted Machine goes Deleting, and after
//     Options.DeleteDelay its Node is deleted and its finalizer removed.
//
// A Machine whose port Neutron refuses for lack of addresses ("No more IP addresses available on
// network ...") goes Failed with errorReason InvalidConfiguration and Neutron's message, and its
// ports are deleted: the server is never made. That is a shortcut: the real OpenStack provider
// calls such a refusal a create error, so its Machine stays Provisioning, is retried, and shows
// Neutron's words in a Warning event (test/testenv/machineapi runs the real controllers;
// docs/development.md, the Machine API section).
//
// Tests steer it: Fail (a named Machine goes Failed with an errorMessage), FailNext and
// StallNext (the next Machine it creates fails, or never gets a Node).
//
// It is level-triggered and polls every Options.Interval, so it can be started and stopped at any
// time, like the real controllers. The e2e suite and the demo can run it beside a sim cluster.
package machinectl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// Names shared with the real Machine API.
const (
	Namespace               = "openshift-machine-api"
	DeleteMachineAnnotation = "machine.openshift.io/delete-machine"
	MachineFinalizer        = "machine.machine.openshift.io"
	RoleLabel               = "machine.openshift.io/cluster-api-machine-role"
	MachineSetLabel         = "machine.openshift.io/cluster-api-machineset"
	ClusterIDLabel          = "machine.openshift.io/cluster-api-cluster"
	NodeMachineAnnotation   = "machine.openshift.io/machine"
)

// Options tune the controller. Zero values take the defaults.
type Options struct {
	// Namespace of the MachineSets and Machines; default openshift-machine-api.
	Namespace string
	// NodeDelay is the time from a Machine's creation to its Node's registration (a server
	// booting); default 1s.
	NodeDelay time.Duration
	// DeleteDelay is how long a deleted Machine stays in phase Deleting (draining); default 200ms.
	DeleteDelay time.Duration
	// Interval is the reconcile period; default 100ms.
	Interval time.Duration
	// Ports, when set, gives each Machine's server (its ID is the Machine's UID) a real Neutron
	// port on every network its providerSpec names by ID, and deletes them with the Machine, so
	// that the cloud sees the attachments the Machine API stand-in makes.
	Ports PortMaker
	// NodeIP is how a new node chooses its node IP among its NICs (nodeip.go); the zero rule
	// keeps the primary NIC's address unless a storage subnet holds the hint or a VIP.
	NodeIP NodeIPRule
	// PrimaryNetwork names the machines' primary network (for the order of their addresses);
	// default "ostest-8x2kq-openshift", as the installer names it after the infrastructure.
	PrimaryNetwork string
}

// NodeRegistrar registers fake nodes that kwok keeps Ready; *testenv.SimCluster is one.
type NodeRegistrar interface {
	AddNode(ctx context.Context, name string, controlPlane bool, internalIPs ...string) error
}

// Controller is the simulated Machine API. Create it with New or Start.
type Controller struct {
	mc    machineclient.Interface
	kc    kubernetes.Interface
	nodes NodeRegistrar
	opts  Options

	mu   sync.Mutex
	fail map[string]string // Machine name -> error message
	// failReason is the errorReason of a failing Machine, when not CreateError.
	failReason map[string]machinev1beta1.MachineStatusError
	failNext   []string
	stall      map[string]bool
	stallNext  int
	firstSeen  map[string]time.Time
	created    []string
	lastErr    error
}

// New returns a controller; call Run to start it.
func New(mc machineclient.Interface, kc kubernetes.Interface, nodes NodeRegistrar, opts Options) *Controller {
	if opts.Namespace == "" {
		opts.Namespace = Namespace
	}
	if opts.NodeDelay == 0 {
		opts.NodeDelay = time.Second
	}
	if opts.DeleteDelay == 0 {
		opts.DeleteDelay = 200 * time.Millisecond
	}
	if opts.Interval == 0 {
		opts.Interval = 100 * time.Millisecond
	}
	if opts.PrimaryNetwork == "" {
		opts.PrimaryNetwork = "ostest-8x2kq-openshift"
	}
	return &Controller{mc: mc, kc: kc, nodes: nodes, opts: opts,
		fail: map[string]string{}, failReason: map[string]machinev1beta1.MachineStatusError{}, stall: map[string]bool{}, firstSeen: map[string]time.Time{}}
}

// Start runs a controller against a sim cluster for the duration of a test.
func Start(t testing.TB, c *testenv.SimCluster, opts Options) *Controller {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 200, 400
	// The real finalizer name is not domain-qualified; the apiserver's warning about it is noise.
	cfg.WarningHandler = rest.NoWarnings{}
	mc, err := machineclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctl := New(mc, kc, c, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctl.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		ctl.deleteAllPorts()
	})
	return ctl
}

// deleteAllPorts deletes, with Options.Ports, the ports of the servers of every Machine still
// there, so that a stopped stand-in leaves nothing in the cloud.
func (c *Controller) deleteAllPorts() {
	if c.opts.Ports == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	machines, err := c.mc.MachineV1beta1().Machines(c.opts.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, m := range machines.Items {
		_ = c.opts.Ports.DeletePorts(ctx, string(m.UID))
	}
}

// Run reconciles every Interval until ctx ends. Errors (conflicts, mostly) are retried on the
// next round; Err returns the last one.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		err := c.Reconcile(ctx)
		c.mu.Lock()
		c.lastErr = err
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Err returns the error of the last reconcile round, nil if it went through.
func (c *Controller) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// Fail makes the named Machine go to phase Failed with message as its errorMessage, as an
// actuator does when the cloud refuses to create the server.
func (c *Controller) Fail(machine, message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail[machine] = message
}

// FailNext makes the next Machine this controller creates fail with message.
func (c *Controller) FailNext(message string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext = append(c.failNext, message)
}

// StallNext makes the next Machine this controller creates stay Provisioning forever: no Node.
func (c *Controller) StallNext() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stallNext++
}

// Created returns the names of the Machines this controller created, oldest first.
func (c *Controller) Created() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.created)
}

// Reconcile runs one round over every MachineSet and Machine.
func (c *Controller) Reconcile(ctx context.Context) error {
	ns := c.opts.Namespace
	sets, err := c.mc.MachineV1beta1().MachineSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	machines, err := c.mc.MachineV1beta1().Machines(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	nodes, err := c.kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for i := range nodes.Items {
		ready[nodes.Items[i].Name] = testenv.NodeReady(&nodes.Items[i])
	}
	var errs []error
	for i := range machines.Items {
		if err := c.reconcileMachine(ctx, &machines.Items[i], ready); err != nil {
			errs = append(errs, err)
		}
	}
	for i := range sets.Items {
		if err := c.reconcileSet(ctx, &sets.Items[i], machines.Items, ready); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d errors, first: %w", len(errs), errs[0])
	}
	return nil
}

func machineReady(m *machinev1beta1.Machine, ready map[string]bool) bool {
	return m.DeletionTimestamp == nil && m.Status.NodeRef != nil && ready[m.Status.NodeRef.Name]
}

func phaseOf(m *machinev1beta1.Machine) string {
	if m.Status.Phase == nil {
		return ""
	}
	return *m.Status.Phase
}

// reconcileSet is the MachineSet controller: create or delete Machines to match spec.replicas.
func (c *Controller) reconcileSet(ctx context.Context, ms *machinev1beta1.MachineSet, all []machinev1beta1.Machine, ready map[string]bool) error {
	if len(ms.Spec.Selector.MatchLabels) == 0 && len(ms.Spec.Selector.MatchExpressions) == 0 {
		return nil
	}
	selector, err := metav1.LabelSelectorAsSelector(&ms.Spec.Selector)
	if err != nil {
		return err
	}
	var live []*machinev1beta1.Machine
	for i := range all {
		m := &all[i]
		if m.DeletionTimestamp == nil && selector.Matches(labels.Set(m.Labels)) {
			live = append(live, m)
		}
	}
	want := 0
	if ms.Spec.Replicas != nil {
		want = int(*ms.Spec.Replicas)
	}
	for n := len(live); n < want; n++ {
		if err := c.createMachine(ctx, ms); err != nil {
			return err
		}
	}
	if surplus := len(live) - want; surplus > 0 {
		slices.SortStableFunc(live, func(a, b *machinev1beta1.Machine) int {
			if ra, rb := deletePriority(a, ready), deletePriority(b, ready); ra != rb {
				return ra - rb
			}
			return b.CreationTimestamp.Compare(a.CreationTimestamp.Time) // newest first
		})
		for _, m := range live[:surplus] {
			err := c.mc.MachineV1beta1().Machines(ms.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}

	readyCount := 0
	for _, m := range live {
		if machineReady(m, ready) {
			readyCount++
		}
	}
	status := ms.Status.DeepCopy()
	status.Replicas = int32(len(live))
	status.FullyLabeledReplicas = int32(len(live))
	status.ReadyReplicas = int32(readyCount)
	status.AvailableReplicas = int32(readyCount)
	status.ObservedGeneration = ms.Generation
	status.LabelSelector = selector.String()
	if equalSetStatus(*status, ms.Status) {
		return nil
	}
	updated := ms.DeepCopy()
	updated.Status = *status
	_, err = c.mc.MachineV1beta1().MachineSets(ms.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	return ignoreConflict(err)
}

func equalSetStatus(a, b machinev1beta1.MachineSetStatus) bool {
	return a.Replicas == b.Replicas && a.FullyLabeledReplicas == b.FullyLabeledReplicas &&
		a.ReadyReplicas == b.ReadyReplicas && a.AvailableReplicas == b.AvailableReplicas &&
		a.ObservedGeneration == b.ObservedGeneration && a.LabelSelector == b.LabelSelector
}

// deletePriority orders Machines for deletion, lowest first.
func deletePriority(m *machinev1beta1.Machine, ready map[string]bool) int {
	switch {
	case m.Annotations[DeleteMachineAnnotation] != "" || m.Annotations["cluster.k8s.io/delete-machine"] != "":
		return 0
	case phaseOf(m) == machinev1beta1.PhaseFailed:
		return 1
	case !machineReady(m, ready):
		return 2
	}
	return 3
}

// createMachine creates one Machine from the set's template, named like the real controller
// names them: <set>-<5 random characters>.
func (c *Controller) createMachine(ctx context.Context, ms *machinev1beta1.MachineSet) error {
	tmpl := ms.Spec.Template
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ms.Name + "-" + testenv.NameSuffix(),
			Namespace:   ms.Namespace,
			Labels:      maps(tmpl.Labels),
			Annotations: maps(tmpl.Annotations),
			Finalizers:  []string{MachineFinalizer},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "machine.openshift.io/v1beta1", Kind: "MachineSet", Name: ms.Name, UID: ms.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	created, err := c.mc.MachineV1beta1().Machines(ms.Namespace).Create(ctx, m, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating a Machine for MachineSet %s: %w", ms.Name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created = append(c.created, created.Name)
	if len(c.failNext) > 0 {
		c.fail[created.Name], c.failNext = c.failNext[0], c.failNext[1:]
	} else if c.stallNext > 0 {
		c.stall[created.Name] = true
		c.stallNext--
	}
	return nil
}

func maps(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// reconcileMachine is the actuator: provision, fail, or tear down one Machine.
func (c *Controller) reconcileMachine(ctx context.Context, m *machinev1beta1.Machine, ready map[string]bool) error {
	c.mu.Lock()
	first, seen := c.firstSeen[m.Name]
	if !seen {
		first = time.Now()
		c.firstSeen[m.Name] = first
	}
	failMsg, failing := c.fail[m.Name]
	failReason, ok := c.failReason[m.Name]
	if !ok {
		failReason = machinev1beta1.CreateMachineError
	}
	stalled := c.stall[m.Name]
	c.mu.Unlock()
	api := c.mc.MachineV1beta1().Machines(m.Namespace)

	if m.DeletionTimestamp != nil {
		if phaseOf(m) != machinev1beta1.PhaseDeleting {
			return c.setStatus(ctx, m, func(s *machinev1beta1.MachineStatus) { s.Phase = ptr.To(machinev1beta1.PhaseDeleting) })
		}
		if time.Since(m.DeletionTimestamp.Time) < c.opts.DeleteDelay {
			return nil
		}
		if ref := m.Status.NodeRef; ref != nil {
			if err := c.kc.CoreV1().Nodes().Delete(ctx, ref.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		if c.opts.Ports != nil {
			if err := c.opts.Ports.DeletePorts(ctx, string(m.UID)); err != nil {
				return err
			}
		}
		if !slices.Contains(m.Finalizers, MachineFinalizer) {
			return nil
		}
		fin := slices.DeleteFunc(slices.Clone(m.Finalizers), func(f string) bool { return f == MachineFinalizer })
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": fin, "resourceVersion": m.ResourceVersion}})
		_, err := api.Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		c.mu.Lock()
		delete(c.firstSeen, m.Name)
		c.mu.Unlock()
		return ignoreConflict(err)
	}

	switch {
	case failing:
		if phaseOf(m) == machinev1beta1.PhaseFailed {
			return nil
		}
		return c.setStatus(ctx, m, func(s *machinev1beta1.MachineStatus) {
			s.Phase = ptr.To(machinev1beta1.PhaseFailed)
			s.ErrorReason = ptr.To(failReason)
			s.ErrorMessage = ptr.To(failMsg)
		})
	case m.Status.NodeRef != nil:
		if phaseOf(m) != machinev1beta1.PhaseRunning && ready[m.Status.NodeRef.Name] {
			return c.setStatus(ctx, m, func(s *machinev1beta1.MachineStatus) { s.Phase = ptr.To(machinev1beta1.PhaseRunning) })
		}
		return nil
	case stalled || time.Since(first) < c.opts.NodeDelay/2:
		if phaseOf(m) == machinev1beta1.PhaseProvisioning {
			return nil
		}
		return c.setStatus(ctx, m, func(s *machinev1beta1.MachineStatus) { s.Phase = ptr.To(machinev1beta1.PhaseProvisioning) })
	case time.Since(first) < c.opts.NodeDelay:
		// The server exists and the provider reports it; its Node has not joined yet.
		if phaseOf(m) == machinev1beta1.PhaseProvisioned {
			return nil
		}
		srv, err := c.server(ctx, m)
		if err != nil || srv == nil {
			return err
		}
		return c.setStatus(ctx, m, func(s *machinev1beta1.MachineStatus) {
			s.Phase = ptr.To(machinev1beta1.PhaseProvisioned)
			srv.report(s)
		})
	}

	// The Node joins: registered with the node IP it chooses among the server's NICs.
	srv, err := c.server(ctx, m)
	if err != nil || srv == nil {
		return err
	}
	var nodeIPs []string
	for _, a := range NodeAddresses(c.opts.NodeIP.NodeIP(srv.nics), MachineAddresses(srv.nics)) {
		nodeIPs = append(nodeIPs, a.String())
	}
	controlPlane := m.Labels[RoleLabel] == "master"
	if err := c.nodes.AddNode(ctx, m.Name, controlPlane, nodeIPs...); err != nil {
		return fmt.Errorf("registering the Node of Machine %s: %w", m.Name, err)
	}
	node := map[string]any{"metadata": map[string]any{"annotations": map[string]string{NodeMachineAnnotation: m.Namespace + "/" + m.Name}}}
	if n, err := c.kc.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{}); err == nil && n.Spec.ProviderID == "" {
		node["spec"] = map[string]any{"providerID": srv.providerID} // settable once, as the kubelet does
	}
	annotate, _ := json.Marshal(node)
	if _, err := c.kc.CoreV1().Nodes().Patch(ctx, m.Name, types.MergePatchType, annotate, metav1.PatchOptions{}); err != nil {
		return err
	}
	return c.setStatus(ctx, m, func(s *machinev1beta1.MachineStatus) {
		s.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: m.Name}
		s.Phase = ptr.To(machinev1beta1.PhaseRunning)
		srv.report(s)
	})
}

// server is what the provider knows of a Machine's server once it exists.
type server struct {
	providerID     string
	nics           []NIC
	addresses      []corev1.NodeAddress
	providerStatus []byte
}

// report writes what the provider reports of the server into a Machine's status.
func (srv *server) report(s *machinev1beta1.MachineStatus) {
	s.Addresses = srv.addresses
	s.ProviderStatus = &runtime.RawExtension{Raw: srv.providerStatus}
	now := metav1.Now()
	s.LastUpdated = &now
}

// server makes the server of a Machine, or finds it made: its ID is the Machine's UID (a UUID,
// as Nova's are), its ports are made on the networks the providerSpec names (with
// Options.Ports), and spec.providerID names it, as the actuator sets it once the server exists.
// nil, nil: the Machine was changed meanwhile; the next round goes on.
func (c *Controller) server(ctx context.Context, m *machinev1beta1.Machine) (*server, error) {
	serverID := string(m.UID)
	// The server's NICs: the primary one (the stand-in's address on the machine network, as no
	// cloud-side cluster network exists) and one per port on the networks the providerSpec
	// names, such as the storage network. Its addresses and its node IP follow from them as on
	// a booted machine (nodeip.go).
	primary := netip.MustParseAddr(testenv.NodeIP(m.Name))
	srv := &server{providerID: "openstack:///" + serverID,
		nics: []NIC{{Network: c.opts.PrimaryNetwork, Addr: primary, Subnet: netip.PrefixFrom(primary, 16).Masked(), DefaultRoute: true}}}
	if c.opts.Ports != nil {
		ports, err := c.opts.Ports.CreatePorts(ctx, m.Name, serverID, networksOf(m))
		var noAddress *NoAddressError
		if errors.As(err, &noAddress) {
			// As the real actuator: the server cannot be made, the ports made for it are
			// deleted, and the Machine fails with the cloud's words; it never gets a Node.
			if derr := c.opts.Ports.DeletePorts(ctx, serverID); derr != nil {
				return nil, derr
			}
			c.mu.Lock()
			c.fail[m.Name] = "error creating Openstack instance: " + noAddress.Error()
			c.failReason[m.Name] = machinev1beta1.InvalidConfigurationMachineError
			c.mu.Unlock()
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		srv.nics = append(srv.nics, ports...)
	}
	for _, a := range MachineAddresses(srv.nics) {
		srv.addresses = append(srv.addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.String()})
	}
	srv.addresses = append(srv.addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: m.Name})
	srv.providerStatus, _ = json.Marshal(map[string]any{
		"apiVersion": "machine.openshift.io/v1alpha1", "kind": "OpenstackMachineProviderStatus",
		"instanceId": serverID, "instanceState": "ACTIVE",
	})
	if m.Spec.ProviderID == nil {
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"providerID": srv.providerID}})
		if _, err := c.mc.MachineV1beta1().Machines(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return nil, ignoreConflict(err)
		}
		// The Machine has a new resourceVersion: its status is written next round.
		return nil, nil
	}
	return srv, nil
}

func (c *Controller) setStatus(ctx context.Context, m *machinev1beta1.Machine, mutate func(*machinev1beta1.MachineStatus)) error {
	updated := m.DeepCopy()
	mutate(&updated.Status)
	_, err := c.mc.MachineV1beta1().Machines(m.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return ignoreConflict(err)
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// String describes the controller's steering, for test failure messages.
func (c *Controller) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var fails []string
	for m, msg := range c.fail {
		fails = append(fails, m+": "+msg)
	}
	slices.Sort(fails)
	return fmt.Sprintf("machinectl: created %v, failing %v", c.created, strings.Join(fails, "; "))
}
