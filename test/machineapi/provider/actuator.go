// Package provider is an OpenStack machine actuator for the Machine API's machine controller
// (github.com/openshift/machine-api-operator pkg/controller/machine): it creates, reads and
// deletes the Nova server and Neutron ports of a Machine through cluster-api-provider-openstack's
// compute and networking services, as the OpenShift provider
// (github.com/openshift/machine-api-provider-openstack, pkg/machine) does. That provider is not
// served by the Go module proxy, so its rules are reproduced here from its public source, each
// citing the file it comes from (paths below are in that repository unless they say otherwise).
package provider

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	machinev1alpha1 "github.com/openshift/api/machine/v1alpha1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	configclient "github.com/openshift/client-go/config/clientset/versioned/typed/config/v1"
	maomachine "github.com/openshift/machine-api-operator/pkg/controller/machine"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha7"
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/cloud/services/compute"
	caporecord "sigs.k8s.io/cluster-api-provider-openstack/pkg/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ProviderIDPrefix starts the spec.providerID of an OpenStack Machine; the server's ID follows
// (pkg/machine/actuator.go).
const ProviderIDPrefix = "openstack:///"

// Annotations the provider sets on a Machine once its server exists (actuator.go
// setMachineAnnotations): the server's ID, and its state under the Machine API's name.
const (
	ResourceIDAnnotation    = "openstack-resourceId"
	legacyStatusAnnotation  = "instance-status"
	InstanceStateAnnotation = maomachine.MachineInstanceStateAnnotationName
)

// Actuator implements the machine controller's Actuator interface for OpenStack.
type Actuator struct {
	Client   client.Client
	Kube     kubernetes.Interface
	Config   configclient.ConfigV1Interface
	Recorder record.EventRecorder
	Log      logr.Logger
}

var _ maomachine.Actuator = (*Actuator)(nil)

// New returns an actuator; CAPO's services record their events (FailedCreatePort, ...) on the
// Machine through recorder, as the provider arranges (actuator.go NewActuator).
func New(c client.Client, kc kubernetes.Interface, cc configclient.ConfigV1Interface, recorder record.EventRecorder, log logr.Logger) *Actuator {
	caporecord.InitFromRecorder(recorder)
	return &Actuator{Client: c, Kube: kc, Config: cc, Recorder: recorder, Log: log}
}

// Create and Update both reconcile the server (actuator.go).
func (a *Actuator) Create(ctx context.Context, m *machinev1beta1.Machine) error {
	return a.reconcile(ctx, m)
}

// Update reconciles the server: nothing of an existing server changes; labels, annotations
// and addresses are brought up to date.
func (a *Actuator) Update(ctx context.Context, m *machinev1beta1.Machine) error {
	return a.reconcile(ctx, m)
}

// Exists: the server is found, by spec.providerID once set, by the Machine's name before
// (actuator.go Exists, getInstanceStatus).
func (a *Actuator) Exists(ctx context.Context, m *machinev1beta1.Machine) (bool, error) {
	spec, err := DecodeSpec(m.Spec.ProviderSpec)
	if err != nil {
		return false, err
	}
	s, err := a.session(ctx, m, spec)
	if err != nil {
		return false, err
	}
	st, err := instanceStatus(s, m)
	if err != nil {
		return false, err
	}
	return st != nil, nil
}

// Delete deletes the server and its ports (CAPO compute DeleteInstance), with a spec of the
// Machine's name, its ports' names (VIPs left out: only the names matter, for a server in
// ERROR whose ports Nova never got) and its root volume (actuator.go Delete).
func (a *Actuator) Delete(ctx context.Context, m *machinev1beta1.Machine) error {
	spec, err := DecodeSpec(m.Spec.ProviderSpec)
	if err != nil {
		return err
	}
	s, err := a.session(ctx, m, spec)
	if err != nil {
		return err
	}
	st, err := instanceStatus(s, m)
	if err != nil {
		return fmt.Errorf("error getting instance status for %q: %w", m.Name, err)
	}
	svc, err := compute.NewService(s.scope)
	if err != nil {
		return err
	}
	is := compute.InstanceSpec{Name: m.Name, Ports: Ports(spec, VIPs{UserManagedLB: true}), RootVolume: rootVolumeOf(spec)}
	if err := svc.DeleteInstance(&capov1.OpenStackCluster{}, m, st, &is); err != nil {
		return err
	}
	a.Recorder.Eventf(m, corev1.EventTypeNormal, "Deleted", "Deleted machine %v", m.Name)
	return nil
}

