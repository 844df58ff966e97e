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

// runFile patches the MachineSets of -f instead of the cluster's (GitOps): the patched file to
// standard output and the table to standard error, or the file written back (--in-place), or a
// diff (--dry-run).
func (o *machineSetsPatchOptions) runFile(ctx context.Context, opts machinesets.PatchOptions) error {
	name := o.File
	var data []byte
	var err error
	if name == "-" {
		name = "standard input"
		data, err = io.ReadAll(o.streams.In)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return invalidInput(fmt.Errorf("-f: %w", err))
	}
	res, err := machinesets.PatchFile(ctx, name, data, opts)
	if err := patchErrorExit(err); err != nil {
		return err
	}
	changed := string(res.Output) != string(data)
	if res.Reformatted && changed {
		fmt.Fprintf(o.streams.ErrOut, "note: %s was written out again as a whole (a flow-style list, or a value replaced): the same content, other formatting\n", name)
	}
	switch {
	case o.DryRun:
		if _, err := writePatchTable(o.streams.Out, res.Results); err != nil {
			return err
		}
		if changed {
			fmt.Fprintf(o.streams.Out, "\n%s", textdiff.Unified(name, name+" (patched)", data, res.Output))
		}
		fmt.Fprintln(o.streams.Out, "\nDry run: nothing was written.")
	case o.InPlace:
		if o.g.Output != outputText {
			if err := printStructured(o.streams.Out, o.g.Output, res.Results); err != nil {
				return err
			}
		} else if _, err := writePatchTable(o.streams.Out, res.Results); err != nil {
			return err
		}
		report := o.streams.Out
		if o.g.Output != outputText {
			report = o.streams.ErrOut
		}
		if !changed {
			fmt.Fprintf(report, "%s: unchanged, not written\n", name)
			break
		}
		if err := atomicfile.WriteFile(o.File, res.Output, true); err != nil {
			return environmentError(fmt.Errorf("writing %s: %w; it was not changed", o.File, err))
		}
		fmt.Fprintf(report, "%s: written; the previous version is in %s.bak\n", name, o.File)
	default:
		if _, err := writePatchTable(o.streams.ErrOut, res.Results); err != nil {
			return err
		}
		if o.g.Output == outputJSON {
			list := map[string]any{"apiVersion": "v1", "kind": "List", "items": res.Objects}
			enc := json.NewEncoder(o.streams.Out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(list); err != nil {
				return err
			}
		} else if _, err := o.streams.Out.Write(res.Output); err != nil {
			return err
		}
	}
	writePatchWarnings(o.streams.ErrOut, res.Results)
	return o.invalidResults(res.Results)
}
