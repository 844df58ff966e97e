package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/manila-setup/manila-setup/internal/atomicfile"
	"github.com/manila-setup/manila-setup/internal/textdiff"
)

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
