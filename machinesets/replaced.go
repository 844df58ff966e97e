package machinesets

//lint:file-ignore SA1019 networks[].filter.id is deprecated for networks[].uuid, but MachineSets written before still use it, and it names the same network

import (
	"cmp"
	"context"
	"slices"
	"strings"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/manila-setup/manila-setup/attach"
)

// RemovalNodes names the Nodes of the Machines of the selected sets that a rollout replaces to
// take something off them: a Machine with a network or security group its template does not
// have (a removal written, not rolled yet), or with one of those removing names for its set (a
// removal planned, not written yet: the Results of a dry run). Those are the nodes whose pods
// lose the storage network.
func RemovalNodes(ctx context.Context, client machineclient.Interface, sel Selection, removing []attach.Result) ([]string, error) {
	sets, err := selectMachineSets(ctx, client, sel)
	if err != nil {
		return nil, err
	}
	list, err := client.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, listError("Machines", err)
	}
	var nodes []string
	for _, s := range sets {
		if s.skip != "" || removeSkip(s.ms) != "" {
			continue
		}
		template, err := DecodeProviderSpec(templateProviderSpec(s.ms))
		if err != nil {
			continue
		}
		planned := plannedKeys(s.ms.Name, removing)
		selector := machineSelector(s.ms)
		for i := range list.Items {
			m := &list.Items[i]
			if !selector.Matches(labels.Set(m.Labels)) || m.DeletionTimestamp != nil || m.Status.NodeRef == nil || m.Status.NodeRef.Name == "" {
				continue
			}
			spec, err := DecodeProviderSpec(machineProviderSpec(m))
			if err != nil {
				continue
			}
			if loses(template, spec, planned) && !slices.Contains(nodes, m.Status.NodeRef.Name) {
				nodes = append(nodes, m.Status.NodeRef.Name)
			}
		}
	}
	slices.Sort(nodes)
	return nodes, nil
}

// plannedKeys are the keys (ProviderSpec.attachments) of what results plan to remove from set.
func plannedKeys(set string, results []attach.Result) map[string]bool {
	keys := map[string]bool{}
	for _, r := range results {
		if r.Name != set || !r.Writes() {
			continue
		}
		for _, k := range r.Removed() {
			keys[canonicalKey(k)] = true
		}
	}
	return keys
}

// loses reports whether a Machine has an entry its template lacks, or one of planned.
func loses(template, machine *ProviderSpec, planned map[string]bool) bool {
	if len(MissingFrom(machine, template)) > 0 {
		return true
	}
	for _, k := range machine.attachments() {
		if planned[k] {
			return true
		}
	}
	return false
}

// canonicalKey is Result.Removed's "network ID" as attachments() keys it (IDs in lower case).
func canonicalKey(k string) string {
	for _, prefix := range []string{"network ", "security group "} {
		if id, ok := strings.CutPrefix(k, prefix); ok {
			return prefix + strings.ToLower(id)
		}
	}
	return k
}

// addRemoved adds to removed the networks (by ID) a Machine has a port on and its template no
// longer names.
func addRemoved(removed []string, template, machine *ProviderSpec) []string {
	for _, id := range machine.networkIDs() {
		if !template.HasNetwork(id) && !attach.ContainsID(removed, id) {
			removed = append(removed, id)
		}
	}
	return removed
}

// networkIDs are the IDs of the networks the machines get a port on, as named by ID (networks[]
// uuid or filter.id, ports[] networkID).
func (p *ProviderSpec) networkIDs() []string {
	var ids []string
	for _, n := range p.Spec.Networks {
		ids = append(ids, cmp.Or(n.UUID, n.Filter.ID))
	}
	for _, port := range p.Spec.Ports {
		ids = append(ids, port.NetworkID)
	}
	return slices.DeleteFunc(ids, func(id string) bool { return id == "" })
}

// ControlPlaneNodes names the Nodes of the masters the ControlPlaneMachineSet selects: the
// nodes whose pods lose the storage network when its template loses it, since its operator
// then replaces every master. No set: none.
func ControlPlaneNodes(ctx context.Context, client machineclient.Interface) ([]string, error) {
	cpms, err := GetControlPlane(ctx, client)
	if err != nil || cpms == nil {
		return nil, err
	}
	list, err := controlPlaneMachines(ctx, client, cpms)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil && m.Status.NodeRef != nil && m.Status.NodeRef.Name != "" {
			nodes = append(nodes, m.Status.NodeRef.Name)
		}
	}
	slices.Sort(nodes)
	return nodes, nil
}
