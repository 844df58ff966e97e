package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
)

func newNetworksCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	cmd := groupCommand("networks", "Find the network Manila exports on, and attach workers to it",
		`Work with the OpenStack networks of the cloud in clouds.yaml (--os-cloud): find the network on
which Manila exports its shares and whether the cluster's workers are attached to it.`)
	cloud := &cloudOptions{global: g, streams: streams}
	cloud.addFlags(cmd.PersistentFlags())
	cmd.AddCommand(newNetworksListCommand(cloud), newNetworksDiscoverCommand(cloud), newNetworksAttachCommand(cloud))
	return cmd
}

// ---------------------------------------------------------------------------------------------
// networks list

// NetworksListOptions is `manila-setup networks list`.
type NetworksListOptions struct {
	*cloudOptions
}

// NetworkRow is one line of `networks list`.
type NetworkRow struct {
	Name     string   `json:"name"`
	ID       string   `json:"id"`
	CIDRs    []string `json:"cidrs"`
	Shared   bool     `json:"shared"`
	External bool     `json:"external"`
	// Manila is set on the networks Manila exports on (high) or places share servers on
	// (medium); Reason is the first reason. See `networks discover` for all of them.
	Manila     bool   `json:"manila"`
	Confidence string `json:"confidence,omitempty"`
	Reason     string `json:"reason,omitempty"`

	mark string // the MANILA column of the text output
}

