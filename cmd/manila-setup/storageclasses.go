package main

import (
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/operator/sclint"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

func newStorageClassesCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	cmd := groupCommand("storageclasses", "Check the StorageClasses of the Manila CSI driver",
		`Check the StorageClasses of the Manila CSI driver for the mistakes the driver lets pass in
silence (its parameter keys are case-sensitive and it ignores unknown ones).`)
	cmd.AddCommand(newStorageClassesCheckCommand(g, streams))
	return cmd
}

// StorageClassesCheckOptions are the flags of `storageclasses check`.
type StorageClassesCheckOptions struct {
	MachineNetworks []string

	g        *GlobalOptions
	streams  IOStreams
	machine  []netip.Prefix
	cloudOpt *cloudOptions
}

func newStorageClassesCheckCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &StorageClassesCheckOptions{g: g, streams: streams, cloudOpt: &cloudOptions{global: g, streams: streams}}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report Manila StorageClasses the driver would misread or fail on (exit 1 on findings)",
		Long: `Check every StorageClass of provisioner manila.csi.openstack.org, the operator's and any other:
parameter keys the driver does not read (miscased, such as nfs-ShareClient, with the key meant),
secret references to Secrets that do not exist, share types Manila does not offer (with
--os-cloud), and an nfs-shareClient that is missing (shares open to 0.0.0.0/0), a list the
driver cannot take (the platform's driver, beside which the operator runs as a companion), or
that leaves out an address the workers mount from. Where they mount from is one rule: from the
storage subnet that holds Manila's export addresses when they have a port on the storage
network, from the machine network (routed) when they do not, both while some do and some do
not. It reads the MachineSets and Machines of openshift-machine-api, the machine network
(--machine-network, else the install-config kept in kube-system/cluster-config-v1) and, with
--os-cloud, the subnets Manila exports in. Nothing is written. Exit 1 when anything is found.`,
		Example: `  manila-setup storageclasses check
  manila-setup storageclasses check --os-cloud mycloud -o json`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	cmd.Flags().StringSliceVar(&o.MachineNetworks, "machine-network", nil, "the nodes' network CIDRs (default: the install-config's machineNetwork)")
	o.cloudOpt.addFlags(cmd.Flags())
	return cmd
}

func (o *StorageClassesCheckOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *StorageClassesCheckOptions) Validate() error {
	for i, c := range o.MachineNetworks {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return usageError("--machine-network[%d]: Invalid value: %q: must be a CIDR such as 10.0.0.0/16", i, c)
		}
		o.machine = append(o.machine, p.Masked())
	}
	if o.g.OSCloud != "" {
		return o.cloudOpt.validate()
	}
	return nil
}

// storageClassesReport is the result, as -o json|yaml prints it.
type storageClassesReport struct {
	Checked  []string          `json:"checked"`
	Findings []sclint.Finding  `json:"findings"`
	Skipped  []string          `json:"skipped,omitempty"`
	Facts    map[string]string `json:"facts"`
}

