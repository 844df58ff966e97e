package workers

import (
	"context"
	"errors"
	"fmt"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
)

// Apply is the one Day-2 change, for every kind of machine: the commands (`machinesets`,
// `clusterapi`, `nodepools` and `controlplane patch`) and the wizard build a Request and print
// its Report. It owns every rule a kind must not decide for itself:
//
//   - the network policy (attach.ResolveNetworks: Manila exports there, not the machines' own
//     network, fit to be a second NIC), with a cloud;
//   - the capacity check (attach.CapacityCheck: free addresses for every machine of every kind);
//   - the removal risk (RemovalRisk: pods cut off their Manila volumes by the machines replaced);
//   - the write, of the cluster's objects or of a file (Request.File);
//   - the rollout after it (Request.Rollout).
//
// One rule for --dry-run and --force, the same for every kind: a refusal of the policy, the
// capacity check or the removal risk is an error without either; under DryRun nothing is
// written and each refusal is a Note of what would be refused (the diffs are still made); under
// Force each refusal is a Warning and the change is written. The ControlPlaneMachineSet's own
// safety (its masters at rest, the project's quota for one more master) follows Force too.
func (c Cluster) Apply(ctx context.Context, req Request) (*Report, error) {
	report := &Report{}
	d, byZone, err := c.discover(ctx, req)
	if err != nil {
		return report, err
	}
	if byZone != nil {
		return report, c.applyByZone(ctx, req, d, byZone, report)
	}
	opts, err := c.options(ctx, req, d, report)
	if err != nil {
		return report, err
	}
	report.Planned = true
	if req.File != nil {
		return report, c.applyFile(ctx, req, opts, report)
	}
	if err := c.refuseOtherZones(ctx, req, opts, report); err != nil {
		return report, err
	}
	if err := c.refuseRemovalRisk(ctx, req, opts, report); err != nil {
		return report, err
	}
	patched, err := c.write(ctx, req.Selection, opts, req.Force)
	if patched != nil {
		report.Results, report.Templates = patched.Results, patched.Templates
	}
	if err != nil || req.DryRun || req.Rollout == nil || req.Rollout.Later || report.Invalid() != nil {
		return report, err
	}
	if req.Patched != nil {
		req.Patched(report)
	}
	return report, c.roll(ctx, req, report)
}

// Request is one Day-2 change: what to change (attach or remove), where (Selection, or a
// file), and how (DryRun, Force, the rollout after it).
type Request struct {
	Selection
	// Attachment is what to attach: the networks and security groups given. Ignored when
	// Remove is set.
	Attachment attach.Attachment
	// Discover adds the network Manila exports on, as `networks discover` finds it (Cloud).
	Discover bool
	// Chosen: the networks were chosen by the user who saw the policy's findings (the
	// wizard): the policy is not asked again; the IDs, port security and capacity are.
	Chosen bool
	// Remove takes off what the objects' records say manila-setup attached (attach.Removal)
	// instead of attaching. Nothing is looked up in the cloud: it may be gone already.
	Remove *attach.Removal

	DryRun bool
	Force  bool

	// Cloud, when set, is where the IDs are looked up and the policy, the capacity and the
	// masters' quota are checked; nil: the IDs are only validated.
	Cloud *openstack.Client
	// By is recorded in the attachment record (attach.Annotation), e.g. "manila-setup v0.3.0".
	By string

	// File, when set, is patched instead of the cluster's objects (GitOps): the Selection
	// then names one kind, and nothing of the cluster is read or written.
	File *File
	// Rollout, when set, replaces the machines after the write: the MachineSets (and the Cluster
	// API sets) as `machinesets rollout` does, then the masters as `controlplane rollout`.
	Rollout *Rollout
	// Patched, when set, hears the Report after the write and before the rollout (the
	// commands print the patch's table then, and the rollout's progress after it).
	Patched func(*Report)
}

// File is a file of objects to patch instead of the cluster's.
type File struct {
	Name string // how messages name it: its path, or "standard input"
	Data []byte
}

