package provider

import (
	"fmt"
	"strings"

	machinev1alpha1 "github.com/openshift/api/machine/v1alpha1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	capov1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1alpha7"
	"sigs.k8s.io/cluster-api-provider-openstack/pkg/cloud/services/compute"
	"sigs.k8s.io/yaml"
)

// The conversion of an OpenstackProviderSpec into what the cluster-api-provider-openstack (CAPO)
// services take: one compute.InstanceSpec with its ports. It is pure: the lookups it needs (the
// server group) are done before, by the caller. Each rule names the file of the OpenStack Machine
// API provider (github.com/openshift/machine-api-provider-openstack) it reproduces.

// VIPs are the cluster's API and ingress VIPs (Infrastructure status.platformStatus.openstack
// apiServerInternalIPs and ingressIPs).
type VIPs struct {
	API, Ingress []string
	// UserManagedLB: the load balancer is the user's (platformStatus.openstack.loadBalancer.type
	// UserManaged), so no VIP is the cluster's to carry.
	UserManagedLB bool
}

// DecodeSpec reads a Machine's providerSpec (pkg/clients/utils.go, MachineSpecFromProviderSpec).
func DecodeSpec(ps machinev1beta1.ProviderSpec) (*machinev1alpha1.OpenstackProviderSpec, error) {
	if ps.Value == nil {
		return nil, fmt.Errorf("the Machine has no providerSpec value")
	}
	var spec machinev1alpha1.OpenstackProviderSpec
	if err := yaml.Unmarshal(ps.Value.Raw, &spec); err != nil {
		return nil, fmt.Errorf("decoding the OpenstackProviderSpec: %w", err)
	}
	return &spec, nil
}

// ClusterTag is the tag the provider adds to every server and port besides the spec's own:
// "<namespace>-<cluster ID label>" (pkg/utils/utils.go GetClusterNameWithNamespace, used in
// pkg/machine/convert.go extractDefaultTags).
func ClusterTag(m *machinev1beta1.Machine) string {
	return m.Namespace + "-" + m.Labels[machinev1beta1.MachineClusterIDLabel]
}

// InstanceSpec converts a Machine's spec into CAPO's instance spec (pkg/machine/convert.go
// MachineToInstanceSpec). serverGroupID is the server group found or made for serverGroupName
// when the spec gives no ID (see ServerGroupName).
func InstanceSpec(m *machinev1beta1.Machine, spec *machinev1alpha1.OpenstackProviderSpec, vips VIPs, userData, serverGroupID string) (*compute.InstanceSpec, error) {
	is := &compute.InstanceSpec{
		Name:          m.Name,
		Image:         imageOf(spec),
		RootVolume:    rootVolumeOf(spec),
		Flavor:        spec.Flavor,
		SSHKeyName:    spec.KeyName,
		UserData:      userData,
		Metadata:      spec.ServerMetadata,
		ConfigDrive:   spec.ConfigDrive != nil && *spec.ConfigDrive,
		FailureDomain: spec.AvailabilityZone,
		ServerGroupID: spec.ServerGroupID,
		Trunk:         spec.Trunk,
		// Top-level security groups: CAPO gives them to every port that names none of its own
		// (pkg/cloud/services/networking/port.go GetOrCreatePort).
		SecurityGroups: securityGroupFilters(spec.SecurityGroups),
		Ports:          Ports(spec, vips),
	}
	// The spec's tags, then the provider's own two (convert.go extractDefaultTags).
	is.Tags = append(append([]string{}, spec.Tags...), "cluster-api-provider-openstack", ClusterTag(m))
	if is.ServerGroupID == "" {
		is.ServerGroupID = serverGroupID
	}
	for i, bd := range spec.AdditionalBlockDevices {
		var kind capov1.BlockDeviceType
		switch bd.Storage.Type {
		case machinev1alpha1.LocalBlockDevice:
			kind = capov1.LocalBlockDevice
		case machinev1alpha1.VolumeBlockDevice:
			kind = capov1.VolumeBlockDevice
		case "":
			return nil, fmt.Errorf("additionalBlockDevices[%d] (%s): no storage", i, bd.Name)
		default:
			return nil, fmt.Errorf("additionalBlockDevices[%d] (%s): unknown storage type %q", i, bd.Name, bd.Storage.Type)
		}
		d := capov1.AdditionalBlockDevice{Name: bd.Name, SizeGiB: bd.SizeGiB, Storage: capov1.BlockDeviceStorage{Type: kind}}
		if v := bd.Storage.Volume; v != nil {
			d.Storage.Volume = &capov1.BlockDeviceVolume{AvailabilityZone: v.AvailabilityZone, Type: v.Type}
		}
		is.AdditionalBlockDevices = append(is.AdditionalBlockDevices, d)
	}
	return is, nil
}

