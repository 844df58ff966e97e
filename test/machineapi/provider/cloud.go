package provider

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud"
	"github.com/gophercloud/gophercloud/openstack"
	"github.com/gophercloud/gophercloud/openstack/compute/v2/extensions/availabilityzones"
	"github.com/gophercloud/gophercloud/openstack/compute/v2/extensions/servergroups"
	"github.com/gophercloud/gophercloud/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/openstack/imageservice/v2/images"
	"github.com/gophercloud/utils/openstack/clientconfig"
	machinev1alpha1 "github.com/openshift/api/machine/v1alpha1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/scope"
	"sigs.k8s.io/yaml"
)

// cloudOf reads the credentials of a Machine's cloud: the Secret named in cloudsSecret (its
// namespace defaulting to the Machine's), key clouds.yaml, the entry cloudName, and the
// optional key cacert (pkg/clients/utils.go GetCloud, getCloudFromSecret). Secrets are never
// logged: errors name the Secret and the key only.
func cloudOf(ctx context.Context, kc kubernetes.Interface, m *machinev1beta1.Machine, spec *machinev1alpha1.OpenstackProviderSpec) (clientconfig.Cloud, []byte, error) {
	ref := spec.CloudsSecret
	if ref == nil || ref.Name == "" {
		return clientconfig.Cloud{}, nil, fmt.Errorf("Machine %s: providerSpec.cloudsSecret names no Secret", m.Name)
	}
	if spec.CloudName == "" {
		return clientconfig.Cloud{}, nil, fmt.Errorf("Machine %s: cloudsSecret %s is set but cloudName is empty", m.Name, ref.Name)
	}
	ns := ref.Namespace
	if ns == "" {
		ns = m.Namespace
	}
	secret, err := kc.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return clientconfig.Cloud{}, nil, fmt.Errorf("reading the cloud credentials Secret %s/%s: %w", ns, ref.Name, err)
	}
	raw, ok := secret.Data["clouds.yaml"]
	if !ok {
		return clientconfig.Cloud{}, nil, fmt.Errorf("the cloud credentials Secret %s/%s has no key clouds.yaml", ns, ref.Name)
	}
	var clouds clientconfig.Clouds
	if err := yaml.Unmarshal(raw, &clouds); err != nil {
		return clientconfig.Cloud{}, nil, fmt.Errorf("the cloud credentials Secret %s/%s: clouds.yaml does not parse", ns, ref.Name)
	}
	cloud, ok := clouds.Clouds[spec.CloudName]
	if !ok {
		// The provider goes on with an empty cloud and fails at authentication; saying which
		// cloud is missing is kinder and changes nothing else.
		return clientconfig.Cloud{}, nil, fmt.Errorf("the cloud credentials Secret %s/%s: clouds.yaml has no cloud %q", ns, ref.Name, spec.CloudName)
	}
	return cloud, secret.Data["cacert"], nil
}

// session is one authenticated view of a Machine's cloud: CAPO's scope for its compute and
// networking services, and plain clients for the lookups the provider makes itself (flavor,
// image, availability zone, server groups: pkg/clients/machineservice.go).
type session struct {
	scope   scope.Scope
	region  string
	compute *gophercloud.ServiceClient
	image   *gophercloud.ServiceClient
}

func newSession(cloud clientconfig.Cloud, caCert []byte, log logr.Logger) (*session, error) {
	sc, err := scope.NewProviderScope(cloud, caCert, log)
	if err != nil {
		return nil, fmt.Errorf("authenticating to the cloud: %w", err)
	}
	pc, _, _, err := scope.NewProviderClient(cloud, caCert, log)
	if err != nil {
		return nil, fmt.Errorf("authenticating to the cloud: %w", err)
	}
	eo := gophercloud.EndpointOpts{Region: cloud.RegionName}
	cc, err := openstack.NewComputeV2(pc, eo)
	if err != nil {
		return nil, fmt.Errorf("finding the compute endpoint: %w", err)
	}
	ic, err := openstack.NewImageServiceV2(pc, eo)
	if err != nil {
		return nil, fmt.Errorf("finding the image endpoint: %w", err)
	}
	return &session{scope: sc, region: cloud.RegionName, compute: cc, image: ic}, nil
}

// flavorExists: exactly one flavor has the name (pkg/clients/machineservice.go DoesFlavorExist).
func (s *session) flavorExists(name string) error {
	pages, err := flavors.ListDetail(s.compute, flavors.ListOpts{AccessType: flavors.AllAccess}).AllPages()
	if err != nil {
		return fmt.Errorf("listing flavors: %w", err)
	}
	all, err := flavors.ExtractFlavors(pages)
	if err != nil {
		return err
	}
	return exactlyOne("flavor", name, count(all, func(f flavors.Flavor) bool { return f.Name == name }))
}

// imageExists: exactly one image has the name (machineservice.go DoesImageExist).
func (s *session) imageExists(name string) error {
	pages, err := images.List(s.image, images.ListOpts{Name: name}).AllPages()
	if err != nil {
		return fmt.Errorf("listing images named %q: %w", name, err)
	}
	all, err := images.ExtractImages(pages)
	if err != nil {
		return err
	}
	return exactlyOne("image", name, len(all))
}

