// Package atomicfile replaces a file so that nothing is ever half-written: a temporary file in
// the same folder, fsynced, with the old file's mode, renamed over it, optionally after keeping
// the old content in a .bak file the same way. The install-config and MachineSet patches that
// write files in place both go through it.
package atomicfile