// Rollout is how Apply replaces the machines after the write.
type Rollout struct {
	// Sets is how the MachineSets are rolled (rollout.Options: surge, timeout, canary,
	// progress); its MaxSurge is also the surge the capacity check counts.
	Sets rollout.Options
	// Masters is how the masters are followed, when the Selection holds the control plane.
	Masters machinesets.ControlPlaneRolloutOptions
	// Later: the caller rolls the MachineSets itself, in a step of its own (the wizard):
	// nothing is rolled here, but the removal risk counts their machines as replaced.
	Later bool
}

// Report is what Apply did: one row per object, in the order MachineSets, Cluster API objects,
// NodePools, the ControlPlaneMachineSet; the Cluster API templates replaced earlier that were
// looked at; what the policy, the capacity check and the removal risk said; the rollout's sets.
type Report struct {
	// Planned: the checks before the plan passed (the policy, the IDs' cloud lookups), so the
	// rows say what was, or would be, done; false: the request was refused before any row.
	Planned   bool                        `json:"-"`
	Results   []attach.Result             `json:"results"`
	Templates []clusterapi.TemplateResult `json:"templates,omitempty"`
	// File is the patched file, with Request.File.
	File *attach.FileResult `json:"-"`
	// Networks is what the network policy decided: the discovered network, those forced, the
	// findings, those without port security.
	Networks attach.Networks `json:"-"`
	// Risk is the removal risk, when it was checked.
	Risk *RemovalRisk `json:"-"`
	// Warnings are what Force let through, one sentence each.
	Warnings []string `json:"warnings,omitempty"`
	// Notes are what a dry run would have refused, and what was checked and found clear.
	Notes []string `json:"notes,omitempty"`
	// Refused are the refusals a dry run noted, as errors (*attach.CapacityError,
	// *attach.MountedError, *UnseenError): what the real run would answer.
	Refused []error `json:"-"`
	// Zones are what --discover gave each availability zone's MachineSets, when Manila serves
	// the cloud's zones on different storage networks (nil otherwise: Networks.Discovered).
	Zones []ZoneAttachment `json:"zones,omitempty"`
	// Rollout is the rollout's sets, and Masters the masters' replacement, when rolled.
	Rollout []rollout.SetProgress             `json:"rollout,omitempty"`
	Masters *machinesets.ControlPlaneProgress `json:"masters,omitempty"`
}

// Invalid is the first row whose object cannot be patched (a broken providerSpec, a missing
// template), or nil.
func (r *Report) Invalid() *attach.Result {
	for i := range r.Results {
		if r.Results[i].Action == attach.ActionInvalid {
			return &r.Results[i]
		}
	}
	return nil
}

func (r *Report) warn(s string) { r.Warnings = append(r.Warnings, s) }
func (r *Report) note(s string) { r.Notes = append(r.Notes, s) }

// options are the attach.Options of the request: the removal, or the attachment the policy
// resolved (over d, the discovery already made, when set), with the Neutron checker and the
// capacity check.
func (c *Cluster) options(ctx context.Context, req Request, d *openstack.Discovery, report *Report) (attach.Options, error) {
	opts := attach.Options{DryRun: req.DryRun, By: req.By, Attachment: req.Attachment}
	if req.Remove != nil {
		r := *req.Remove
		opts.Remove = &r
		return opts, nil
	}
	if req.Cloud == nil {
		return opts, nil
	}
	opts.Checker = attach.NeutronChecker{Client: req.Cloud}
	if c.Room == nil {
		c.Room = req.Cloud.RoomForServer
	}
	if req.Chosen {
		if len(opts.Attachment.PortSecurityDisabled) == 0 {
			nets, err := req.Cloud.Networks(ctx, opts.Attachment.Networks...)
			if err != nil {
				return opts, err
			}
			opts.Attachment.PortSecurityDisabled = attach.PortSecurityOff(nets, opts.Attachment.Networks)
		}
	} else {
		var nets attach.Networks
		var err error
		if d != nil {
			nets, err = attach.Resolve(d, req.Cloud.Identity(), req.Attachment.Networks, c.policy(ctx, req, report))
		} else {
			nets, err = attach.ResolveNetworks(ctx, req.Cloud, req.Attachment.Networks, c.policy(ctx, req, report))
		}
		if err != nil {
			return opts, err
		}
		report.Networks = nets
		for _, p := range nets.Forced {
			report.warn(fmt.Sprintf("--network[%d] %s: %s (--force: attaching it anyway)", p.Index, p.ID, p.Problem))
		}
		opts.Attachment = nets.Attachment(req.Attachment.SecurityGroups)
	}
	var err error
	opts.Capacity, err = capacity(ctx, req, opts.Attachment.Networks, report)
	return opts, err
}