func (a *Actuator) session(ctx context.Context, m *machinev1beta1.Machine, spec *machinev1alpha1.OpenstackProviderSpec) (*session, error) {
	cloud, caCert, err := cloudOf(ctx, a.Kube, m, spec)
	if err != nil {
		return nil, err
	}
	return newSession(cloud, caCert, a.Log.WithValues("machine", m.Name))
}

// instanceStatus finds the server: by the ID in spec.providerID (which must start with
// openstack:///), else by the Machine's name; nil when there is none (actuator.go
// getInstanceStatus).
func instanceStatus(s *session, m *machinev1beta1.Machine) (*compute.InstanceStatus, error) {
	svc, err := compute.NewService(s.scope)
	if err != nil {
		return nil, err
	}
	if m.Spec.ProviderID == nil {
		return svc.GetInstanceStatusByName(m, m.Name)
	}
	id, ok := strings.CutPrefix(*m.Spec.ProviderID, ProviderIDPrefix)
	if !ok {
		return nil, fmt.Errorf("OpenStack Machine %s has invalid provider ID: %s", m.Name, *m.Spec.ProviderID)
	}
	return svc.GetInstanceStatus(id)
}

// reconcile is the provider's Create and Update (actuator.go reconcile): find the server; make
// it when there is none and the Machine never had one (a Machine whose server vanished fails in
// the machine controller instead, as Exists says false); then the providerID, labels,
// annotations and addresses.
func (a *Actuator) reconcile(ctx context.Context, m *machinev1beta1.Machine) error {
	spec, err := DecodeSpec(m.Spec.ProviderSpec)
	if err != nil {
		return maomachine.InvalidMachineConfiguration("Cannot unmarshal providerSpec for %s: %v", m.Name, err)
	}
	if spec.FloatingIP != "" {
		// The provider associates it with the server's management port (actuator.go
		// reconcileFloatingIP); not reproduced: the clusters here have no floating IPs.
		return maomachine.InvalidMachineConfiguration("floatingIP %s: not supported by this actuator", spec.FloatingIP)
	}
	s, err := a.session(ctx, m, spec)
	if err != nil {
		return err
	}
	st, err := instanceStatus(s, m)
	if err != nil {
		return err
	}
	if st == nil && m.Spec.ProviderID == nil {
		if st, err = a.createServer(ctx, m, spec, s); err != nil {
			return err
		}
	}
	if st == nil {
		return &maomachine.RequeueAfterError{RequeueAfter: 30 * time.Second}
	}
	// spec.providerID, once, with an optimistic lock (actuator.go setProviderID).
	if m.Spec.ProviderID == nil {
		patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
		id := ProviderIDPrefix + st.ID()
		m.Spec.ProviderID = &id
		if err := a.Client.Patch(ctx, m, patch); err != nil {
			return fmt.Errorf("error setting provider ID for %q: %w", m.Name, err)
		}
	}

	patch := client.MergeFrom(m.DeepCopy())
	setLabels(m, s.region, st.AvailabilityZone(), spec.Flavor)
	setAnnotations(m, st)
	if err := a.Client.Patch(ctx, m, patch); err != nil {
		return err
	}

	patch = client.MergeFrom(m.DeepCopy())
	addresses, err := Addresses(m.Name, st)
	if err != nil {
		return err
	}
	m.Status.Addresses = addresses
	return a.Client.Status().Patch(ctx, m, patch)
}

