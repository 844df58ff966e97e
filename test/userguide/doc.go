// Package userguide checks docs/user-guide.md against the product (build tag integration, run
// by make test): every output the guide shows is marked with the name of a sample, and the test
// produces each sample by running the command as the guide prints it, against the sandbox of
// `make demo` (started by `make demo` itself, in a folder of its own). A sample whose text
// differs from the guide's, beyond what changes from run to run (IDs, times, ports), fails the
// test; `go test -tags integration ./test/userguide -update` writes this run's output into the
// guide instead.
package userguide
