package installconfig

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manila-setup/manila-setup/internal/neutronid"
)

// ListKind is one of the two lists this package checks and patches.
type ListKind int

const (
	// Networks is additionalNetworkIDs: Neutron networks the machines get a port on.
	Networks ListKind = iota
	// SecurityGroups is additionalSecurityGroupIDs: Neutron security groups of those ports.
	SecurityGroups
)

// Key is the field name as the installer spells it.
func (k ListKind) Key() string {
	if k == Networks {
		return "additionalNetworkIDs"
	}
	return "additionalSecurityGroupIDs"
}

func (k ListKind) noun() string {
	if k == Networks {
		return "network"
	}
	return "security group"
}

var listKinds = [2]ListKind{Networks, SecurityGroups}

// Keys of the installer's types (pkg/types, v1.5.0-alpha.2) at the levels this package walks.
// The installer decodes through encoding/json, so it matches them case-insensitively.
var (
	installConfigKeys = []string{"apiVersion", "kind", "metadata", "additionalTrustBundle",
		"additionalTrustBundlePolicy", "sshKey", "baseDomain", "networking", "controlPlane", "arbiter",
		"compute", "platform", "pullSecret", "proxy", "imageContentSources", "imageDigestSources",
		"publish", "operatorPublishingStrategy", "fips", "cpuPartitioningMode", "credentialsMode",
		"bootstrapInPlace", "capabilities", "featureSet", "featureGates", "osImageStream", "pki"}
	platformKeys = []string{"aws", "azure", "baremetal", "gcp", "ibmcloud", "none", "external",
		"openstack", "powervc", "powervs", "vsphere", "ovirt", "nutanix"}
	machinePoolKeys         = []string{"name", "replicas", "platform", "hyperthreading", "architecture", "fencing", "diskSetup", "management"}
	machinePoolPlatformKeys = []string{"aws", "azure", "baremetal", "gcp", "ibmcloud", "openstack", "vsphere", "ovirt", "powervc", "powervs", "nutanix"}
	openstackPlatformKeys   = []string{"region", "defaultMachinePlatform", "cloud", "externalNetwork",
		"computeFlavor", "lbFloatingIP", "apiFloatingIP", "ingressFloatingIP", "externalDNS",
		"trunkSupport", "octaviaSupport", "clusterOSImage", "clusterOSImageProperties", "apiVIP",
		"apiVIPs", "ingressVIP", "ingressVIPs", "machinesSubnet", "controlPlanePort", "loadBalancer",
		"dnsRecordsType"}
	openstackMachinePoolKeys = []string{"type", "rootVolume", "additionalNetworkIDs", "additionalSecurityGroupIDs", "serverGroupPolicy", "zones"}
)

// PoolKind says which machine pool a list belongs to.
type PoolKind int

const (
	// DefaultPool is platform.openstack.defaultMachinePlatform: every pool inherits its lists
	// unless it sets its own.
	DefaultPool PoolKind = iota
	// ControlPlanePool is controlPlane.
	ControlPlanePool
	// ComputePool is one of compute[].
	ComputePool
)

// entry is one key: value of a mapping after << merge keys are resolved.
type entry struct {
	key    *yaml.Node // the key (alias resolved)
	value  *yaml.Node // the value as written, possibly an alias
	merged bool       // comes from a << merge rather than from this mapping itself
}

// step is how one key of the modelled path was found in its parent mapping.
type step struct {
	parent *yaml.Node // the mapping searched (alias resolved)
	key    *yaml.Node // the key as written; nil when the field is absent
	raw    *yaml.Node // the value as written (may be an alias); nil when absent
	node   *yaml.Node // the value, alias resolved; nil when absent or null
	shared bool       // this value or one above it is reached through an alias or a merge
	path   *field.Path
}

// present says whether the key is there, even with a null value.
func (s step) present() bool { return s.key != nil }

// idItem is one entry of a list.
type idItem struct {
	node      *yaml.Node // the scalar (alias resolved)
	value     string
	canonical string // when the value parses as a UUID v4 (canonical or not)
	path      *field.Path
}

// idList is one additionalNetworkIDs / additionalSecurityGroupIDs list as written.
type idList struct {
	kind  ListKind
	step  step     // key, raw value, resolved sequence (nil when null)
	items []idItem // the string items, in order
	valid bool     // a sequence whose items are all strings
}

// pool is a machine pool's OpenStack settings as written.
type pool struct {
	kind  PoolKind
	index int    // for compute pools
	name  string // the pool's name, "" when not given
	path  *field.Path
	// The path down to the OpenStack section. For compute and control-plane pools: the pool
	// mapping itself, its platform and platform.openstack. For the default pool only
	// openstack is set: platform.openstack.defaultMachinePlatform.
	node      *yaml.Node // the pool mapping (compute, controlPlane)
	nodeStep  step       // how the pool was found (compute[i] or controlPlane)
	platform  step
	openstack step
	lists     [2][]*idList // every spelling of each field found; normally zero or one
}

// list is the list the installer uses for k (of several case variants, the one sorting last,
// as encoding/json sees them), or nil.
func (p *pool) list(k ListKind) *idList {
	ls := p.lists[k]
	if len(ls) == 0 {
		return nil
	}
	best := ls[0]
	for _, l := range ls[1:] {
		if l.step.key.Value > best.step.key.Value {
			best = l
		}
	}
	return best
}

