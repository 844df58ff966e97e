package wizard

import (
	"slices"
	"strings"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/workers"
)

// The wizard's own words: the screens' titles and help, and the legends under its lists. The
// commands print none of them. The sentences made from each kind's results are the wizard's too,
// one function per kind beside the other kinds', where a new kind adds its own
// (docs/architecture.md): the review's lines and the equivalent commands in words_review.go, the
// progress of what rolls by itself and the closing words in words_progress.go.

// stepTitles name the screens, in order.
var stepTitles = [stepCount]string{"Connect", "Storage network", "Security groups", "MachineSets", "Review", "Apply and roll", "Verify"}

// helpText says what each screen is for.
var helpText = [stepCount]string{
	"Choose the cloud (an entry of clouds.yaml) and the cluster (a context of the kubeconfig). Both are checked in the background: the cloud by authenticating, the cluster by listing its MachineSets (and, on a HyperShift management cluster, its NodePools). Nothing is changed.",
	"Choose the network Manila exports its shares on. The one discovery found is preselected, with the reason. A network without any export location will not let pods reach the shares.",
	"Choose the security groups the new ports get. Groups whose egress rules let NFS reach the export address are suggested first. None is required if the workers' groups already allow it.",
	"Choose the MachineSets whose machines get a port on the storage network. Workers are preselected; control-plane MachineSets are never touched. On a MachineSet manila-setup attached (its record, annotation " + attach.Annotation + "), d detaches it instead: the review shows the removal, enter takes off what the record names and replaces the machines, refused while pods on them use Manila volumes unless forced.",
	"The exact change of each MachineSet's providerSpec, and the commands that do the same without this wizard. Nothing has been written yet.",
	"The MachineSets are patched, then their machines are replaced one at a time without losing capacity. Stopping is safe: running the wizard or `manila-setup machinesets rollout` again resumes.",
	"The operator's ClusterCSIDriver conditions and the Manila StorageClasses. The multi-writer check mounts one ReadWriteMany volume on two nodes and shows what both wrote, then deletes everything it created.",
}

// reviewWarningsHelp is what the review's help adds while the chosen network has warnings.
const reviewWarningsHelp = "The storage network's warnings come first: what its subnets hand the nodes by DHCP (a second default route, a DNS server) and the command that fixes each. Nothing is applied before they are acknowledged (a). c shows the change of the subnets and makes it in Neutron on y, when your role allows it; otherwise it gives the command for the cloud's administrator."

// offeredTitle names what the sets screen lists for kinds, kind by kind: "MachineSets, Cluster
// API, NodePools, control plane"; empty when kinds has none.
func offeredTitle(kinds workers.Kinds) string {
	var names []string
	for _, k := range []struct {
		offered bool
		name    string
	}{{kinds.MachineSets, "MachineSets"}, {kinds.ClusterAPI, "Cluster API"}, {kinds.NodePools, "NodePools"}, {kinds.ControlPlane, "control plane"}} {
		if k.offered {
			names = append(names, k.name)
		}
	}
	return strings.Join(names, ", ")
}

// kindsHelp is what the help of screen step adds for kinds, kind by kind, each sentence after a
// space; empty when the kinds add nothing there.
func kindsHelp(kinds workers.Kinds, step stepID) string {
	text := ""
	if kinds.ClusterAPI {
		text += clusterAPIHelp(step)
	}
	if kinds.NodePools {
		text += nodePoolHelp(step)
	}
	if kinds.ControlPlane {
		text += controlPlaneHelp(step)
	}
	return text
}

// clusterAPIHelp: what Cluster API objects change on screen step.
func clusterAPIHelp(step stepID) string {
	switch step {
	case stepSets:
		return " Cluster API MachineSets and MachineDeployments get a new OpenStackMachineTemplate with a port on the storage network; a MachineSet that Cluster API is authoritative for is attached through its Cluster API copy (via CAPI)."
	case stepApply:
		return " Cluster API MachineSets are rolled as MachineSets are (`manila-setup clusterapi rollout` resumes); a MachineDeployment replaces its Machines itself."
	}
	return ""
}

// nodePoolHelp: what NodePools change on screen step.
func nodePoolHelp(step stepID) string {
	switch step {
	case stepSets:
		return " NodePools (HyperShift) get an additional port on the storage network in spec.platform.openstack; those of other platforms cannot be chosen."
	case stepReview:
		return " A NodePool's additional port takes no security groups of its own: NFS must be allowed by the groups its HostedCluster gives the nodes."
	case stepApply:
		return " NodePools are patched only: HyperShift rolls the change out itself, as each NodePool's spec.management.upgradeType says."
	}
	return ""
}

// controlPlaneHelp: what the ControlPlaneMachineSet changes on screen step.
func controlPlaneHelp(step stepID) string {
	switch step {
	case stepSets:
		return " The control plane (the ControlPlaneMachineSet, for masters that run workloads) is never preselected: its template gets the storage network, and its operator then replaces every master, one at a time. It can be chosen only when it is Active with strategy RollingUpdate and its masters and the ClusterOperators they lean on are at rest."
	case stepReview:
		return " The ControlPlaneMachineSet's line says what its change costs: every master replaced."
	case stepApply:
		return " The ControlPlaneMachineSet is patched only: the control-plane-machine-set operator replaces the masters itself, one at a time (`manila-setup controlplane rollout` follows it)."
	}
	return ""
}

// readingText says what is being read for kinds, while it is.
func readingText(kinds workers.Kinds) string {
	if !kinds.MachineSets {
		return "reading the NodePools…"
	}
	return "reading the MachineSets of " + machinesets.Namespace + "…"
}

// legend are the lines that explain the columns of sec, under the list, each on its own.
func legend(sec workers.Section) []string {
	var lines []string
	switch sec.ID {
	case workers.SectionMachineSets:
		// EmptyWarns: the MachineSets are all the cluster offers, so their columns are
		// explained even when there are none.
		if len(sec.Rows) > 0 || sec.EmptyWarns {
			lines = append(lines, "MACHINES: up to date / replicas, as machinesets list counts them; the others are replaced in step 6")
		}
		if slices.ContainsFunc(sec.Rows, func(r workers.Row) bool { return r.Mark != "" }) {
			lines = append(lines, "via CAPI: Cluster API is authoritative for it: its Cluster API copy in "+clusterapi.OpenShiftNamespace+" gets a new template with the port, and is rolled")
		}
	case workers.SectionClusterAPI:
		lines = append(lines, "Cluster API sets get a new template with the port; ON TEMPLATE: Machines made from the current one / all; step 6 replaces the MachineSets' others, a MachineDeployment rolls by itself")
	case workers.SectionNodePools:
		if len(sec.Rows) > 0 {
			lines = append(lines, "NodePools get a port on the storage network; HyperShift rolls the change out itself (step 6 says how)")
		}
	case workers.SectionControlPlane:
		lines = append(lines, "Control plane: never preselected; once its template has the network, its operator replaces every master, one at a time, a new one first (step 6 follows it)")
	}
	return lines
}
