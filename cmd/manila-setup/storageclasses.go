package main

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/operator/shareclient"
	"github.com/manila-setup/manila-setup/storagecheck"
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

func (o *StorageClassesCheckOptions) Run(ctx context.Context) error {
	cfg, err := o.g.restConfig(ctx)
	if err != nil {
		return err
	}
	in := storagecheck.Inputs{Config: cfg, MachineNetworks: o.machine}
	if o.g.OSCloud != "" {
		in.Cloud = o.cloudOpt.connect
	}
	report, err := storagecheck.Check(ctx, in)
	if err != nil {
		return environmentError(err)
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
			if f := v.Finding(report.MountFrom.Reason); f != "" {
				fmt.Fprintf(o.streams.Out, "%s; add the %s: %s\n", f, "rule"+pluralS(len(v.Missing)), strings.Join(v.Fix, " && "))
			}
		}
		if judged > 0 && report.VolumeFindings() == 0 {
			whose := "their shares' access rules"
			if judged == 1 {
				whose = "its share's access rules"
			}
			fmt.Fprintf(o.streams.Out, "%d Manila volume%s checked: %s admit %s, where the workers mount from\n", judged, pluralS(judged), whose, shareclient.Join(report.MountFrom.Clients))
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
	if report.Failed() {
		return silentFailure(exitInvalid)
	}
	return nil
}
