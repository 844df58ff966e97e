package installconfig

import (
	"fmt"

	yaml "go.yaml.in/yaml/v3"
)

// The cluster and service networks the installer uses when the file sets none
// (openshift/installer pkg/types/defaults).
const (
	DefaultClusterNetwork = "10.128.0.0/14"
	DefaultServiceNetwork = "172.30.0.0/16"
)

// VIPRef is one API or ingress VIP as written (not checked: the installer checks it).
type VIPRef struct {
	Address string
	// Field is where the file holds it, e.g. platform.openstack.apiVIPs[0].
	Field        string
	Line, Column int
}

// networkingCIDRs reads the CIDRs of networking.<key>: the cidr of each item (machineNetwork,
// clusterNetwork) or each item itself (serviceNetwork, a list of strings). When the file sets
// no such list, the installer's default def is what the cluster gets; a value that is not a
// list gives nothing (the installer rejects it).
func networkingCIDRs(root []entry, key string, itemsAreMappings bool, def string) []CIDRRef {
	defaults := []CIDRRef{{CIDR: def, Field: "networking." + key, Default: true}}
	nw := lookup(root, "networking")
	if len(nw) == 0 {
		return defaults
	}
	m := resolve(chosen(nw).value)
	if m == nil || m.Kind != yaml.MappingNode {
		return defaults
	}
	es, _, _ := entries(m)
	list := lookup(es, key)
	if len(list) == 0 {
		return defaults
	}
	seq := resolve(chosen(list).value)
	if seq == nil || seq.Kind != yaml.SequenceNode {
		return nil
	}
	var out []CIDRRef
	for i, item := range seq.Content {
		v, at := resolve(item), fmt.Sprintf("networking.%s[%d]", key, i)
		if itemsAreMappings {
			v, at = mappingScalar(v, "cidr"), at+".cidr"
		}
		if v != nil && v.Kind == yaml.ScalarNode {
			out = append(out, CIDRRef{CIDR: v.Value, Field: at, Line: v.Line, Column: v.Column})
		}
	}
	return out
}

// mappingScalar is the scalar value of key in mapping m, or nil.
func mappingScalar(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	es, _, _ := entries(m)
	found := lookup(es, key)
	if len(found) == 0 {
		return nil
	}
	v := resolve(chosen(found).value)
	if v == nil || v.Kind != yaml.ScalarNode {
		return nil
	}
	return v
}

// vips reads platform.openstack's apiVIPs, ingressVIPs and the legacy apiVIP and ingressVIP,
// as written: the nodes take their node IP from the interface whose subnet holds one.
func vips(openstack *yaml.Node) []VIPRef {
	if openstack == nil || openstack.Kind != yaml.MappingNode {
		return nil
	}
	es, _, _ := entries(openstack)
	var out []VIPRef
	for _, key := range []string{"apiVIPs", "ingressVIPs"} {
		found := lookup(es, key)
		if len(found) == 0 {
			continue
		}
		seq := resolve(chosen(found).value)
		if seq == nil || seq.Kind != yaml.SequenceNode {
			continue
		}
		for i, item := range seq.Content {
			if v := resolve(item); v != nil && v.Kind == yaml.ScalarNode {
				out = append(out, VIPRef{Address: v.Value, Field: fmt.Sprintf("platform.openstack.%s[%d]", key, i), Line: v.Line, Column: v.Column})
			}
		}
	}
	for _, key := range []string{"apiVIP", "ingressVIP"} {
		if v := mappingScalar(openstack, key); v != nil && v.Value != "" {
			out = append(out, VIPRef{Address: v.Value, Field: "platform.openstack." + key, Line: v.Line, Column: v.Column})
		}
	}
	return out
}