// policy is the network policy of the request: what this cluster says of its machines (their
// addresses, its networks and VIPs), when the kinds patched are this cluster's machines; the
// nodes of Cluster API's workload clusters and of hosted clusters are elsewhere, and a file has
// no cluster. What cannot be read is not checked, and a warning says so.
func (c *Cluster) policy(ctx context.Context, req Request, report *Report) attach.NetworkPolicy {
	var p attach.NetworkPolicy
	own := req.MachineSets != nil || req.ControlPlane
	if own && req.File == nil && c.Kube != nil {
		addrs, err := machinesets.NodeAddresses(ctx, c.Kube)
		if err != nil {
			report.warn(fmt.Sprintf("%v: cannot tell whether a network is the machines' own", err))
		}
		networks, err := InstallConfigNetworks(ctx, c.Kube)
		if err != nil {
			report.warn(fmt.Sprintf("%v: a storage subnet is not checked against the cluster's networks and VIPs", err))
		}
		p.NodeAddresses, p.MachineNetworks, p.VIPs = addrs, networks.All(), networks.VIPs
	}
	// NodePools put no security groups on their ports.
	groupsOnPorts := req.MachineSets != nil || req.ControlPlane || req.clusterAPI() != nil
	p.Discover, p.Force, p.SecurityGroups = req.Discover, req.Force, groupsOnPorts && len(req.Attachment.SecurityGroups) > 0
	return p
}

// capacity is the check of the free addresses of the networks attached, with the request's
// rule: refused unless Force (a Warning) or DryRun (a Note).
func capacity(ctx context.Context, req Request, networks []string, report *Report) (*attach.CapacityCheck, error) {
	caps, err := attach.CapacityOf(ctx, req.Cloud, networks)
	if err != nil {
		return nil, fmt.Errorf("nothing patched: counting the free addresses of the storage network: %w", err)
	}
	surge := int32(rollout.DefaultMaxSurge)
	if req.Rollout != nil && !req.Rollout.Later {
		surge = req.Rollout.Sets.MaxSurge
	}
	check := &attach.CapacityCheck{Networks: caps, Surge: int(surge), Force: req.Force || req.DryRun}
	check.Warn = func(e *attach.CapacityError) {
		if req.Force {
			report.warn(fmt.Sprintf("%v (--force: attaching it anyway)", e))
		} else {
			report.note(fmt.Sprintf("without --dry-run the patch would be refused: %v", e))
			report.Refused = append(report.Refused, e)
		}
	}
	return check, nil
}

// applyFile patches the objects of req.File, of the one kind the Selection names.
func (c Cluster) applyFile(ctx context.Context, req Request, opts attach.Options, report *Report) error {
	opts.DryRun = false // the file's diff is the dry run
	var res *attach.FileResult
	var err error
	f := req.File
	switch {
	case req.MachineSets != nil:
		res, err = machinesets.PatchFile(ctx, f.Name, f.Data, *req.MachineSets, opts)
	case req.clusterAPI() != nil:
		res, err = clusterapi.PatchFile(ctx, f.Name, f.Data, *req.clusterAPI(), opts)
	case req.nodePools() != nil:
		res, err = nodepools.PatchFile(ctx, f.Name, f.Data, *req.nodePools(), opts)
	case req.ControlPlane:
		res, err = machinesets.PatchControlPlaneFile(ctx, f.Name, f.Data, opts)
	default:
		return errors.New("a file patch needs one kind of object to patch")
	}
	if res != nil {
		report.File, report.Results = res, res.Results
	}
	return err
}

