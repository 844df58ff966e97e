package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/manila-setup/manila-setup/internal/inputfile"
)

// readInput reads a file a command is given (path, or standard input for "-") as a file of kind
// k: no larger than k allows, and stopped by Ctrl-C (internal/inputfile). A stop exits 130;
// every other failure goes through bad, the command's own exit code for an input it cannot use.
// Every command reads its input before it contacts or writes anything, so a stop there has done
// nothing.
func readInput(ctx context.Context, path string, stdin io.Reader, k inputfile.Kind, bad func(error) error) (string, []byte, error) {
	name, data, err := inputfile.Read(ctx, path, stdin, k)
	var stop *inputfile.InterruptedError
	switch {
	case errors.As(err, &stop):
		return "", nil, interrupted(fmt.Errorf("%v; nothing was contacted or written", err))
	case err != nil:
		return "", nil, bad(err)
	}
	return name, data, nil
}

// stoppedBeforeWriting ends a command that Ctrl-C stopped while it checked and patched its input
// in memory (work that does not look at ctx, a few seconds at most for the largest input
// accepted): it stops here, before anything is written.
func stoppedBeforeWriting(ctx context.Context, name string) error {
	if ctx.Err() != nil {
		return interrupted(fmt.Errorf("stopped after %s was read and patched in memory; nothing was written", name))
	}
	return nil
}
