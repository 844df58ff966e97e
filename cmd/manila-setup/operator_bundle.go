package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/bundle"
)

// OperatorBundleOptions are the flags of `operator bundle`.
type OperatorBundleOptions struct {
	Dir             string
	Version         string
	Image           string
	MustGatherImage string
	Replaces        string
	SkipRange       string

	streams IOStreams
	opts    bundle.Options
}

func newOperatorBundleCommand(_ *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &OperatorBundleOptions{streams: streams}
	cmd := &cobra.Command{
		Use:   "bundle -d DIR",
		Short: "Write the operator as an OLM bundle (ClusterServiceVersion, metadata, bundle.Dockerfile)",
		Long: `Write an OLM bundle (registry+v1) of the operator into DIR, which must be new or empty:
manifests/ (the ClusterServiceVersion, whose Deployment and permissions are what "operator
render" prints, and the trusted-CA ConfigMap), metadata/annotations.yaml, and bundle.Dockerfile.
Build and push the bundle image, then install it with operator-sdk run bundle or a catalog:

  manila-setup operator bundle -d bundle
  podman build -f bundle/bundle.Dockerfile -t REGISTRY/manila-setup-operator-bundle:vVERSION bundle
  podman push REGISTRY/manila-setup-operator-bundle:vVERSION

For clusters where the platform runs no Manila operator of its own (see docs/operator.md): the
bundle owns no CRD (the ClusterCSIDriver CRD is the platform's on OpenShift). The version is
this build's unless --version; images as for "operator render". The CSV names this build's CLI
image as the operator's must-gather image (operators.openshift.io/must-gather-image), which
oc adm must-gather runs: --must-gather-image names another, "none" leaves it out.`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	cmd.Flags().StringVarP(&o.Dir, "output-dir", "d", "", "directory to write the bundle into (new or empty)")
	cmd.Flags().StringVar(&o.Version, "version", strings.TrimPrefix(version, "v"), "the bundle's semantic version")
	cmd.Flags().StringVar(&o.Image, "image", "", "operator image (default: OPERATOR_IMAGE, else this build's)")
	cmd.Flags().StringVar(&o.MustGatherImage, "must-gather-image", "", `the image oc adm must-gather runs for the operator (default: this build's CLI image; "none" leaves it out)`)
	cmd.Flags().StringVar(&o.Replaces, "replaces", "", "the version of the bundle this one upgrades in the catalog's channel (spec.replaces)")
	cmd.Flags().StringVar(&o.SkipRange, "skip-range", "", `the olm.skipRange annotation: versions that upgrade straight to this one (default ">=0.0.0 <VERSION"; "none" leaves it out)`)
	return cmd
}

func (o *OperatorBundleOptions) Complete(*cobra.Command, []string) error {
	render := operator.RenderOptionsFromEnv(os.Getenv)
	o.opts = bundle.Options{Version: o.Version, OperatorImage: render.OperatorImage, Images: render.Images,
		Replaces: o.Replaces, SkipRange: o.SkipRange}
	if o.Image != "" {
		o.opts.OperatorImage = o.Image
	}
	switch o.MustGatherImage {
	case "":
		// This build's CLI image; a build without a version has none, and names none.
		o.opts.MustGatherImage, _ = operator.CLIImage(imageRepo, version)
	case "none":
	default:
		o.opts.MustGatherImage = o.MustGatherImage
	}
	return nil
}

func (o *OperatorBundleOptions) Validate() error {
	if o.Dir == "" {
		return usageError("--output-dir is required: the directory to write the bundle into")
	}
	if ref := o.opts.MustGatherImage; ref != "" {
		if err := operator.CheckImageReference(ref); err != nil {
			return usageError("--must-gather-image: Invalid value: %q: %v", ref, err)
		}
	}
	return checkOperatorImage(o.opts.OperatorImage)
}

func (o *OperatorBundleOptions) Run(context.Context) error {
	streams := o.streams
	files, err := bundle.Files(o.opts)
	if err != nil {
		if strings.HasPrefix(err.Error(), "version: ") || strings.HasPrefix(err.Error(), "replaces: ") {
			return usageError("--%v", err)
		}
		return err
	}
	if err := bundle.Write(o.Dir, files); err != nil {
		if errors.Is(err, bundle.ErrNotEmpty) {
			return usageError("--output-dir: Invalid value: %v", err)
		}
		return err
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	fmt.Fprintf(streams.Out, "OLM bundle %s.v%s written to %s:\n", bundle.PackageName, strings.TrimPrefix(o.opts.Version, "v"), o.Dir)
	for _, p := range paths {
		fmt.Fprintf(streams.Out, "  %s\n", p)
	}
	return nil
}