// zoneExists: an empty zone is fine; else an available compute zone of that name
// (machineservice.go DoesAvailabilityZoneExist).
func (s *session) zoneExists(zone string) error {
	if zone == "" {
		return nil
	}
	pages, err := availabilityzones.List(s.compute).AllPages()
	if err != nil {
		return fmt.Errorf("listing availability zones: %w", err)
	}
	all, err := availabilityzones.ExtractAvailabilityZones(pages)
	if err != nil {
		return err
	}
	for _, z := range all {
		if z.ZoneState.Available && z.ZoneName == zone {
			return nil
		}
	}
	return fmt.Errorf("could not find compute availability zone: %s", zone)
}

func (s *session) serverGroupsNamed(name string) ([]servergroups.ServerGroup, error) {
	pages, err := servergroups.List(s.compute, servergroups.ListOpts{}).AllPages()
	if err != nil {
		return nil, fmt.Errorf("listing server groups: %w", err)
	}
	all, err := servergroups.ExtractServerGroups(pages)
	if err != nil {
		return nil, err
	}
	var out []servergroups.ServerGroup
	for _, g := range all {
		if g.Name == name {
			out = append(out, g)
		}
	}
	return out, nil
}

// serverGroupID finds the server group named name, or creates it with the policy
// soft-anti-affinity (compute API microversion 2.15, the first that knows it), as the provider
// does when the spec names a group but gives no ID (convert.go MachineToInstanceSpec,
// machineservice.go CreateServerGroup).
func (s *session) serverGroupID(name string) (string, error) {
	groups, err := s.serverGroupsNamed(name)
	if err != nil {
		return "", err
	}
	switch len(groups) {
	case 1:
		return groups[0].ID, nil
	case 0:
		client := *s.compute
		client.Microversion = "2.15"
		g, err := servergroups.Create(&client, servergroups.CreateOpts{Name: name, Policies: []string{"soft-anti-affinity"}}).Extract()
		if err != nil {
			return "", fmt.Errorf("error when creating a server group: %v", err)
		}
		return g.ID, nil
	}
	return "", fmt.Errorf("more than one server group of name %s exists", name)
}

// validate is the provider's check before it creates a server (pkg/machine/actuator.go
// validateMachine): the image (unless booting from a volume), the flavor, the zone, and the
// server group's ID and name agreeing.
func (s *session) validate(spec *machinev1alpha1.OpenstackProviderSpec) error {
	if spec.RootVolume == nil {
		if err := s.imageExists(spec.Image); err != nil {
			return err
		}
	}
	if err := s.flavorExists(spec.Flavor); err != nil {
		return err
	}
	if err := s.zoneExists(spec.AvailabilityZone); err != nil {
		return err
	}
	switch {
	case spec.ServerGroupID != "":
		g, err := servergroups.Get(s.compute, spec.ServerGroupID).Extract()
		if err != nil {
			return fmt.Errorf("error when looking up server group with ID %s: %v", spec.ServerGroupID, err)
		}
		if spec.ServerGroupName != "" && g.Name != spec.ServerGroupName {
			return fmt.Errorf("name of server group %s is %q, not %q as the spec says", spec.ServerGroupID, g.Name, spec.ServerGroupName)
		}
	case spec.ServerGroupName != "":
		groups, err := s.serverGroupsNamed(spec.ServerGroupName)
		if err != nil {
			return err
		}
		if len(groups) > 1 {
			return fmt.Errorf("%d server groups named %s exist", len(groups), spec.ServerGroupName)
		}
	}
	return nil
}

func count[T any](items []T, match func(T) bool) int {
	n := 0
	for _, it := range items {
		if match(it) {
			n++
		}
	}
	return n
}

func exactlyOne(kind, name string, n int) error {
	switch n {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("no %s named %q", kind, name)
	}
	return fmt.Errorf("%d %ss named %q", n, kind, name)
}

// userData is what the server boots with (pkg/machine/machineScript.go getUserData): the key
// userData of the Secret named in userDataSecret (namespace defaulting to the Machine's),
// rendered as a Go template over the Machine and its spec unless the Secret has the key
// disableTemplating; the postprocessor "ct" (Container Linux Config) is not reproduced and
// refused with the provider's words for an unknown one.
func userData(ctx context.Context, kc kubernetes.Interface, m *machinev1beta1.Machine, spec *machinev1alpha1.OpenstackProviderSpec) (string, error) {
	ref := spec.UserDataSecret
	if ref == nil {
		return "", nil
	}
	if ref.Name == "" {
		return "", fmt.Errorf("UserDataSecret name must be provided")
	}
	ns := ref.Namespace
	if ns == "" {
		ns = m.Namespace
	}
	secret, err := kc.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the user data Secret %s/%s: %w", ns, ref.Name, err)
	}
	return renderUserData(secret, m, spec)
}

func renderUserData(secret *corev1.Secret, m *machinev1beta1.Machine, spec *machinev1alpha1.OpenstackProviderSpec) (string, error) {
	data, ok := secret.Data["userData"]
	if !ok {
		return "", fmt.Errorf("machine's userdata secret %s in namespace %s did not contain key userData", secret.Name, secret.Namespace)
	}
	out := string(data)
	if _, off := secret.Data["disableTemplating"]; !off && len(data) > 0 {
		var err error
		if out, err = renderTemplate(out, m, spec); err != nil {
			return "", fmt.Errorf("error rendering startup script for machine %q: %w", m.Name, err)
		}
	}
	if p, ok := secret.Data["postprocessor"]; ok {
		return "", fmt.Errorf("postprocessor error: unknown postprocessor: '%s'", p)
	}
	return out, nil
}
