package installconfig

import (
	"context"
	"fmt"

	"github.com/manila-setup/manila-setup/internal/atomicfile"
)

// FilePatch is `installconfig patch` from the bytes read to the file written, in the order that
// loses nothing: patch in memory (Patch), ask the cloud about the result (CloudProblems, when
// Cloud is set), and only then write it, atomically, keeping the original as PATH.bak.
type FilePatch struct {
	// Name is the file as messages name it; Data its bytes.
	Name string
	Data []byte
	// Options say what to add or remove.
	Options PatchOptions
	// Cloud, when set, gives the checker of the cloud the result is asked about: an ID the
	// cloud rejects stops the patch before anything is written. It is called only once the
	// patch has been made in memory, so that a patch refused offline never contacts the cloud.
	Cloud func(context.Context) (CloudChecker, error)
	// Path is where the result is written when it changed; "" writes nothing (a dry run, or
	// standard output).
	Path string
}

// FilePatchResult is what Run did.
type FilePatchResult struct {
	*PatchResult
	// Diff is the unified diff from Data to Output.
	Diff string
	// Written says Path was replaced; Backup is where the original is kept then.
	Written bool
	Backup  string
}

// CloudCheckError says the cloud could not be asked about the result: nothing was written.
type CloudCheckError struct {
	Name string
	Err  error
}

func (e *CloudCheckError) Error() string {
	return fmt.Sprintf("%s not patched: the cloud checks could not run (use --offline to patch without them): %v", e.Name, e.Err)
}

func (e *CloudCheckError) Unwrap() error { return e.Err }

// CloudRejectedError says the cloud rejects IDs of the result: nothing was written.
type CloudRejectedError struct {
	Name     string
	Problems Problems
}

func (e *CloudRejectedError) Error() string {
	return fmt.Sprintf("%s not patched: the cloud rejects the result (%d problem(s))", e.Name, len(e.Problems))
}

// StoppedError says the context ended once the patch was made in memory: nothing was written.
type StoppedError struct {
	Name string
	Err  error
}

func (e *StoppedError) Error() string {
	return fmt.Sprintf("stopped after %s was read and patched in memory; nothing was written", e.Name)
}

func (e *StoppedError) Unwrap() error { return e.Err }

// Run patches, checks and writes. Its errors: *OptionError and *InvalidError from Patch,
// *CloudCheckError, *CloudRejectedError, *StoppedError, or the write's. The cloud's warnings
// join the offline ones in the result's Warnings.
func (p FilePatch) Run(ctx context.Context) (*FilePatchResult, error) {
	f, _ := Parse(p.Name, p.Data)
	res, err := Patch(f, p.Options)
	if err != nil {
		return nil, err
	}
	if p.Cloud != nil {
		if err := p.checkWithCloud(ctx, res); err != nil {
			return nil, err
		}
	}
	out := &FilePatchResult{PatchResult: res, Diff: UnifiedDiff("a/"+p.Name, "b/"+p.Name, p.Data, res.Output)}
	if ctx.Err() != nil {
		return nil, &StoppedError{Name: p.Name, Err: ctx.Err()}
	}
	if res.Changed && p.Path != "" {
		if err := atomicfile.WriteFile(p.Path, res.Output, true); err != nil {
			return nil, fmt.Errorf("writing %s: %w", p.Path, err)
		}
		out.Written, out.Backup = true, p.Path+".bak"
	}
	return out, nil
}

// checkWithCloud adds the cloud's warnings to res and refuses on its errors; the offline
// problems are already in res.Warnings.
func (p FilePatch) checkWithCloud(ctx context.Context, res *PatchResult) error {
	checker, err := p.Cloud(ctx)
	if err != nil {
		return &CloudCheckError{Name: p.Name, Err: err}
	}
	fromCloud, err := CloudProblems(ctx, p.Name, res.Output, checker)
	if err != nil {
		return &CloudCheckError{Name: p.Name, Err: err}
	}
	var rejected Problems
	for _, problem := range fromCloud {
		if problem.Severity == SeverityError {
			rejected = append(rejected, problem)
		} else {
			res.Warnings = append(res.Warnings, problem)
		}
	}
	if len(rejected) > 0 {
		return &CloudRejectedError{Name: p.Name, Problems: rejected}
	}
	return nil
}