// refuseRemovalRisk checks, before anything is written, what the change replaces: the
// machines a removal takes the storage network off at once (MachineDeployments, NodePools, the
// masters), and, when the MachineSets are rolled, theirs. The answer follows the request's
// rule (Verdict): a refusal, a Warning per finding with Force, a Note under DryRun.
func (c Cluster) refuseRemovalRisk(ctx context.Context, req Request, opts attach.Options, report *Report) error {
	rolls := req.Rollout != nil && req.MachineSets != nil
	if opts.Remove == nil && !rolls {
		return nil
	}
	removal := Removal{}
	if rolls {
		removal.MachineSets = req.MachineSets
	}
	if opts.Remove != nil {
		dry := opts
		dry.DryRun = true
		planned, err := c.write(ctx, req.Selection, dry, req.Force)
		if err != nil {
			return err
		}
		removal.Planned = planned.Results
	}
	risk, err := c.RemovalRisk(ctx, removal)
	if err != nil {
		return err
	}
	report.Risk = &risk
	done := ""
	if removal.Planned == nil {
		done = "no Machine was replaced"
	}
	warnings, err := risk.Verdict(req.Force, done)
	switch {
	case err != nil && req.DryRun:
		report.note("without --dry-run the removal would be refused: " + err.Error())
		report.Refused = append(report.Refused, err)
	case err != nil:
		return err
	}
	for _, w := range warnings {
		report.warn(w)
	}
	if risk.Checked != "" {
		report.note(risk.Checked)
	}
	return nil
}

// refuseOtherZones checks, before anything is written, that no machines get a storage network
// Manila serves no share on in their availability zone (attach.Networks.ZoneProblems): on a
// cloud of several zones, a worker of one zone attached to another zone's storage network gets a
// port that leads nowhere. The answer follows the request's rule: a refusal
// (*attach.NetworkPolicyError), a Warning per set with Force, a Note under DryRun.
func (c Cluster) refuseOtherZones(ctx context.Context, req Request, opts attach.Options, report *Report) error {
	if len(report.Networks.Zones) == 0 || opts.Remove != nil {
		return nil
	}
	dry := opts
	dry.DryRun = true
	planned, err := c.write(ctx, req.Selection, dry, req.Force)
	if err != nil {
		return err
	}
	problems := report.Networks.ZoneProblems(planned.Results)
	if len(problems) == 0 {
		return nil
	}
	refusal := &attach.NetworkPolicyError{Problems: problems}
	switch {
	case req.Force:
		for _, p := range problems {
			report.warn(fmt.Sprintf("--network %s: %s (--force: attaching it anyway)", p.ID, p.Problem))
		}
	case req.DryRun:
		report.note("without --dry-run the patch would be refused: " + refusal.Error())
		report.Refused = append(report.Refused, refusal)
	default:
		return refusal
	}
	return nil
}

// roll replaces the machines after the write: the MachineSets and the Cluster API sets, then,
// when the control plane was changed, follows the masters.
func (c Cluster) roll(ctx context.Context, req Request, report *Report) error {
	if req.MachineSets != nil || req.clusterAPI() != nil {
		progress, err := c.Roll(ctx, req.Selection, req.Rollout.Sets)
		report.Rollout = progress
		if err != nil {
			return err
		}
	}
	if !req.ControlPlane {
		return nil
	}
	opts := req.Rollout.Masters
	if opts.Operators == nil {
		opts.Operators = c.Dynamic
	}
	p, err := machinesets.ControlPlaneRollout(ctx, c.Machines, c.Kube, opts)
	report.Masters = &p
	return err
}

// clusterAPI is the Cluster API scope of the selection: ClusterAPIScope, else the names of
// ClusterAPI in the OpenShift namespace; nil: none.
func (s Selection) clusterAPI() *clusterapi.Scope {
	switch {
	case s.ClusterAPIScope != nil:
		return s.ClusterAPIScope
	case len(s.ClusterAPI) > 0:
		return &clusterapi.Scope{Namespace: clusterapi.OpenShiftNamespace, Names: s.ClusterAPI}
	}
	return nil
}

// nodePools is the NodePool scope of the selection: NodePoolScope, else the NodePools named;
// nil: none.
func (s Selection) nodePools() *nodepools.Scope {
	switch {
	case s.NodePoolScope != nil:
		return s.NodePoolScope
	case len(s.NodePools) > 0:
		return &nodepools.Scope{Names: s.NodePools}
	}
	return nil
}