// createServer checks the spec against the cloud, converts it and has CAPO make the ports and
// the server, waiting until it is ACTIVE (actuator.go createInstance). A spec naming what the
// cloud lacks (image, flavor, zone, server group) is an invalid configuration: the machine
// controller fails the Machine. Every other refusal, a Neutron one included, is a create error:
// the machine controller keeps the Machine Provisioning and tries again, CAPO having deleted the
// ports it made (pkg/cloud/services/compute/instance.go in cluster-api-provider-openstack).
func (a *Actuator) createServer(ctx context.Context, m *machinev1beta1.Machine, spec *machinev1alpha1.OpenstackProviderSpec, s *session) (*compute.InstanceStatus, error) {
	if err := s.validate(spec); err != nil {
		return nil, maomachine.InvalidMachineConfiguration("Machine validation failed: %v", err)
	}
	infra, err := a.Config.Infrastructures().Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to retrieve cluster Infrastructure object: %v", err)
	}
	ud, err := userData(ctx, a.Kube, m, spec)
	if err != nil {
		return nil, fmt.Errorf("error getting bootstrap for %s: %v", m.Name, err)
	}
	var groupID string
	if name := ServerGroupName(spec); name != "" {
		if groupID, err = s.serverGroupID(name); err != nil {
			return nil, err
		}
	}
	is, err := InstanceSpec(m, spec, VIPsOf(infra), ud, groupID)
	if err != nil {
		return nil, err
	}
	svc, err := compute.NewService(s.scope)
	if err != nil {
		return nil, err
	}
	st, err := svc.CreateInstance(m, &capov1.OpenStackCluster{}, is, ClusterTag(m))
	if err != nil {
		return nil, maomachine.CreateMachine("error creating Openstack instance: %v", err)
	}
	a.Recorder.Eventf(m, corev1.EventTypeNormal, "Created", "Created OpenStack instance %s", st.ID())
	return st, nil
}

// VIPsOf reads the VIPs from the Infrastructure's OpenStack platform status; a user-managed
// load balancer means none (actuator.go convertMachineToCapoInstanceSpec).
func VIPsOf(infra *configv1.Infrastructure) VIPs {
	ps := infra.Status.PlatformStatus
	if ps == nil || ps.OpenStack == nil {
		return VIPs{}
	}
	os := ps.OpenStack
	return VIPs{
		API:           os.APIServerInternalIPs,
		Ingress:       os.IngressIPs,
		UserManagedLB: os.LoadBalancer != nil && os.LoadBalancer.Type == configv1.LoadBalancerTypeUserManaged,
	}
}

// setLabels sets region, zone and instance type, unless all three are set already
// (actuator.go setMachineLabels).
func setLabels(m *machinev1beta1.Machine, region, zone, flavor string) {
	if m.Labels[maomachine.MachineRegionLabelName] != "" && m.Labels[maomachine.MachineAZLabelName] != "" && m.Labels[maomachine.MachineInstanceTypeLabelName] != "" {
		return
	}
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[maomachine.MachineRegionLabelName] = region
	m.Labels[maomachine.MachineAZLabelName] = zone
	m.Labels[maomachine.MachineInstanceTypeLabelName] = flavor
}

// setAnnotations: the server's ID and state; the legacy instance-status annotation goes
// (actuator.go setMachineAnnotations).
func setAnnotations(m *machinev1beta1.Machine, st *compute.InstanceStatus) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	delete(m.Annotations, legacyStatusAnnotation)
	m.Annotations[ResourceIDAnnotation] = st.ID()
	m.Annotations[InstanceStateAnnotation] = string(st.State())
}

// Addresses are the Machine's status.addresses: every address Nova lists for the server
// (networks in lexical order of their names, IPv4 before IPv6 in each; fixed ones InternalIP,
// floating ones ExternalIP: CAPO compute/instance_types.go), then the Machine's name as Hostname
// and as InternalDNS (actuator.go setMachineStatus).
func Addresses(name string, st *compute.InstanceStatus) ([]corev1.NodeAddress, error) {
	ns, err := st.NetworkStatus()
	if err != nil {
		return nil, err
	}
	return append(ns.Addresses(),
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: name},
		corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: name}), nil
}

// renderTemplate renders user data as a Go template over .Machine and .MachineSpec
// (machineScript.go masterStartupScript: the Machine always has a name by then).
func renderTemplate(text string, m *machinev1beta1.Machine, spec *machinev1alpha1.OpenstackProviderSpec) (string, error) {
	t, err := template.New("userData").Parse(text)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = t.Execute(&buf, struct {
		Token       string
		Machine     *machinev1beta1.Machine
		MachineSpec *machinev1alpha1.OpenstackProviderSpec
	}{Machine: m, MachineSpec: spec})
	return buf.String(), err
}
