package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/mustgather"
)

// MustGatherOptions are the flags of `must-gather`.
type MustGatherOptions struct {
	DestDir string

	g        *GlobalOptions
	streams  IOStreams
	cloudOpt *cloudOptions
}

func newMustGatherCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &MustGatherOptions{g: g, streams: streams, cloudOpt: &cloudOptions{global: g, streams: streams}}
	cmd := &cobra.Command{
		Use:   "must-gather",
		Short: "Collect what a support case about the Manila CSI driver needs into a folder, without a secret",
		Long: `Collect, into --dest-dir, what a support case about the Manila CSI driver needs and OpenShift's
own must-gather leaves out: the ClusterCSIDriver manila.csi.openstack.org and the companion's
ManilaCompanion; the Deployments, DaemonSets, pods, container logs (current and previous, the
newest 8 MiB of each) and events of the operator's and the driver's namespaces; the driver's
StorageClasses, VolumeSnapshotClasses, PersistentVolumes and their claims; the CSINodes; the
MachineSets and the ControlPlaneMachineSet with their attachment records; and, with --os-cloud,
the shares and access rules of the driver's volumes.

No Secret is collected, and every file is scrubbed of the values of the Secrets of those
namespaces (plain, base64- and URL-encoded) before it is written. What could not be collected is
listed on standard error. Called as gather (what oc adm must-gather runs in an image, as
/usr/bin/gather), the binary collects into /must-gather, the folder oc copies back.`,
		Example: `  manila-setup must-gather --dest-dir ./manila-must-gather --os-cloud mycloud`,
		Args:    cobra.NoArgs,
		RunE:    cmdrun.RunE(o),
	}
	cmd.Flags().StringVar(&o.DestDir, "dest-dir", "", "the folder to collect into (default: must-gather.local.<time> in the working folder)")
	o.cloudOpt.addFlags(cmd.Flags())
	return cmd
}

func (o *MustGatherOptions) Complete(*cobra.Command, []string) error {
	if o.DestDir == "" {
		o.DestDir = fmt.Sprintf("must-gather.local.%d", time.Now().Unix())
	}
	return nil
}

func (o *MustGatherOptions) Validate() error {
	if o.g.OSCloud != "" {
		return o.cloudOpt.validate()
	}
	return nil
}

func (o *MustGatherOptions) Run(ctx context.Context) error {
	// In a pod without a kubeconfig, the pod's service account (oc adm must-gather).
	c, err := o.g.podClients(ctx)
	if err != nil {
		return err
	}
	opts := mustgather.Options{Kube: c.kube, Dynamic: c.dynamic, Dir: o.DestDir}
	if o.g.OSCloud != "" {
		opts.Cloud = o.cloudOpt.connect
	}
	if o.g.Verbosity > 0 {
		opts.Progress = func(p string) { fmt.Fprintln(o.streams.ErrOut, "wrote", p) }
	}
	sum, err := mustgather.Collect(ctx, opts)
	if err != nil {
		return environmentError(fmt.Errorf("must-gather into %s: %w", o.DestDir, err))
	}
	if o.g.Output != outputText {
		return printStructured(o.streams.Out, o.g.Output, sum)
	}
	for _, s := range sum.Skipped {
		fmt.Fprintf(o.streams.ErrOut, "not collected: %s\n", s)
	}
	fmt.Fprintf(o.streams.Out, "%s: %d files, %d bytes; no Secret, secret values scrubbed\n", o.DestDir, sum.Files, sum.Bytes)
	return nil
}
