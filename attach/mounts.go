package attach

import (
	"cmp"
	"fmt"
	"strings"
)

// ManilaDriver is the CSI driver of Manila's volumes: a PersistentVolume with spec.csi.driver
// set to it is mounted over the storage network.
const ManilaDriver = "manila.csi.openstack.org"

// Mount is a Manila volume a running pod uses on a node.
type Mount struct {
	Node   string `json:"node"`
	Pod    string `json:"pod"`   // namespace/name
	Claim  string `json:"claim"` // namespace/name
	Volume string `json:"persistentVolume"`
	// Cluster names the cluster the pod runs in when it is not the one manila-setup points at
	// (a NodePool's hosted cluster); "" for that one.
	Cluster string `json:"cluster,omitempty"`
}

func (m Mount) String() string {
	in := ""
	if m.Cluster != "" {
		in = " in " + m.Cluster
	}
	return fmt.Sprintf("pod %s on node %s%s (claim %s, PersistentVolume %s)", m.Pod, m.Node, in, m.Claim, m.Volume)
}

// MountedError refuses to replace machines while pods on them use Manila volumes: the
// replacement drains those nodes and, after a removal, the new machines have no port on the
// storage network the volumes are mounted over.
type MountedError struct {
	Mounts []Mount
	// Done says what was changed before the refusal; "" is nothing.
	Done string
}

func (e *MountedError) Error() string {
	nodes := map[string]bool{}
	lines := make([]string, len(e.Mounts))
	for i, m := range e.Mounts {
		lines[i] = "  " + m.String()
		nodes[m.Node] = true
	}
	return fmt.Sprintf("refusing to replace the machines of %d node(s) while pods on them use Manila volumes: the new machines have no port on the storage network those volumes are mounted over:\n%s\nMove those workloads off these nodes (or delete their claims) first, or run again with --force to replace the machines anyway; %s",
		len(nodes), strings.Join(lines, "\n"), cmp.Or(e.Done, "nothing was changed"))
}
