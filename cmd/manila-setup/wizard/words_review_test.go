package wizard

import (
	"slices"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/workers"
)

// machineSetResult is the result of a Machine API MachineSet.
func machineSetResult(name, action string) attach.Result {
	return attach.Result{Kind: "MachineSet", Namespace: machinesets.Namespace, Name: name, Action: action}
}

// TestReviewLines: what a dry run's results say, kind by kind, in the sections' order.
func TestReviewLines(t *testing.T) {
	net := []string{"net-1"}
	would := machineSetResult("w-0", attach.ActionWouldPatch)
	would.AddedNetworks, would.AddedSecurityGroups = net, []string{"sg-1"}
	via := would
	via.Name, via.ClusterAPI = "w-1", true
	invalid := machineSetResult("w-2", attach.ActionInvalid)
	invalid.Reason = "no providerSpec"
	unchanged := machineSetResult("w-3", attach.ActionUnchanged)
	unchanged.Reason = "already attached"
	md := attach.Result{Kind: clusterapi.KindMachineDeployment, Namespace: clusterapi.OpenShiftNamespace, Name: "md", Action: attach.ActionWouldPatch,
		Template: "md-tmpl-2", OldTemplate: "md-tmpl", AddedNetworks: net, Warning: "its MachineSets are paused"}
	pool := attach.Result{Kind: "NodePool", Namespace: "clusters", Name: "p", HostedCluster: "hc1", Action: attach.ActionWouldPatch, AddedNetworks: net, Warning: "no security groups"}
	for _, c := range []struct {
		name    string
		results []attach.Result
		want    []screenLine
	}{
		{"nothing", nil, nil},
		{"a MachineSet and its copy", []attach.Result{would, via}, []screenLine{
			{Text: "MachineSet w-0: adds network net-1, security group sg-1"},
			{Text: "MachineSet w-1: adds network net-1, security group sg-1 (via its Cluster API copy in openshift-cluster-api: a new OpenStackMachineTemplate)"},
		}},
		{"an invalid MachineSet", []attach.Result{invalid}, []screenLine{
			{Text: "MachineSet w-2: invalid, no providerSpec", Tone: toneDim},
			{Text: "✗ MachineSet w-2 cannot be patched: no providerSpec. Fix its providerSpec, or go back (esc) and leave it out.", Tone: toneBad},
		}},
		{"every MachineSet attached already", []attach.Result{unchanged}, []screenLine{
			{Text: "MachineSet w-3: unchanged, already attached", Tone: toneDim},
			{Text: "Every chosen MachineSet already has the network and groups: enter replaces the machines that still lack them.", Tone: toneGood, Cut: true},
		}},
		{"kinds in the sections' order", []attach.Result{pool, md, would}, []screenLine{
			{Text: "MachineSet w-0: adds network net-1, security group sg-1"},
			{Text: "Cluster API MachineDeployment md: new OpenStackMachineTemplate md-tmpl-2 (from md-tmpl), adds network net-1"},
			{Text: "! its MachineSets are paused", Tone: toneWarn},
			{Text: "NodePool clusters/p (HostedCluster hc1): adds a port on network net-1"},
			{Text: "! The security groups chosen are not added to NodePool clusters/p: a NodePool's additional ports take none of their own. NFS to the export addresses must be allowed by the security groups its HostedCluster gives the nodes, or the port's portSecurityPolicy set to Disabled. The port is added all the same.", Tone: toneWarn},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := reviewLines(c.results, nil)
			if !slices.Equal(got, c.want) {
				t.Errorf("got\n%v\nwant\n%v", got, c.want)
			}
		})
	}
}

// TestEquivalentCommands: the CLI's commands for a selection, and those that resume its
// rollout (only what manila-setup rolls).
func TestEquivalentCommands(t *testing.T) {
	a := attach.Attachment{Networks: []string{"net-1"}, SecurityGroups: []string{"sg-1"}}
	for _, c := range []struct {
		name     string
		sel      workers.Selection
		cloud    string
		force    bool
		commands []string
		rollouts []string
	}{
		{"nothing", workers.Selection{}, "", false, nil, nil},
		{"MachineSets", workers.Selection{MachineSets: &machinesets.Selection{Names: []string{"w-0", "w-1"}}}, "c", false,
			[]string{"ms --os-cloud c machinesets patch --network net-1 --security-group sg-1 --name w-0 --name w-1", "ms machinesets rollout --name w-0 --name w-1"},
			[]string{"ms machinesets rollout --name w-0 --name w-1"}},
		{"Cluster API: the MachineDeployment is not rolled", workers.Selection{ClusterAPI: []string{"machineset/gpu", "machinedeployment/md"}}, "", true,
			[]string{"ms clusterapi patch --network net-1 --security-group sg-1 --force --name machineset/gpu --name machinedeployment/md", "ms clusterapi rollout --name machineset/gpu"},
			[]string{"ms clusterapi rollout --name machineset/gpu"}},
		{"a MachineDeployment alone rolls by itself", workers.Selection{ClusterAPI: []string{"machinedeployment/md"}}, "", false,
			[]string{"ms clusterapi patch --network net-1 --security-group sg-1 --name machinedeployment/md"}, nil},
		{"NodePools take no security group, names quoted", workers.Selection{NodePools: []string{"clusters/p", "team b/q"}}, "'my cloud'", false,
			[]string{"ms --os-cloud 'my cloud' nodepools patch --network net-1 --name clusters/p --name 'team b/q'"}, nil},
		{"all three, in Patch's order", workers.Selection{MachineSets: &machinesets.Selection{Names: []string{"w-0"}}, ClusterAPI: []string{"machineset/gpu"}, NodePools: []string{"clusters/p"}}, "", false,
			[]string{"ms machinesets patch --network net-1 --security-group sg-1 --name w-0", "ms machinesets rollout --name w-0",
				"ms clusterapi patch --network net-1 --security-group sg-1 --name machineset/gpu", "ms clusterapi rollout --name machineset/gpu",
				"ms nodepools patch --network net-1 --name clusters/p"},
			[]string{"ms machinesets rollout --name w-0", "ms clusterapi rollout --name machineset/gpu"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := equivalentCommands("ms", c.cloud, c.sel, a, c.force); !slices.Equal(got, c.commands) {
				t.Errorf("equivalentCommands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.commands, "\n"))
			}
			if got := rolloutCommands("ms", c.sel); !slices.Equal(got, c.rollouts) {
				t.Errorf("rolloutCommands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.rollouts, "\n"))
			}
		})
	}
}