// ServerGroupName is the server group the provider finds by name, or creates when none has it,
// before making the server: only when the spec names one and gives no ID (convert.go).
func ServerGroupName(spec *machinev1alpha1.OpenstackProviderSpec) string {
	if spec.ServerGroupID != "" {
		return ""
	}
	return spec.ServerGroupName
}

// imageOf: with a root volume the image is the volume's source (the installer writes the
// image's name there), else spec.image, a name (convert.go extractImageFromProviderSpec).
func imageOf(spec *machinev1alpha1.OpenstackProviderSpec) string {
	if spec.RootVolume != nil {
		return spec.RootVolume.SourceUUID
	}
	return spec.Image
}

func rootVolumeOf(spec *machinev1alpha1.OpenstackProviderSpec) *capov1.RootVolume {
	if spec.RootVolume == nil {
		return nil
	}
	return &capov1.RootVolume{Size: spec.RootVolume.Size, VolumeType: spec.RootVolume.VolumeType, AvailabilityZone: spec.RootVolume.Zone}
}

// Ports are the server's ports in order: those of spec.networks first (the first is the one the
// kubelet used with the legacy cloud provider), then spec.ports (convert.go createCAPOPorts).
func Ports(spec *machinev1alpha1.OpenstackProviderSpec, vips VIPs) []capov1.PortOpts {
	var out []capov1.PortOpts
	for i := range spec.Networks {
		out = append(out, networkPorts(&spec.Networks[i], vips, &spec.Trunk)...)
	}
	for i := range spec.Ports {
		out = append(out, portOpts(&spec.Ports[i], vips.UserManagedLB))
	}
	return out
}

// addressPairs: a networks[] port carries every API and ingress VIP as an allowed address pair,
// unless the network says noAllowedAddressPairs or the load balancer is the user's
// (convert.go networkParamToCapov1PortOpts; actuator.go for UserManaged).
func addressPairs(net *machinev1alpha1.NetworkParam, vips VIPs) []capov1.AddressPair {
	if net.NoAllowedAddressPairs || vips.UserManagedLB {
		return nil
	}
	var pairs []capov1.AddressPair
	for _, ip := range vips.API {
		pairs = append(pairs, capov1.AddressPair{IPAddress: ip})
	}
	for _, ip := range vips.Ingress {
		pairs = append(pairs, capov1.AddressPair{IPAddress: ip})
	}
	return pairs
}

// disablePortSecurity turns the spec's portSecurity into CAPO's opposite flag, keeping nil as
// nil (the cloud's default) (convert.go).
func disablePortSecurity(portSecurity *bool) *bool {
	if portSecurity == nil {
		return nil
	}
	v := !*portSecurity
	return &v
}

// networkPorts converts one networks[] entry (convert.go networkParamToCapov1PortOpts):
//   - the network is uuid, else filter.id, plus the filter's other fields;
//   - with no network ID and an empty filter, one port per subnet (CAPO then finds the network
//     from the subnet), each tagged with the network's portTags and the subnet's;
//   - else one port with a fixed IP on each subnet, tagged with every portTags;
//   - the trunk flag is the spec's top-level trunk.
func networkPorts(net *machinev1alpha1.NetworkParam, vips VIPs, trunk *bool) []capov1.PortOpts {
	network := capov1.NetworkFilter{
		ID:          first(net.UUID, net.Filter.ID),
		Name:        net.Filter.Name,
		Description: net.Filter.Description,
		ProjectID:   first(net.Filter.ProjectID, net.Filter.TenantID),
		Tags:        net.Filter.Tags,
		TagsAny:     net.Filter.TagsAny,
		NotTags:     net.Filter.NotTags,
		NotTagsAny:  net.Filter.NotTagsAny,
	}
	pairs := addressPairs(net, vips)
	port := func(fixedIPs []capov1.FixedIP, tags []string) capov1.PortOpts {
		n := network
		return capov1.PortOpts{
			Network:             &n,
			FixedIPs:            fixedIPs,
			AllowedAddressPairs: pairs,
			Trunk:               trunk,
			DisablePortSecurity: disablePortSecurity(net.PortSecurity),
			VNICType:            net.VNICType,
			Tags:                tags,
			Profile:             bindingProfile(net.Profile),
		}
	}
	if network.ID == "" && net.Filter == (machinev1alpha1.Filter{}) {
		var out []capov1.PortOpts
		for _, s := range net.Subnets {
			tags := append(append([]string{}, net.PortTags...), s.PortTags...)
			out = append(out, port([]capov1.FixedIP{{Subnet: subnetFilter(&s)}}, tags))
		}
		return out
	}
	var fixedIPs []capov1.FixedIP
	tags := append([]string{}, net.PortTags...)
	for _, s := range net.Subnets {
		fixedIPs = append(fixedIPs, capov1.FixedIP{Subnet: subnetFilter(&s)})
		tags = append(tags, s.PortTags...)
	}
	return []capov1.PortOpts{port(fixedIPs, tags)}
}