func newNetworksListCommand(cloud *cloudOptions) *cobra.Command {
	o := &NetworksListOptions{cloudOptions: cloud}
	return &cobra.Command{
		Use:   "list",
		Short: "List the networks of the cloud and mark the ones Manila exports on",
		Long: `List the Neutron networks the project can see: name, ID, subnet CIDRs, whether shared or
external, and a mark on the network(s) where Manila exports shares (from the export locations of
the project's shares and its share networks).`,
		Example: `  manila-setup networks list --os-cloud mycloud
  manila-setup networks list -o json | jq -r '.[] | select(.manila) | .id'`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
}

// Complete has nothing to fill in beyond the global options.
func (o *NetworksListOptions) Complete(*cobra.Command, []string) error { return nil }

// Validate checks the flags.
func (o *NetworksListOptions) Validate() error { return o.validate() }

// Run lists the networks.
func (o *NetworksListOptions) Run(ctx context.Context) error {
	c, err := o.connect(ctx)
	if err != nil {
		return err
	}
	list, err := c.ListNetworks(ctx)
	if list != nil && list.Unmarked != nil {
		fmt.Fprintf(o.streams.ErrOut, "warning: %v\nNo network is marked.\n", list.Unmarked)
	}
	if err != nil {
		return environmentError(err)
	}
	rows := networkRows(list)
	if o.global.Output != outputText {
		return printStructured(o.streams.Out, o.global.Output, rows)
	}
	return printNetworkRows(o.streams.Out, rows)
}

// networkRows are the lines of `networks list`, one per network, marked as the list marks them.
func networkRows(list *openstack.NetworkList) []NetworkRow {
	rows := make([]NetworkRow, 0, len(list.Networks))
	for _, n := range list.Networks {
		row := NetworkRow{Name: n.Name, ID: n.ID, CIDRs: []string{}, Shared: n.Shared, External: n.External}
		for _, p := range n.CIDRs() {
			row.CIDRs = append(row.CIDRs, p.String())
		}
		if cand := n.Manila; cand != nil {
			row.Manila, row.Confidence, row.mark = true, string(cand.Confidence), markOf(*cand)
			if len(cand.Reasons) > 0 {
				row.Reason = cand.Reasons[0]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// markOf is the short MANILA column: what puts Manila on this network.
func markOf(c openstack.Candidate) string {
	var parts []string
	if c.Shares > 0 {
		var addrs []string
		for _, e := range c.Exports {
			addrs = append(addrs, e.Address.String())
		}
		if len(addrs) > 2 {
			addrs = append(addrs[:2], "...")
		}
		parts = append(parts, fmt.Sprintf("exports %d share%s (%s)", c.Shares, pluralS(c.Shares), strings.Join(addrs, ", ")))
	}
	if n := len(c.ShareNetworks); n > 0 {
		parts = append(parts, fmt.Sprintf("share network%s %s", pluralS(n), strings.Join(c.ShareNetworks, ", ")))
	}
	return "* " + strings.Join(parts, "; ")
}

func printNetworkRows(out io.Writer, rows []NetworkRow) error {
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tCIDRS\tSHARED\tEXTERNAL\tMANILA")
	marked := false
	for _, r := range rows {
		mark := r.mark
		if r.Manila {
			marked = true
		}
		cidrs := strings.Join(r.CIDRs, ",")
		if cidrs == "" {
			cidrs = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", orDash(r.Name), r.ID, cidrs, yesNo(r.Shared), yesNo(r.External), mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if _, err := io.WriteString(out, strings.TrimRight(line, " \n")+strings.Repeat("\n", strings.Count(line, "\n"))); err != nil {
			return err
		}
	}
	if marked {
		_, err := fmt.Fprintln(out, "\n* Manila exports shares on this network, or places share servers on it. Reasons: manila-setup networks discover")
		return err
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ---------------------------------------------------------------------------------------------
// networks discover

// NetworksDiscoverOptions is `manila-setup networks discover`.
type NetworksDiscoverOptions struct {
	*cloudOptions

	SecurityGroups []string
	Servers        []string
	InfraID        string
	Exact          bool

	// set by Complete
	kubeconfig         string
	kubeconfigExplicit bool
}

func newNetworksDiscoverCommand(cloud *cloudOptions) *cobra.Command {
	o := &NetworksDiscoverOptions{cloudOptions: cloud}
	cmd := &cobra.Command{
		Use:   "discover",
		Short: "Find the network Manila exports on, and whether the workers are attached to it",
		Long: `Find the Neutron network(s) that hold the addresses of Manila's export locations (and, for
back ends with driver_handles_share_servers=true, the networks of the share networks), ranked
best first, each with the reasons.

With a kubeconfig (--kubeconfig, $KUBECONFIG or ~/.kube/config), it also tells which of the
cluster's workers already have a port on each candidate and whether their security groups let
NFS or CephFS traffic through. The workers are the Machines of openshift-machine-api (or the
Nodes) that are not control-plane; their ports are found in Neutron by device_id (the server ID
from providerID), or by port name (the machine name), so no Nova access is needed. Without a
cluster, --server and --infra-id name the servers instead.

Under the network Manila exports on, it says what that network would do to the nodes as their
second NIC, with the fix (the rules the patch commands apply). With -o json (or yaml) every
candidate has "findings": each with its stable id (dhcp-off, port-security-off, overlap,
vip-in-subnet, default-route, dns-announced, ipv6-no-ra, ipv6-dhcpv6-stateful), severity, network,
subnet, message and fix; [] for a fit network.

Exit codes: 0 a network was found, 1 none was found, 2 usage or environment error.`,
		Example: `  manila-setup networks discover --os-cloud mycloud
  manila-setup networks discover --kubeconfig ~/ocp/auth/kubeconfig -o json
  manila-setup networks discover --infra-id mycluster-x7k2p --security-group 5f3c...`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.SecurityGroups, "security-group", nil, "security group ID to check for NFS and CephFS traffic (repeatable; together, as on one port)")
	f.StringArrayVar(&o.Servers, "server", nil, "server (Nova) ID to check for a port on the candidates (repeatable)")
	f.StringVar(&o.InfraID, "infra-id", "", `the cluster's infrastructure name: servers whose ports are named "<infra-id>-..." are the cluster's`)
	f.BoolVar(&o.Exact, "exact", false, "ask every share for its export locations (one request per share) instead of one share per export address")
	return cmd
}

// Complete decides whether a cluster is at hand: an explicit --kubeconfig or $KUBECONFIG must
// work; the default ~/.kube/config is used only if it exists.
func (o *NetworksDiscoverOptions) Complete(cmd *cobra.Command, _ []string) error {
	o.kubeconfig = o.global.Kubeconfig
	o.kubeconfigExplicit = cmd.Flags().Changed("kubeconfig") || os.Getenv("KUBECONFIG") != ""
	if !o.kubeconfigExplicit && o.kubeconfig != "" {
		if _, err := os.Stat(o.kubeconfig); err != nil {
			o.kubeconfig = ""
		}
	}
	return nil
}

// Validate checks the flags.
func (o *NetworksDiscoverOptions) Validate() error {
	if err := o.validate(); err != nil {
		return err
	}
	for i, id := range o.SecurityGroups {
		if strings.TrimSpace(id) == "" {
			return usageError("--security-group[%d]: Required value: an ID", i)
		}
	}
	if o.InfraID != "" && strings.ContainsAny(o.InfraID, " /") {
		return usageError("--infra-id: Invalid value: %q: must be the cluster's infrastructure name, e.g. mycluster-x7k2p", o.InfraID)
	}
	return nil
}

// Run discovers and prints.
func (o *NetworksDiscoverOptions) Run(ctx context.Context) error {
	sel, note, err := o.selector(ctx)
	if err != nil {
		return err
	}
	c, err := o.connect(ctx)
	if err != nil {
		return err
	}
	d, err := c.Discover(ctx, openstack.DiscoverOptions{Servers: sel, SecurityGroupIDs: o.SecurityGroups, ExactExports: o.Exact})
	if err != nil {
		return environmentError(err)
	}
	if note != "" {
		d.Notes = append(d.Notes, note)
	}
	if o.global.Output != outputText {
		if err := printStructured(o.streams.Out, o.global.Output, discoveryWithFindings(d)); err != nil {
			return err
		}
	} else if err := printDiscovery(o.streams.Out, d, c); err != nil {
		return err
	}
	if len(d.Candidates) == 0 {
		return silentFailure(exitInvalid)
	}
	return nil
}

// selector says which servers to check: from the flags, else from the cluster.
func (o *NetworksDiscoverOptions) selector(ctx context.Context) (*openstack.ServerSelector, string, error) {
	sel := &openstack.ServerSelector{}
	for _, id := range o.Servers {
		sel.Servers = append(sel.Servers, openstack.Server{ID: id})
	}
	if o.InfraID != "" {
		sel.NamePrefix = o.InfraID + "-"
	}
	if len(sel.Servers) > 0 || sel.NamePrefix != "" {
		return sel, "", nil
	}
	if o.kubeconfig == "" {
		return nil, "", nil
	}
	workers, err := o.clusterWorkers(ctx)
	if err != nil {
		if o.kubeconfigExplicit {
			return nil, "", environmentError(err)
		}
		fmt.Fprintf(o.streams.ErrOut, "warning: %v; workers are not checked\n", err)
		return nil, "", nil
	}
	return &workers.Selector, workers.Note, nil
}

// clusterReadTimeout bounds each request of discover to the cluster: the workers only add to
// the answer, so a cluster that does not answer must not hold it up for long.
const clusterReadTimeout = 30 * time.Second

// clusterWorkers reads the workers from the cluster of --kubeconfig.
func (o *NetworksDiscoverOptions) clusterWorkers(ctx context.Context) (*machinesets.Workers, error) {
	cfg, err := o.global.restConfig(ctx)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = clusterReadTimeout
	clients, err := clientsFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %v", o.kubeconfig, err)
	}
	return machinesets.ClusterWorkers(ctx, clients.dynamic, cfg.Host)
}

// discoveryJSON is the -o json|yaml form of a discovery: each candidate with its findings.
type discoveryJSON struct {
	*openstack.Discovery
	// Candidates hides the Discovery's own (a shallower field wins in encoding/json).
	Candidates []candidateJSON `json:"candidates"`
}

// candidateJSON is a candidate with what it would do to the nodes as their second NIC.
type candidateJSON struct {
	openstack.Candidate
	// Findings are attach.Fitness's, with their stable IDs; [] for a fit network.
	Findings []attach.Finding `json:"findings"`
}

// discoveryWithFindings judges every candidate by the rules the patch commands apply, so that a
// script choosing one sees what the text shows under the network Manila exports on.
func discoveryWithFindings(d *openstack.Discovery) discoveryJSON {
	out := discoveryJSON{Discovery: d, Candidates: make([]candidateJSON, len(d.Candidates))}
	for i, cand := range d.Candidates {
		out.Candidates[i] = candidateJSON{Candidate: cand, Findings: attach.Fitness(cand.Network, attach.FitnessOptions{})}
		if out.Candidates[i].Findings == nil {
			out.Candidates[i].Findings = []attach.Finding{}
		}
	}
	return out
}

func printDiscovery(out io.Writer, d *openstack.Discovery, c *openstack.Client) error {
	w := &errWriter{w: out}
	region := d.Region
	if region == "" {
		region = "(any)"
	}
	best, err := d.StorageNetwork()
	switch {
	case err == nil:
		verb := "exports shares on"
		if best.Confidence == openstack.ConfidenceMedium {
			verb = "places share servers on"
		}
		w.printf("Manila (region %s, API %s) %s network %q (%s).\n", region, d.Manila.Microversion, verb, best.Network.Name, best.Network.ID)
	case len(d.Candidates) > 0:
		// A guess from a name or a tie: the same rule that keeps installconfig patch --discover
		// and the operator from choosing.
		w.printf("Manila (region %s, API %s): %v.\n", region, d.Manila.Microversion, err)
	default:
		w.printf("Manila (region %s, API %s) exports on no network that %s can see.\n", region, d.Manila.Microversion, c.Identity())
	}
	printZones(w, d.ByZone())
	if len(d.Candidates) > 0 {
		w.printf("\nCandidates, best first:\n")
	}
	for i, cand := range d.Candidates {
		var cidrs []string
		for _, p := range cand.Network.CIDRs() {
			cidrs = append(cidrs, p.String())
		}
		flags := ""
		if cand.Network.Shared {
			flags += ", shared"
		}
		if cand.Network.External {
			flags += ", external"
		}
		if len(d.Zones) > 0 && len(cand.Zones) > 0 {
			flags += ", zone " + strings.Join(cand.Zones, ",")
		}
		w.printf("  %d. %s  %s  %s  (confidence %s, score %d%s)\n", i+1, orDash(cand.Network.Name), cand.Network.ID, strings.Join(cidrs, ","), cand.Confidence, cand.Score, flags)
		for _, r := range cand.Reasons {
			w.printf("     - %s\n", r)
		}
		if len(cand.Exports) > 0 {
			// What it would do to the nodes as their second NIC, as the patch commands say it.
			for _, f := range attach.Fitness(cand.Network, attach.FitnessOptions{}) {
				w.printf("     %s: %s\n", f.Severity, strings.TrimPrefix(f.String(), "network "+f.Network+", "))
			}
		}
		if a := cand.Attachment; a != nil {
			w.printf("     workers attached: %d of %d (%s)\n", a.Attached, a.Total, a.Method)
			for _, s := range a.Servers {
				name := coalesceStr(s.Name, s.ID)
				if !s.Attached {
					w.printf("       %-30s not attached\n", name)
					continue
				}
				var ports []string
				for _, p := range s.Ports {
					var ips []string
					for _, ip := range p.FixedIPs {
						ips = append(ips, ip.String())
					}
					ports = append(ports, fmt.Sprintf("port %s %s", coalesceStr(p.Name, p.ID), strings.Join(ips, ",")))
				}
				w.printf("       %-30s attached: %s\n", name, strings.Join(ports, "; "))
			}
			for _, v := range cand.Traffic {
				w.printf("     traffic: %s\n", v.Summary)
			}
		}
	}
	if sg := d.SecurityGroups; sg != nil {
		w.printf("\nSecurity groups checked (as one port's groups):\n")
		for _, v := range sg.Verdicts {
			state := "allowed"
			if !v.Allowed {
				state = "BLOCKED"
			}
			w.printf("  %s: %s: %s\n", v.Protocol, state, v.Summary)
		}
	}
	if len(d.Unmatched) > 0 {
		w.printf("\nExport addresses in no subnet this project can see (the storage network may belong to another project, or be routed):\n")
		for _, u := range d.Unmatched {
			host := u.Hostname
			if u.Address.IsValid() {
				host = u.Address.String()
			}
			w.printf("  %s (%d share%s)\n", host, u.Shares, pluralS(u.Shares))
		}
	}
	if len(d.Notes) > 0 {
		w.printf("\nNotes:\n")
		for _, n := range d.Notes {
			w.printf("  - %s\n", n)
		}
	}
	w.printf("\nExamined %d networks, %d available share%s and %d share network%s as %s.\n",
		d.NetworksSeen, d.SharesSeen, pluralS(d.SharesSeen), d.ShareNetworksSeen, pluralS(d.ShareNetworksSeen), c.Identity())
	return w.err
}

// printZones lists, on a cloud whose shares are in several availability zones, the networks
// Manila exports on in each zone, best first: a worker of a zone needs its zone's.
func printZones(w *errWriter, zones []openstack.ZoneNetworks) {
	if len(zones) == 0 {
		return
	}
	w.printf("\nBy availability zone (a worker needs the storage networks of its own zone):\n")
	for _, z := range zones {
		if len(z.Networks) == 0 {
			w.printf("  %s: no network with evidence\n", z.Zone)
			continue
		}
		parts := make([]string, 0, len(z.Networks))
		for _, c := range z.Networks {
			parts = append(parts, fmt.Sprintf("%s (%d share%s)", c.Network.Label(), c.Shares, pluralS(c.Shares)))
		}
		w.printf("  %s: %s\n", z.Zone, strings.Join(parts, ", "))
	}
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, a ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, a...)
	}
}

func pluralS(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func coalesceStr(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
