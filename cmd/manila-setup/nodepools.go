package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/internal/inputfile"
	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/workers"
)

func newNodePoolsCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nodepools",
		Short: "Attach the storage network to the NodePools of hosted clusters (HyperShift)",
		Long: `On a HyperShift management cluster, the machines of a hosted cluster come from its NodePools:
the storage network is attached as an additional port of spec.platform.openstack, and the
NodePool controller replaces the machines itself. Point --kubeconfig at the management cluster.`,
	}
	cmd.AddCommand(newNodePoolsListCommand(g, streams), newNodePoolsPatchCommand(g, streams))
	return cmd
}

// ---- list ----

type nodePoolsListOptions struct {
	g       *GlobalOptions
	streams IOStreams

	Networks      []string
	Namespace     string
	HostedCluster string
}

func newNodePoolsListCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &nodePoolsListOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "list [--network ID] [--hosted-cluster NAME] [-n NAMESPACE]",
		Short: "Show, per NodePool, whether its machines get a port on the storage network",
		Args:  cobra.NoArgs,
		RunE:  cmdrun.RunE(o),
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Networks, "network", nil, "ID of the storage network to look for (default: the one recorded by nodepools patch)")
	f.StringVarP(&o.Namespace, "namespace", "n", "", "only the NodePools of this namespace (default: all)")
	f.StringVar(&o.HostedCluster, "hosted-cluster", "", "only the NodePools of this HostedCluster (spec.clusterName)")
	return cmd
}

func (o *nodePoolsListOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate checks the networks given; none: the recorded ones are shown.
func (o *nodePoolsListOptions) Validate() error {
	return attachmentFlagErrors(attach.Attachment{Networks: o.Networks}, false)
}

func (o *nodePoolsListOptions) Run(ctx context.Context) error {
	cluster, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	dyn := cluster.dynamic
	pools, err := nodepools.List(ctx, dyn, o.Namespace, o.HostedCluster, attach.Attachment{Networks: o.Networks})
	if err := patchErrorExit(err); err != nil {
		return err
	}
	if o.g.Output != outputText {
		if pools == nil {
			pools = []nodepools.Status{}
		}
		return printStructured(o.streams.Out, o.g.Output, pools)
	}
	if len(pools) == 0 {
		_, err := fmt.Fprintln(o.streams.Out, "No NodePools.")
		return err
	}
	w := tabwriter.NewWriter(o.streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tNAME\tHOSTED CLUSTER\tPLATFORM\tREPLICAS\tSTORAGE NETWORK\tNOTE")
	for _, p := range pools {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", p.Namespace, p.Name, p.HostedCluster, p.Platform, p.Replicas, p.StorageNetwork, p.Note)
	}
	return w.Flush()
}

// ---- patch ----

type nodePoolsPatchOptions struct {
	g       *GlobalOptions
	streams IOStreams

	attachFlags
	Namespace     string
	HostedCluster string
	Names         []string
}

func newNodePoolsPatchCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &nodePoolsPatchOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "patch --network ID [--hosted-cluster NAME] [-n NAMESPACE] [--name NAMESPACE/NAME] [--remove]",
		Short: "Add a port on the storage network to the OpenStack NodePools",
		Long: `Add {network: {id: ID}} to spec.platform.openstack.additionalPorts of the OpenStack NodePools
(of one HostedCluster with --hosted-cluster, of one namespace with -n, only those named with
--name NAMESPACE/NAME), where no port is on that
network yet; the port gets no allowed address pairs. Other platforms' NodePools are skipped, as
is one whose additionalPorts would exceed the API's 10. What was attached is recorded in the
annotation ` + attach.Annotation + `.

Security groups cannot be given per additional port on a NodePool: --security-group is only
reported. With --os-cloud (or $OS_CLOUD) the IDs are checked in Neutron and a network in whose
subnets no Manila export location lies is refused unless --force; --discover attaches the
network Manila exports on.

The NodePool controller turns the change into a new machine template and replaces the machines
as its spec.management.upgradeType says: there is nothing to roll here.

With -f FILE (or - for standard input) the NodePools of a file are patched instead, for
clusters managed from Git, as "machinesets patch -f" does: only the added lines differ; the
patched file goes to standard output, --in-place writes it back (keeping FILE.bak), --dry-run
prints the diff.

` + removeHelp + ` A NodePool's record names networks only:
its ports take no security groups. The NodePool controller replaces the nodes as soon as the
NodePool changes, and their pods are in the hosted cluster: before a removal on a cluster,
manila-setup reads each hosted cluster with the admin kubeconfig HyperShift keeps on the
management cluster (the Secret named by the HostedCluster's status.kubeconfig) and refuses
(exit 1) while a pod on the NodePool's nodes (label hypershift.openshift.io/nodePool) uses a
Manila volume, naming it, or when a hosted cluster cannot be read, saying why; --force removes
anyway. --dry-run and -f need no --force.`,
		Example: `  manila-setup nodepools patch --kubeconfig mgmt.kubeconfig --network 5f0c3b7e-... --hosted-cluster hc1 --dry-run
  manila-setup nodepools patch --remove --hosted-cluster hc1 --dry-run
  manila-setup nodepools patch --remove --network 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c --name clusters/hc1-workers --force
  manila-setup nodepools patch --remove -f clusters/hc1/nodepools.yaml --in-place`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	o.attachFlags.add(f, attachHelp{objects: "NodePools",
		securityGroup: "a security group meant for NFS: reported only (NodePool ports take none)",
		force:         "attach a network even where no Manila export location lies, or its subnets lack free addresses for the machines; with --remove, remove although pods in the hosted clusters use Manila volumes, or cannot be checked"})
	f.StringVarP(&o.Namespace, "namespace", "n", "", "only the NodePools of this namespace (default: all)")
	f.StringVar(&o.HostedCluster, "hosted-cluster", "", "only the NodePools of this HostedCluster (spec.clusterName)")
	f.StringArrayVar(&o.Names, "name", nil, "only this NodePool, as NAMESPACE/NAME (repeat for more)")
	return cmd
}

func (o *nodePoolsPatchOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *nodePoolsPatchOptions) Validate() error {
	if o.File != "" && len(o.Names) > 0 {
		// The NodePools of a file often have no namespace: --name could not find them.
		return usageError("--name selects NodePools of the cluster; with -f choose them with --hosted-cluster or -n")
	}
	return o.attachFlags.validate(o.g)
}

func (o *nodePoolsPatchOptions) Run(ctx context.Context) error {
	scope := nodepools.Scope{Namespace: o.Namespace, HostedCluster: o.HostedCluster, Names: o.Names}
	req, err := o.attachFlags.request(ctx, o.g, o.streams, workers.Selection{NodePoolScope: &scope}, inputfile.NodePools)
	if err != nil {
		return err
	}
	if o.File != "" {
		_, err := o.applyFile(ctx, o.g, o.streams, req, nil)
		return err
	}
	clients, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	report, err := clients.workers().Apply(ctx, req)
	return o.printApplied(o.streams, report, err, func(r *workers.Report) error { return o.print(r.Results) })
}

func (o *nodePoolsPatchOptions) print(results []attach.Result) error {
	return o.printResults(o.g, o.streams, results, func(n int) string {
		return fmt.Sprintf("%d NodePool(s) patched. The NodePool controller replaces their machines: watch `oc get nodepools -A` (condition UpdatingPlatformMachineTemplate).\n", n)
	})
}