// model is what the checks found, for patch and for the cloud checks.
type model struct {
	platformStep    step // root.platform
	computeStep     step // root.compute
	cpStep          step // root.controlPlane
	osStep          step // root.platform.openstack
	def             *pool
	controlPlane    *pool
	compute         []*pool
	machineNetworks []CIDRRef
	clusterNetworks []CIDRRef
	serviceNetworks []CIDRRef
}

// pools lists every pool: default, control plane, then compute.
func (m *model) pools() []*pool {
	var ps []*pool
	if m.def != nil {
		ps = append(ps, m.def)
	}
	if m.controlPlane != nil {
		ps = append(ps, m.controlPlane)
	}
	return append(ps, m.compute...)
}

const maxAliasDepth = 100

// resolve follows aliases; nil for an alias loop.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i == maxAliasDepth {
			return nil
		}
		n = n.Alias
	}
	return n
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Tag == "!!merge"
}

// mergeBudget bounds how many entries merges may produce for one mapping, so that a document
// built to explode (merges of merges of merges) cannot stall the check.
const mergeBudget = 100000

// entries lists the entries of mapping m: its own in document order, then those merged in
// through << keys, in merge precedence order. overflow reports an exhausted budget; badMerges
// lists << values that are not mappings.
func entries(m *yaml.Node) (es []entry, badMerges []*yaml.Node, overflow bool) {
	budget := mergeBudget
	var merges []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if isMergeKey(k) {
			merges = append(merges, m.Content[i+1])
			continue
		}
		es = append(es, entry{key: resolve(k), value: m.Content[i+1]})
		budget--
	}
	if len(merges) == 0 {
		return es, nil, false
	}
	onStack := map[*yaml.Node]bool{m: true}
	var addMergeValue func(v *yaml.Node, depth int)
	addMap := func(v *yaml.Node, depth int) {
		r := resolve(v)
		if r == nil || r.Kind != yaml.MappingNode {
			badMerges = append(badMerges, v)
			return
		}
		if onStack[r] {
			return // a mapping merging itself: nothing new
		}
		onStack[r] = true
		defer delete(onStack, r)
		var inner []*yaml.Node
		for i := 0; i+1 < len(r.Content); i += 2 {
			if isMergeKey(r.Content[i]) {
				inner = append(inner, r.Content[i+1])
				continue
			}
			if budget--; budget <= 0 {
				overflow = true
				return
			}
			es = append(es, entry{key: resolve(r.Content[i]), value: r.Content[i+1], merged: true})
		}
		for _, in := range inner {
			addMergeValue(in, depth+1)
		}
	}
	// The value of a << key: a mapping, an alias of one, or a list of those (earlier ones
	// take precedence).
	addMergeValue = func(v *yaml.Node, depth int) {
		if depth > maxAliasDepth || budget <= 0 {
			overflow = true
			return
		}
		if v.Kind == yaml.SequenceNode {
			for _, item := range v.Content {
				addMap(item, depth)
			}
			return
		}
		addMap(v, depth)
	}
	for _, v := range merges {
		addMergeValue(v, 0)
	}
	return es, badMerges, overflow
}

// lookup finds every entry of m whose key matches name case-insensitively, as encoding/json
// matches struct fields (Unicode simple folding: strings.EqualFold).
func lookup(es []entry, name string) []entry {
	var out []entry
	for _, e := range es {
		if e.key != nil && e.key.Kind == yaml.ScalarNode && strings.EqualFold(e.key.Value, name) {
			out = append(out, e)
		}
	}
	return out
}

// chosen is the entry the installer ends up with when a field is spelled several ways: the
// YAML-to-JSON conversion sorts keys, and encoding/json keeps the last one it decodes.
func chosen(es []entry) entry {
	best := es[0]
	for _, e := range es[1:] {
		if e.key.Value > best.key.Value {
			best = e
		}
	}
	return best
}

// stepFor turns the chosen entry into a step below parent.
func stepFor(parent *yaml.Node, e entry, sharedAbove bool, path *field.Path) step {
	s := step{parent: parent, key: e.key, raw: e.value, path: path}
	s.shared = sharedAbove || e.merged || e.value.Kind == yaml.AliasNode
	if r := resolve(e.value); r != nil && !isNull(r) {
		s.node = r
	}
	return s
}

func isKnown(key string, known []string) bool {
	for _, k := range known {
		if strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}

// kindName describes a node's YAML type for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		case "!!timestamp":
			return "a timestamp"
		case "!!binary":
			return "binary data"
		case "!!str":
			return "a string"
		}
		return fmt.Sprintf("a value tagged %q", n.Tag)
	}
	return "an alias"
}

// render is a short one-line rendering of a node for messages.
func render(n *yaml.Node) string {
	var b strings.Builder
	renderTo(&b, n, 0)
	s := b.String()
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func renderTo(b *strings.Builder, n *yaml.Node, depth int) {
	if b.Len() > 80 || depth > 8 {
		return
	}
	if r := resolve(n); r != nil {
		n = r
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Value == "" && n.ShortTag() == "!!null" {
			b.WriteString("null")
			break
		}
		b.WriteString(n.Value)
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteString(", ")
			}
			renderTo(b, c, depth+1)
		}
		b.WriteByte(']')
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteString(", ")
			}
			renderTo(b, n.Content[i], depth+1)
			b.WriteString(": ")
			renderTo(b, n.Content[i+1], depth+1)
		}
		b.WriteByte('}')
	default:
		b.WriteString("*" + n.Value)
	}
}

// CanonicalID returns the canonical form of a UUID v4 given in any form the installer accepts
// (the rule lives in internal/neutronid; this is its door for modules outside this one, such
// as the installer oracle).
func CanonicalID(s string) (string, error) { return neutronid.Normalize(s) }
