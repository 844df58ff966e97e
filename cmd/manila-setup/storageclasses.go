package main

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
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
--os-cloud, the subnets Manila exports in.

With --os-cloud it also checks the existing volumes: a share keeps the access rules it was
created with (nfs-shareClient is read once), so a PersistentVolume of the driver made before the
workers moved (attached to the storage network afterwards) may not admit where they mount from
now. Each such volume is reported with the command that adds the missing rule; shares that
cannot be read are listed as not checked. Nothing is written. Exit 1 when anything is found.`,
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
	// Volumes are the driver's PersistentVolumes with what their shares' access rules admit
	// (with --os-cloud, when where the workers mount from is known).
	Volumes []shareclient.VolumeVerdict `json:"volumes,omitempty"`
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
	var cloud *openstack.Client
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
		cloud = c
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
		report.Skipped = append(report.Skipped, "share types, the subnets Manila exports in and the access rules of existing volumes: Manila not asked (give --os-cloud)")
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
		if cloud != nil {
			volumes, err := checkVolumes(ctx, kube, cloud, answer)
			if openstack.KindOf(err) == openstack.KindCanceled {
				return err
			}
			if err != nil {
				report.Skipped = append(report.Skipped, "the access rules of existing volumes: "+err.Error())
			}
			report.Volumes = volumes
		}
	}
	if o.g.OSCloud != "" && facts.MountFrom == nil {
		report.Skipped = append(report.Skipped, "the access rules of existing volumes: where the workers mount from is not known")
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
		judged := 0
		for _, v := range report.Volumes {
			if v.Skipped != "" {
				continue
			}
			judged++
			if f := v.Finding(facts.MountFrom.Reason); f != "" {
				fmt.Fprintf(o.streams.Out, "%s; add the %s: %s\n", f, "rule"+pluralS(len(v.Missing)), strings.Join(v.Fix, " && "))
			}
		}
		if judged > 0 && volumeFindings(report.Volumes) == 0 {
			whose := "their shares' access rules"
			if judged == 1 {
				whose = "its share's access rules"
			}
			fmt.Fprintf(o.streams.Out, "%d Manila volume%s checked: %s admit %s, where the workers mount from\n", judged, pluralS(judged), whose, shareclient.Join(facts.MountFrom.Clients))
		}
		for _, s := range report.Skipped {
			fmt.Fprintf(o.streams.ErrOut, "not checked: %s\n", s)
		}
		for _, v := range report.Volumes {
			if v.Skipped != "" {
				fmt.Fprintf(o.streams.ErrOut, "not checked: volume %s (share %s): %s\n", v.Name, cmp.Or(v.ShareID, v.ShareName), v.Skipped)
			}
		}
	}
	if len(report.Findings) > 0 || volumeFindings(report.Volumes) > 0 {
		return silentFailure(exitInvalid)
	}
	return nil
}

// checkVolumes compares the access rules of the share of every PersistentVolume of the driver
// with where the workers mount from (answer): the driver gives a share the rules of its class's
// nfs-shareClient once, when it creates it, so volumes made before the answer changed (the
// storage network attached afterwards) may not admit the workers' current addresses. A share
// that cannot be read (gone, or the policy does not allow it) is skipped, with the reason. The
// error is for PersistentVolumes that cannot be listed, or a canceled context.
// One request per share, a few at a time.
func checkVolumes(ctx context.Context, kube kubernetes.Interface, cloud *openstack.Client, answer shareclient.Answer) ([]shareclient.VolumeVerdict, error) {
	pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PersistentVolumes: %v", err)
	}
	var volumes []shareclient.Volume
	shares := map[string]bool{}
	for i := range pvs.Items {
		if v, ok := shareclient.VolumeOf(&pvs.Items[i], operator.DriverName); ok {
			volumes = append(volumes, v)
			if v.ShareID != "" {
				shares[v.ShareID] = true
			}
		}
	}
	if len(volumes) == 0 {
		return nil, nil
	}
	type result struct {
		rules []shareclient.AccessRule
		err   error
	}
	var mu sync.Mutex
	results := map[string]result{}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for id := range shares {
		g.Go(func() error {
			rules, err := cloud.AccessRules(gctx, id)
			if openstack.KindOf(err) == openstack.KindCanceled {
				return err
			}
			var r result
			r.err = err
			for _, x := range rules {
				r.rules = append(r.rules, shareclient.AccessRule{ID: x.ID, Type: x.Type, To: x.To, Level: x.Level, State: x.State})
			}
			mu.Lock()
			results[id] = r
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]shareclient.VolumeVerdict, 0, len(volumes))
	for _, v := range volumes {
		if r := results[v.ShareID]; v.ShareID != "" && r.err != nil {
			out = append(out, shareclient.VolumeVerdict{Volume: v, Skipped: "its share's access rules cannot be read: " + r.err.Error()})
			continue
		}
		out = append(out, shareclient.CheckVolume(v, results[v.ShareID].rules, answer))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// volumeFindings counts the volumes whose share does not admit every network the workers mount
// from.
func volumeFindings(vs []shareclient.VolumeVerdict) int {
	n := 0
	for _, v := range vs {
		if v.Skipped == "" && len(v.Missing) > 0 {
			n++
		}
	}
	return n
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
