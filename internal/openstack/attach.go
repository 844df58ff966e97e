package openstack

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// Server is one server of the cluster as Kubernetes knows it: the Nova ID from a Machine's or
// Node's providerID ("openstack:///<id>") when there is one, and its name (on OpenShift the
// Machine, the Node and the Nova server share it).
type Server struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// ServerSelector says which servers to look at. It needs no Nova: a server's attachments are its
// Neutron ports, found by device_id (the server ID), by port name (OpenShift names a machine's
// ports "<machine name>-<suffix>"), by the cluster's tag, or by the cluster's name prefix (the
// infra ID). Known Servers are matched exactly; NamePrefix and Tag also find servers not listed.
type ServerSelector struct {
	Servers    []Server `json:"servers,omitempty"`
	NamePrefix string   `json:"namePrefix,omitempty"` // e.g. "mycluster-x7k2p-"
	Tag        string   `json:"tag,omitempty"`        // e.g. "openshiftClusterID=mycluster-x7k2p"
}

// Attachment says which of the selected servers have a port on one network.
type Attachment struct {
	NetworkID string             `json:"networkID"`
	Attached  int                `json:"attached"`
	Total     int                `json:"total"`
	Servers   []ServerAttachment `json:"servers"`
	// Method says how ports were tied to servers, for the reader.
	Method string `json:"method"`
}

// ServerAttachment is one server and its ports on the network.
type ServerAttachment struct {
	Server
	Attached bool   `json:"attached"`
	Ports    []Port `json:"ports,omitempty"`
}

// Attachments reports, for each network, which selected servers have a port on it.
// Requests: one per page of matching ports (per 50 server IDs), whatever the number of networks.
func (c *Client) Attachments(ctx context.Context, sel ServerSelector, networkIDs []string) (map[string]Attachment, error) {
	networkIDs = dedupe(networkIDs)
	servers := dedupeServers(sel.Servers)
	var ports []Port
	var err error
	byID := true
	for _, s := range servers {
		byID = byID && s.ID != ""
	}
	switch {
	case sel.NamePrefix != "" || sel.Tag != "":
		// The cluster's servers are the devices of its ports anywhere; all ports are listed once.
		all, err := c.Ports(ctx, PortFilter{})
		if err != nil {
			return nil, err
		}
		servers = addClusterServers(servers, all, sel)
		for _, p := range all {
			if slices.Contains(networkIDs, p.NetworkID) {
				ports = append(ports, p)
			}
		}
	case len(servers) > 0 && byID:
		ids := make([]string, 0, len(servers))
		for _, s := range servers {
			ids = append(ids, s.ID)
		}
		ports, err = c.Ports(ctx, PortFilter{NetworkIDs: networkIDs, DeviceIDs: ids})
	case len(servers) > 0:
		ports, err = c.Ports(ctx, PortFilter{NetworkIDs: networkIDs})
	}
	if err != nil {
		return nil, err
	}

	out := map[string]Attachment{}
	for _, netID := range networkIDs {
		a := Attachment{NetworkID: netID, Total: len(servers), Method: describeMethod(sel, byID)}
		for _, s := range servers {
			sa := ServerAttachment{Server: s}
			for _, p := range ports {
				if p.NetworkID == netID && portOf(p, s) {
					sa.Ports = append(sa.Ports, p)
				}
			}
			sa.Attached = len(sa.Ports) > 0
			if sa.Attached {
				a.Attached++
			}
			a.Servers = append(a.Servers, sa)
		}
		out[netID] = a
	}
	return out, nil
}

// portOf ties a port to a server: by device_id, else by the server's name.
func portOf(p Port, s Server) bool {
	if s.ID != "" {
		return p.DeviceID == s.ID
	}
	return s.Name != "" && (p.Name == s.Name || strings.HasPrefix(p.Name, s.Name+"-"))
}

// addClusterServers adds the devices of compute ports that carry the cluster's name prefix or
// tag to the known servers.
func addClusterServers(servers []Server, ports []Port, sel ServerSelector) []Server {
	known := map[string]bool{}
	for _, s := range servers {
		known[s.ID] = s.ID != ""
	}
	for _, p := range ports {
		if p.DeviceID == "" || !strings.HasPrefix(p.DeviceOwner, "compute:") || known[p.DeviceID] {
			continue
		}
		if (sel.NamePrefix != "" && strings.HasPrefix(p.Name, sel.NamePrefix)) || (sel.Tag != "" && slices.Contains(p.Tags, sel.Tag)) {
			// A known server without ID gets it from its named port.
			matched := false
			for i := range servers {
				if servers[i].ID == "" && portOf(p, servers[i]) {
					servers[i].ID = p.DeviceID
					matched = true
				}
			}
			if !matched {
				servers = append(servers, Server{ID: p.DeviceID})
			}
			known[p.DeviceID] = true
		}
	}
	slices.SortFunc(servers, func(a, b Server) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	return servers
}

func dedupeServers(in []Server) []Server {
	seen := map[Server]bool{}
	var out []Server
	for _, s := range in {
		if (s.ID != "" || s.Name != "") && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func describeMethod(sel ServerSelector, byID bool) string {
	var m []string
	if len(sel.Servers) > 0 {
		if byID {
			m = append(m, "ports whose device_id is a server's ID")
		} else {
			m = append(m, "ports whose device_id is a server's ID or whose name starts with the server's name")
		}
	}
	if sel.NamePrefix != "" {
		m = append(m, fmt.Sprintf("servers with ports named %q...", sel.NamePrefix))
	}
	if sel.Tag != "" {
		m = append(m, fmt.Sprintf("servers with ports tagged %q", sel.Tag))
	}
	return strings.Join(m, "; ")
}