func (o *StorageClassesCheckOptions) Run(ctx context.Context) error {
	cfg, err := o.g.restConfig()
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return environmentError(err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return environmentError(err)
	}
	list, err := kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return environmentError(fmt.Errorf("listing StorageClasses on %s: %v", cfg.Host, err))
	}
	report := storageClassesReport{Findings: []sclint.Finding{}, Facts: map[string]string{}}
	facts := sclint.Facts{ListAllowed: true}
	if det, err := deploy.Detect(ctx, cfg); err == nil && det.Mode == platform.ModeCompanion {
		// The platform's driver serves the classes; it may be older than v1.35.0.
		facts.ListAllowed = false
	}
	facts.SecretExists = func(ns, name string) (bool, bool) { return sclint.SecretExists(ctx, meta, ns, name) }
	mountFacts := shareclient.Facts{MachineNetworks: o.machine}
	if len(mountFacts.MachineNetworks) == 0 {
		mountFacts.MachineNetworks = o.installConfigNetworks(ctx, kube)
	}
	storageID := ""
	if o.g.OSCloud != "" {
		c, err := o.cloudOpt.connect(ctx)
		if err != nil {
			return err
		}
		types, err := c.ShareTypes(ctx)
		if err != nil {
			return environmentError(fmt.Errorf("listing Manila's share types: %w", err))
		}
		for _, t := range types {
			facts.ShareTypes = append(facts.ShareTypes, t.Name)
		}
		if facts.ShareTypes == nil {
			facts.ShareTypes = []string{}
		}
		report.Facts["shareTypes"] = strings.Join(facts.ShareTypes, ", ")
		if d, err := c.Discover(ctx, openstack.DiscoverOptions{}); err != nil {
			report.Skipped = append(report.Skipped, "the subnets Manila exports in: discovery failed: "+err.Error())
		} else if best, err := d.StorageNetwork(); err != nil {
			report.Skipped = append(report.Skipped, "the subnets Manila exports in: "+err.Error())
		} else {
			storageID = best.Network.ID
			mountFacts.ExportSubnets = best.ExportSubnets()
			report.Facts["storageNetwork"] = best.Network.Label()
			report.Facts["exportSubnets"] = shareclient.Join(mountFacts.ExportSubnets)
		}
	} else {
		report.Skipped = append(report.Skipped, "share types and the subnets Manila exports in: Manila not asked (give --os-cloud)")
	}
	if len(mountFacts.MachineNetworks) == 0 {
		report.Skipped = append(report.Skipped, "whether nfs-shareClient admits the workers: unknown machine network (give --machine-network)")
	} else {
		report.Facts["machineNetwork"] = shareclient.Join(mountFacts.MachineNetworks)
		sets, machines, err := machineAPIObjects(ctx, cfg)
		if err != nil {
			report.Skipped = append(report.Skipped, "the MachineSets and Machines: "+err.Error())
		}
		mountFacts.Sets, mountFacts.Machines = shareclient.FromMachineAPI(sets, machines, storageID)
		answer, err := shareclient.Decide(mountFacts)
		if err != nil {
			return err
		}
		facts.MountFrom = &answer
		report.Facts["mountFrom"] = shareclient.Join(answer.Clients)
		report.Facts["mountFromReason"] = answer.Reason
		report.Facts["nfsShareClient"] = answer.Value(facts.ListAllowed)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		sc := &list.Items[i]
		if sc.Provisioner != operator.DriverName {
			continue
		}
		report.Checked = append(report.Checked, sc.Name)
		report.Findings = append(report.Findings, sclint.Check(sc, facts)...)
	}
	if o.g.Output != outputText {
		if err := printStructured(o.streams.Out, o.g.Output, report); err != nil {
			return err
		}
	} else {
		for _, f := range report.Findings {
			fmt.Fprintln(o.streams.Out, f.String())
		}
		if len(report.Findings) == 0 {
			fmt.Fprintf(o.streams.Out, "%d Manila StorageClasses checked (%s): nothing wrong\n", len(report.Checked), strings.Join(report.Checked, ", "))
		}
		for _, s := range report.Skipped {
			fmt.Fprintf(o.streams.ErrOut, "not checked: %s\n", s)
		}
	}
	if len(report.Findings) > 0 {
		return silentFailure(exitInvalid)
	}
	return nil
}

// machineAPIObjects lists the MachineSets and Machines of openshift-machine-api; none on a
// cluster without the Machine API.
func machineAPIObjects(ctx context.Context, cfg *rest.Config) (sets, machines []*unstructured.Unstructured, err error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	list := func(resource string) ([]*unstructured.Unstructured, error) {
		l, err := dyn.Resource(schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: resource}).
			Namespace("openshift-machine-api").List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s: %v", resource, err)
		}
		out := make([]*unstructured.Unstructured, len(l.Items))
		for i := range l.Items {
			out[i] = &l.Items[i]
		}
		return out, nil
	}
	if sets, err = list("machinesets"); err != nil {
		return nil, nil, err
	}
	machines, err = list("machines")
	return sets, machines, err
}

// installConfigNetworks reads the machine networks from kube-system/cluster-config-v1 (what the
// installer leaves there); nil when it cannot be read.
func (o *StorageClassesCheckOptions) installConfigNetworks(ctx context.Context, kube kubernetes.Interface) []netip.Prefix {
	cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "cluster-config-v1", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	cidrs, err := operator.MachineNetworksFromInstallConfig([]byte(cm.Data["install-config"]))
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(c); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}
