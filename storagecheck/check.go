// Package storagecheck checks the Manila StorageClasses of a cluster, and the volumes made from
// them, for what the Manila CSI driver lets pass in silence. It gathers the facts the check
// needs (the operator's mode, the machine network, Manila's share types and export subnets, the
// Machine API objects, where the workers mount from) and runs the operator's StorageClass lint
// (operator/sclint) and volume check (operator/shareclient) on them. It is what
// `manila-setup storageclasses check` runs; the operator does not link it.
package storagecheck

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/operator/sclint"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// Inputs are what Check reads besides the cluster's own objects.
type Inputs struct {
	// Config reaches the cluster.
	Config *rest.Config
	// MachineNetworks are the nodes' networks; empty: the install-config's machineNetwork, kept
	// in kube-system/cluster-config-v1.
	MachineNetworks []netip.Prefix
	// Cloud connects to the cloud whose Manila is asked for its share types, the subnets it
	// exports in and the access rules of the volumes' shares; nil: Manila is not asked. It is
	// called once, after the StorageClasses are listed; its error is returned as it is.
	Cloud func(context.Context) (*openstack.Client, error)
}

// Report is the result, as `storageclasses check -o json|yaml` prints it.
type Report struct {
	Checked  []string          `json:"checked"`
	Findings []sclint.Finding  `json:"findings"`
	Skipped  []string          `json:"skipped,omitempty"`
	Facts    map[string]string `json:"facts"`
	// Volumes are the driver's PersistentVolumes with what their shares' access rules admit
	// (with a cloud, when where the workers mount from is known).
	Volumes []shareclient.VolumeVerdict `json:"volumes,omitempty"`

	// MountFrom is where the workers mount from, when it is known (Facts holds it as text).
	MountFrom *shareclient.Answer `json:"-"`
}

// VolumeFindings counts the volumes whose share does not admit every network the workers
// mount from.
func (r *Report) VolumeFindings() int {
	n := 0
	for _, v := range r.Volumes {
		if v.Skipped == "" && len(v.Missing) > 0 {
			n++
		}
	}
	return n
}

// Failed tells whether anything was found: a StorageClass finding or a volume whose share
// does not admit where the workers mount from.
func (r *Report) Failed() bool { return len(r.Findings) > 0 || r.VolumeFindings() > 0 }

// Check checks every StorageClass of the Manila CSI driver and, with a cloud, the access rules
// of the shares of the driver's PersistentVolumes. What cannot be known is listed in
// Report.Skipped, not an error; the error is for a cluster or a Manila that cannot be asked
// at all (the StorageClasses, the share types), or a canceled context. Nothing is written.
func Check(ctx context.Context, in Inputs) (*Report, error) {
	cfg := in.Config
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	list, err := kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing StorageClasses on %s: %v", cfg.Host, err)
	}
	report := &Report{Findings: []sclint.Finding{}, Facts: map[string]string{}}
	facts := sclint.Facts{ListAllowed: true}
	if det, err := deploy.Detect(ctx, cfg); err == nil && det.Mode == platform.ModeCompanion {
		// The platform's driver serves the classes; it may be older than v1.35.0.
		facts.ListAllowed = false
	}
	facts.SecretExists = func(ns, name string) (bool, bool) { return sclint.SecretExists(ctx, meta, ns, name) }
	mountFacts := shareclient.Facts{MachineNetworks: in.MachineNetworks}
	if len(mountFacts.MachineNetworks) == 0 {
		// Unreadable: the volumes are judged without the machine networks, as the Facts say.
		ic, _ := deploy.ReadInstallConfig(ctx, kube)
		mountFacts.MachineNetworks = ic.MachineNetworks
	}
	var storageIDs []string
	var cloud *openstack.Client
	if in.Cloud != nil {
		c, err := in.Cloud(ctx)
		if err != nil {
			return nil, err
		}
		types, err := c.ShareTypes(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing Manila's share types: %w", err)
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
		} else if best, err := d.StorageNetwork(); err == nil {
			storageIDs = []string{best.Network.ID}
			mountFacts.ExportSubnets = best.ExportSubnets()
			report.Facts["storageNetwork"] = best.Network.Label()
			report.Facts["exportSubnets"] = shareclient.Join(mountFacts.ExportSubnets)
		} else if zones := zoneNetworks(err); zones != nil {
			// A storage network per availability zone: each zone's workers mount from their
			// address on their own zone's, as the operator counts them.
			for _, z := range zones {
				for _, c := range z.Networks {
					if !slices.Contains(storageIDs, c.Network.ID) {
						storageIDs = append(storageIDs, c.Network.ID)
						mountFacts.ExportSubnets = append(mountFacts.ExportSubnets, c.ExportSubnets()...)
					}
				}
			}
			report.Facts["storageNetwork"] = "one per availability zone: " + openstack.ZoneSummary(zones)
			report.Facts["exportSubnets"] = shareclient.Join(mountFacts.ExportSubnets)
		} else {
			report.Skipped = append(report.Skipped, "the subnets Manila exports in: "+err.Error())
		}
	} else {
		report.Skipped = append(report.Skipped, "share types, the subnets Manila exports in and the access rules of existing volumes: Manila not asked (give --os-cloud)")
	}
	if len(mountFacts.MachineNetworks) == 0 {
		report.Skipped = append(report.Skipped, "whether nfs-shareClient admits the workers: unknown machine network (give --machine-network)")
	} else {
		report.Facts["machineNetwork"] = shareclient.Join(mountFacts.MachineNetworks)
		in, err := machineAPIObjects(ctx, cfg, kube)
		if err != nil {
			report.Skipped = append(report.Skipped, "the MachineSets, Machines and Nodes: "+err.Error())
		}
		mountFacts.Sets, mountFacts.Machines = shareclient.FromMachineAPI(in, storageIDs...)
		answer, err := shareclient.Decide(mountFacts)
		if err != nil {
			return nil, err
		}
		facts.MountFrom = &answer
		report.MountFrom = &answer
		report.Facts["mountFrom"] = shareclient.Join(answer.Clients)
		report.Facts["mountFromReason"] = answer.Reason
		report.Facts["nfsShareClient"] = answer.Value(facts.ListAllowed)
		if cloud != nil {
			volumes, err := checkVolumes(ctx, kube, cloud, answer)
			if openstack.KindOf(err) == openstack.KindCanceled {
				return nil, err
			}
			if err != nil {
				report.Skipped = append(report.Skipped, "the access rules of existing volumes: "+err.Error())
			}
			report.Volumes = volumes
		}
	}
	if in.Cloud != nil && facts.MountFrom == nil {
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
	return report, nil
}

// zoneNetworks are each zone's storage networks when discovery's rule found the zones served on
// different ones; nil for any other answer.
func zoneNetworks(err error) []openstack.ZoneNetworks {
	var sne *openstack.StorageNetworkError
	if errors.As(err, &sne) {
		return sne.Zones
	}
	return nil
}
