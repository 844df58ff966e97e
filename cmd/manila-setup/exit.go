package main

import (
	"errors"
	"fmt"

	"github.com/manila-setup/manila-setup/internal/inputfile"
)

// Exit codes shared by every command, so scripts and install hooks can branch on them.
const (
	exitOK      = 0 // success
	exitInvalid = 1 // invalid input, or a check failed
	exitUsage   = 2 // usage error, or the environment (cloud, cluster, file system) failed us
	// exitInterrupted: stopped by Ctrl-C or SIGTERM, as shells report a process ended by SIGINT
	// (128+2); a stop the user chose inside the wizard is a success (0).
	exitInterrupted = 130
)

// exitError carries the exit code a failure should end the process with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// invalidInput marks err as "the input is wrong" (exit 1).
func invalidInput(err error) error { return &exitError{code: exitInvalid, err: err} }

// usageError marks err as a usage problem (exit 2).
func usageError(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// environmentError marks err as a failure of what we depend on: cloud, cluster, files (exit 2).
func environmentError(err error) error { return &exitError{code: exitUsage, err: err} }

// interrupted marks err as the end of a command the user stopped (exit 130).
func interrupted(err error) error { return &exitError{code: exitInterrupted, err: err} }

// silentFailure ends the process with code without printing anything more: the command has
// already reported the problem in the requested output format.
var errSilent = errors.New("")

func silentFailure(code int) error { return &exitError{code: code, err: errSilent} }

func exitCodeOf(err error) int {
	if err == nil {
		return exitOK
	}
	// A read of a file that Ctrl-C stopped is a stop wherever it happened (a kubeconfig,
	// clouds.yaml), whatever the caller made of it.
	var stop *inputfile.InterruptedError
	if errors.As(err, &stop) {
		return exitInterrupted
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Errors cobra raises itself (unknown flag, wrong argument count) are usage errors.
	return exitUsage
}
