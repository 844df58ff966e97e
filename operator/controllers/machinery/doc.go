// Package machinery is what every controller of the operator runs on, and nothing else: one REST
// client per API group over a narrow scheme (kube.go), informers and listers, made on first use
// for CRDs that may appear at run time (informers.go), the loop, queue, resync and write gate of
// a controller (controller.go), the kind table (kinds.go), server-side apply, re-create and
// delete, all gated (write.go), conditions and status (status.go), events, metrics, and the
// values one controller publishes for others to read (published.go). It imports no controller;
// operator/controllers builds the controllers on it (start.go). It keeps library-go's
// conventions but not its controller machinery, which would link client-go's full scheme into
// the operator (docs/performance.md).
package machinery
