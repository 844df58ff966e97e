package clusterapi

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/machinesets"
)

// A Machine API MachineSet that Cluster API is authoritative for (the migration is complete for
// it) makes its machines from its Cluster API copy of the same name in
// machinesets.ClusterAPINamespace: machinesets.Patch and machinesets.Rollout skip it
// (PatchResult.ClusterAPI, SetProgress.ClusterAPI), and these functions do the work on the copy.
// `machinesets patch|rollout` and the wizard both use them, so that both say the same.

// PatchCopies attaches opts.Attachment, through Patch, to the Cluster API copies of the
// MachineSets of results that Cluster API is authoritative for, and puts each copy's result in
// its MachineSet's row: one row per MachineSet either way. It also returns the templates Patch
// deleted or kept.
func PatchCopies(ctx context.Context, dyn dynamic.Interface, results []machinesets.PatchResult, opts machinesets.PatchOptions) ([]machinesets.PatchResult, []TemplateResult, error) {
	var names []string
	for _, r := range results {
		if r.ClusterAPI {
			names = append(names, "machineset/"+r.Name)
		}
	}
	if len(names) == 0 {
		return results, nil, nil
	}
	report, err := Patch(ctx, dyn, Options{
		Attachment: opts.Attachment, Namespace: machinesets.ClusterAPINamespace, Names: names,
		Kinds: []string{KindMachineSet}, DryRun: opts.DryRun, By: opts.By, Now: opts.Now,
	})
	if err != nil {
		return results, nil, fmt.Errorf("the Machine API MachineSets are done; their Cluster API copies in %s: %w", machinesets.ClusterAPINamespace, err)
	}
	byName := map[string]Result{}
	for _, r := range report.Results {
		byName[r.Name] = r
	}
	for i, r := range results {
		c, ok := byName[r.Name]
		if !r.ClusterAPI || !ok {
			continue
		}
		row := c.PatchResult
		row.Role, row.ClusterAPI = r.Role, true
		switch {
		case c.OldTemplate != "":
			row.Warning = joinSentences(row.Warning, fmt.Sprintf("MachineSet %s: Cluster API is authoritative for it: its Cluster API copy in %s now makes its machines from OpenStackMachineTemplate %s (was %s); %s", r.Name, machinesets.ClusterAPINamespace, c.Template, c.OldTemplate, c.Rolls))
		case c.Reason != "":
			row.Reason = "Cluster API copy in " + machinesets.ClusterAPINamespace + ": " + c.Reason
		}
		results[i] = row
	}
	return results, report.Templates, nil
}

// RollCopies rolls, through Rollout, the Cluster API copies of the MachineSets of results that
// Cluster API is authoritative for, reporting their progress (marked ClusterAPI) to progress,
// and puts their final state in their MachineSet's row: one line per MachineSet either way.
// opts gives the rollout's settings; its Selection and Progress are not used.
func RollCopies(ctx context.Context, dyn dynamic.Interface, results []rollout.SetProgress, opts rollout.Options, progress func(rollout.SetProgress)) ([]rollout.SetProgress, error) {
	var names []string
	for _, r := range results {
		if r.ClusterAPI {
			names = append(names, r.Name)
		}
	}
	if len(names) == 0 {
		return results, nil
	}
	copies, err := Rollout(ctx, dyn, machinesets.ClusterAPINamespace, names, rollout.Options{
		MaxSurge: opts.MaxSurge, MaxUnavailable: opts.MaxUnavailable, Timeout: opts.Timeout, PollInterval: opts.PollInterval, Now: opts.Now,
		Progress: func(sp rollout.SetProgress) {
			sp.ClusterAPI = true
			if progress != nil {
				progress(sp)
			}
		},
	})
	for _, c := range copies {
		if i := slices.IndexFunc(results, func(r rollout.SetProgress) bool { return r.ClusterAPI && r.Name == c.Name }); i >= 0 {
			c.ClusterAPI = true
			results[i] = c
		}
	}
	var selection *machinesets.SelectionError
	if errors.As(err, &selection) {
		return results, fmt.Errorf("the Machine API MachineSets are rolled; their Cluster API copies in %s: %w", machinesets.ClusterAPINamespace, err)
	}
	return results, err
}

func joinSentences(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
