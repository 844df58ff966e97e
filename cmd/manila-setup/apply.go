package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/inputfile"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/workers"
)

// The patch commands are flags → workers.Request → workers.Cluster.Apply → printer: the rules
// (the network policy, the capacity, the removal risk, --dry-run and --force) are Apply's,
// the same for every kind. What is here binds flags, reads -f and prints.

// request is the workers.Request of the flags for sel: the change, the cloud of --os-cloud
// (not for a removal: what is removed may be gone from the cloud), and the file of -f.
func (a *attachFlags) request(ctx context.Context, g *GlobalOptions, streams IOStreams, sel workers.Selection, kind inputfile.Kind) (workers.Request, error) {
	req := workers.Request{Selection: sel, Attachment: a.attachment(), Discover: a.Discover,
		DryRun: a.DryRun, Force: a.Force, By: "manila-setup " + version}
	if a.Remove {
		r := a.removal()
		req.Remove = &r
	} else if g.OSCloud != "" {
		// No --ca-bundle or --timeout here: clouds.yaml's cacert and the default timeout.
		cloud, err := (&cloudOptions{global: g, streams: streams}).connect(ctx)
		if err != nil {
			return req, environmentError(fmt.Errorf("--os-cloud %s: %w", g.OSCloud, err))
		}
		a.cloud, req.Cloud = cloud, cloud
	}
	if a.File != "" {
		name, data, err := readInput(ctx, a.File, streams.In, kind, func(err error) error { return invalidInput(fmt.Errorf("-f: %w", err)) })
		if err != nil {
			return req, err
		}
		req.File = &workers.File{Name: name, Data: data}
	}
	return req, nil
}

// sayReport says on standard error what the policy decided, what --force let through and what
// a dry run would have refused, and keeps the networks' findings for -o json|yaml. It is said
// once per Apply (said: already).
func (a *attachFlags) sayReport(errOut io.Writer, report *workers.Report) {
	if report == nil || a.said {
		return
	}
	a.said = true
	nets := report.Networks
	if d := nets.Discovered; d != nil {
		fmt.Fprintf(errOut, "discovered: network %s: %s\n", d.Network.Label(), strings.Join(d.Reasons, "; "))
	}
	for _, z := range report.Zones {
		for _, c := range z.Networks {
			fmt.Fprintf(errOut, "discovered: availability zone %s: network %s, for MachineSet %s: %s\n",
				z.Zone, c.Network.Label(), strings.Join(z.MachineSets, ", "), strings.Join(c.Reasons, "; "))
		}
	}
	for _, p := range nets.Forced {
		if p.Finding != nil {
			a.findings = append(a.findings, networkFinding{network: p.ID, Finding: *p.Finding, Forced: true})
		}
	}
	for _, p := range nets.Warnings {
		fmt.Fprintf(errOut, "warning: --network[%d] %s: %s\n", p.Index, p.ID, p.Problem)
		if p.Finding != nil {
			a.findings = append(a.findings, networkFinding{network: p.ID, Finding: *p.Finding})
		}
	}
	for _, id := range nets.PortSecurityDisabled {
		fmt.Fprintf(errOut, "note: network %s has port security disabled: its port is written without port security, security groups and allowed address pairs\n", id)
	}
	for _, w := range report.Warnings {
		fmt.Fprintf(errOut, "warning: %s\n", w)
	}
	for _, n := range report.Notes {
		fmt.Fprintf(errOut, "note: %s\n", n)
	}
	if len(nets.IDs) > 0 {
		a.Networks = nets.IDs
	}
}

// printApplied is what every patch command does with Apply's answer: say what it decided
// (sayReport), print the rows of a report that planned any (print), and give the error its
// words and exit code.
func (a *attachFlags) printApplied(streams IOStreams, report *workers.Report, err error, print func(*workers.Report) error) error {
	a.sayReport(streams.ErrOut, report)
	if report != nil && report.Planned {
		if printErr := print(report); printErr != nil && err == nil {
			err = printErr
		}
	}
	return applyErrorExit(err)
}

// applyErrorExit gives an error of Apply its words and exit code: what the user gave or what
// the rules refuse is 1, the environment 2.
func applyErrorExit(err error) error {
	var policy *attach.NetworkPolicyError
	var unseen *workers.UnseenError
	var busy *machinesets.ControlPlaneRefusedError
	var zones *workers.ZoneError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &policy):
		return networkPolicyExit(err)
	case errors.As(err, &unseen), errors.As(err, &busy), errors.As(err, &zones):
		return invalidInput(err)
	}
	return patchErrorExit(err)
}

// applyFile patches the objects of -f (GitOps), the same way for every kind; note, when set,
// adds lines to the table.
func (a *attachFlags) applyFile(ctx context.Context, g *GlobalOptions, streams IOStreams, req workers.Request, note func(w io.Writer, res *attach.FileResult) error) (*attach.FileResult, error) {
	report, err := (workers.Cluster{}).Apply(ctx, req)
	a.sayReport(streams.ErrOut, report)
	if err := applyErrorExit(err); err != nil {
		return nil, err
	}
	res, name := report.File, req.File.Name
	if err := stoppedBeforeWriting(ctx, name); err != nil {
		return nil, err
	}
	err = emitPatchedFile(g, streams, a.DryRun, a.InPlace, patchedFile{
		path: a.File, name: name, data: req.File.Data, out: res.Output, reformatted: res.Reformatted, objects: res.Objects,
		results: a.resultsJSON(res.Results),
		table: func(w io.Writer) error {
			if _, err := writePatchTable(w, res.Results); err != nil || note == nil {
				return err
			}
			return note(w, res)
		},
	})
	writePatchWarnings(streams.ErrOut, res.Results)
	return res, err
}

// invalidRow is exit 1 when a selected object cannot be patched (a broken providerSpec, a
// missing template), naming it; silent with -o json|yaml, whose rows say it.
func invalidRow(g *GlobalOptions, report *workers.Report) error {
	if report == nil {
		return nil
	}
	r := report.Invalid()
	switch {
	case r == nil:
		return nil
	case g.Output != outputText:
		return silentFailure(exitInvalid)
	}
	kind := r.Kind
	if kind == "" {
		kind = "MachineSet"
	}
	ns := r.Namespace
	if ns == "" {
		ns = machinesets.Namespace
	}
	return invalidInput(fmt.Errorf("%s %s/%s cannot be patched: %s", kind, ns, r.Name, r.Reason))
}