func subnetFilter(s *machinev1alpha1.SubnetParam) *capov1.SubnetFilter {
	f := s.Filter
	return &capov1.SubnetFilter{
		ID:              first(s.UUID, f.ID),
		Name:            f.Name,
		Description:     f.Description,
		ProjectID:       first(f.ProjectID, f.TenantID),
		IPVersion:       f.IPVersion,
		GatewayIP:       f.GatewayIP,
		CIDR:            f.CIDR,
		IPv6AddressMode: f.IPv6AddressMode,
		IPv6RAMode:      f.IPv6RAMode,
		Tags:            f.Tags,
		TagsAny:         f.TagsAny,
		NotTags:         f.NotTags,
		NotTagsAny:      f.NotTagsAny,
	}
}

// portOpts converts one ports[] entry (convert.go portOptsToCapov1PortOpts): its own security
// groups by ID (else the top-level ones apply), its own allowed address pairs (none with a
// user-managed load balancer), fixed IPs by subnet ID, its own trunk flag.
func portOpts(p *machinev1alpha1.PortOpts, userManagedLB bool) capov1.PortOpts {
	out := capov1.PortOpts{
		Network:             &capov1.NetworkFilter{ID: p.NetworkID},
		NameSuffix:          p.NameSuffix,
		Description:         p.Description,
		AdminStateUp:        p.AdminStateUp,
		MACAddress:          p.MACAddress,
		DisablePortSecurity: disablePortSecurity(p.PortSecurity),
		Profile:             bindingProfile(p.Profile),
		Tags:                p.Tags,
		Trunk:               p.Trunk,
		VNICType:            p.VNICType,
	}
	if p.SecurityGroups != nil {
		for _, id := range *p.SecurityGroups {
			out.SecurityGroupFilters = append(out.SecurityGroupFilters, capov1.SecurityGroupFilter{ID: id})
		}
	}
	if !userManagedLB {
		for _, ap := range p.AllowedAddressPairs {
			out.AllowedAddressPairs = append(out.AllowedAddressPairs, capov1.AddressPair{IPAddress: ap.IPAddress, MACAddress: ap.MACAddress})
		}
	}
	for _, ip := range p.FixedIPs {
		out.FixedIPs = append(out.FixedIPs, capov1.FixedIP{Subnet: &capov1.SubnetFilter{ID: ip.SubnetID}, IPAddress: ip.IPAddress})
	}
	return out
}

// securityGroupFilters: uuid and name win over the filter's id and name (convert.go
// securityGroupParamToCapov1SecurityGroupFilter).
func securityGroupFilters(groups []machinev1alpha1.SecurityGroupParam) []capov1.SecurityGroupFilter {
	var out []capov1.SecurityGroupFilter
	for _, g := range groups {
		out = append(out, capov1.SecurityGroupFilter{
			ID:          first(g.UUID, g.Filter.ID),
			Name:        first(g.Name, g.Filter.Name),
			Description: g.Filter.Description,
			ProjectID:   first(g.Filter.ProjectID, g.Filter.TenantID),
			Tags:        g.Filter.Tags,
			TagsAny:     g.Filter.TagsAny,
			NotTags:     g.Filter.NotTags,
			NotTagsAny:  g.Filter.NotTagsAny,
		})
	}
	return out
}

// bindingProfile: "capabilities" containing switchdev asks for OVS hardware offload, "trusted":
// "true" a trusted VF; nothing else is passed on (convert.go portProfileToCapov1BindingProfile).
func bindingProfile(profile map[string]string) capov1.BindingProfile {
	var b capov1.BindingProfile
	if strings.Contains(profile["capabilities"], "switchdev") {
		b.OVSHWOffload = true
	}
	if profile["trusted"] == "true" {
		b.TrustedVF = true
	}
	return b
}

func first(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
