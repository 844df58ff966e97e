package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/atomicfile"
	"github.com/manila-setup/manila-setup/internal/inputfile"
	"github.com/manila-setup/manila-setup/internal/textdiff"
	"github.com/manila-setup/manila-setup/machinesets"
)

// runFile patches the MachineSets of -f instead of the cluster's (GitOps).
func (o *machineSetsPatchOptions) runFile(ctx context.Context, sel machinesets.Selection, opts attach.Options) error {
	res, err := runPatchFile(ctx, o.g, o.streams, o.attachFlags, inputfile.MachineSets, opts, func(ctx context.Context, name string, data []byte, opts attach.Options) (*attach.FileResult, error) {
		return machinesets.PatchFile(ctx, name, data, sel, opts)
	}, nil)
	if err != nil {
		return err
	}
	return o.invalidResults(res.Results)
}

// runPatchFile patches the objects of -f instead of the cluster's (GitOps), the same way for
// every kind: kind bounds what -f may hold; patch is the kind's PatchFile; note, when set, adds lines to the table.
func runPatchFile(ctx context.Context, g *GlobalOptions, streams IOStreams, a attachFlags, kind inputfile.Kind, opts attach.Options,
	patch func(ctx context.Context, name string, data []byte, opts attach.Options) (*attach.FileResult, error),
	note func(w io.Writer, res *attach.FileResult) error) (*attach.FileResult, error) {
	name, data, err := readInput(ctx, a.File, streams.In, kind, func(err error) error { return invalidInput(fmt.Errorf("-f: %w", err)) })
	if err != nil {
		return nil, err
	}
	opts.DryRun = false // the file's diff is the dry run
	res, err := patch(ctx, name, data, opts)
	if err := patchErrorExit(err); err != nil {
		return nil, err
	}
	if err := stoppedBeforeWriting(ctx, name); err != nil {
		return nil, err
	}
	err = emitPatchedFile(g, streams, a.DryRun, a.InPlace, patchedFile{
		path: a.File, name: name, data: data, out: res.Output, reformatted: res.Reformatted, objects: res.Objects,
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

// fileFlagsError checks -f with --in-place and --dry-run.
func fileFlagsError(file string, inPlace, dryRun bool) error {
	switch {
	case inPlace && file == "":
		return usageError("--in-place writes the file of -f back: give -f FILE")
	case inPlace && file == "-":
		return usageError("--in-place cannot write standard input back: give -f FILE")
	case inPlace && dryRun:
		return usageError("--in-place and --dry-run cannot be used together")
	}
	return nil
}

// patchedFile is the outcome of a file patch, for emitPatchedFile.
type patchedFile struct {
	path, name  string
	data, out   []byte
	reformatted bool
	objects     []json.RawMessage
	results     any                     // for -o json|yaml with --in-place
	table       func(w io.Writer) error // a line per object
}

// emitPatchedFile says what a file patch did, the same way for every kind: the patched file on
// standard output and the table on standard error; or, with --in-place, the file written back
// (atomically, .bak kept) and the table on standard output; or, with --dry-run, the table and
// the diff. -o json prints the patched objects as a List.
func emitPatchedFile(g *GlobalOptions, streams IOStreams, dryRun, inPlace bool, f patchedFile) error {
	changed := string(f.out) != string(f.data)
	if f.reformatted && changed {
		fmt.Fprintf(streams.ErrOut, "note: %s was written out again as a whole (a flow-style list, or a value replaced): the same content, other formatting\n", f.name)
	}
	switch {
	case dryRun:
		if err := f.table(streams.Out); err != nil {
			return err
		}
		if changed {
			fmt.Fprintf(streams.Out, "\n%s", textdiff.Unified(f.name, f.name+" (patched)", f.data, f.out))
		}
		_, err := fmt.Fprintln(streams.Out, "\nDry run: nothing was written.")
		return err
	case inPlace:
		report := streams.Out
		if g.Output != outputText {
			if err := printStructured(streams.Out, g.Output, f.results); err != nil {
				return err
			}
			report = streams.ErrOut
		} else if err := f.table(streams.Out); err != nil {
			return err
		}
		if !changed {
			_, err := fmt.Fprintf(report, "%s: unchanged, not written\n", f.name)
			return err
		}
		if err := atomicfile.WriteFile(f.path, f.out, true); err != nil {
			return environmentError(fmt.Errorf("writing %s: %w; it was not changed", f.path, err))
		}
		_, err := fmt.Fprintf(report, "%s: written; the previous version is in %s.bak\n", f.name, f.path)
		return err
	}
	if err := f.table(streams.ErrOut); err != nil {
		return err
	}
	if g.Output == outputJSON {
		enc := json.NewEncoder(streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": f.objects})
	}
	_, err := streams.Out.Write(f.out)
	return err
}
