package main

import (
	"io"
	"os"
)

// IOStreams is where a command reads and writes, so tests can capture both.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

func stdStreams() IOStreams {
	return IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}
