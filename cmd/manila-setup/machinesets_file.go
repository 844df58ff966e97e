package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/manila-setup/manila-setup/internal/atomicfile"
	"github.com/manila-setup/manila-setup/internal/textdiff"
	"github.com/manila-setup/manila-setup/machinesets"
)

// runFile patches the MachineSets of -f instead of the cluster's (GitOps).
func (o *machineSetsPatchOptions) runFile(ctx context.Context, opts machinesets.PatchOptions) error {
	name, data, err := readPatchFile(o.File, o.streams)
	if err != nil {
		return err
	}
	res, err := machinesets.PatchFile(ctx, name, data, opts)
	if err := patchErrorExit(err); err != nil {
		return err
	}
	err = emitPatchedFile(o.g, o.streams, o.DryRun, o.InPlace, patchedFile{
		path: o.File, name: name, data: data, out: res.Output, reformatted: res.Reformatted, objects: res.Objects,
		results: res.Results,
		table:   func(w io.Writer) error { _, err := writePatchTable(w, res.Results); return err },
	})
	if err != nil {
		return err
	}
	writePatchWarnings(o.streams.ErrOut, res.Results)
	return o.invalidResults(res.Results)
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

// readPatchFile reads -f: a path, or - for standard input.
func readPatchFile(path string, streams IOStreams) (name string, data []byte, err error) {
	if path == "-" {
		name = "standard input"
		data, err = io.ReadAll(streams.In)
	} else {
		name = path
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return "", nil, invalidInput(fmt.Errorf("-f: %w", err))
	}
	return name, data, nil
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
