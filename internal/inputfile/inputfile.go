// Package inputfile reads the files and streams manila-setup is given (-f, -f -, an
// install-config, clouds.yaml, a kubeconfig, a CA bundle) so that no input can take the machine
// down or hang a command: each kind of file has a size it cannot exceed, stated in the error; a
// regular file is judged by its size before it is read; a stream (standard input, a pipe, a
// FIFO, a device such as /dev/zero) is read up to that size plus one byte and refused past it;
// and every read ends when its context does (Ctrl-C), even one blocked on a FIFO nobody writes.
package inputfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync/atomic"
)

// Kind is what a file is expected to be, and the most it may hold.
type Kind struct {
	// Name is the kind with its article, for errors: "a MachineSet list".
	Name string
	// Max is the largest size accepted, in bytes.
	Max int64
}

// The kinds of file the CLI reads, and their limits. Each is far above what a real file of its
// kind holds (an install-config with a large trust bundle is well under 1 MiB; a GitOps file of
// every MachineSet of a cluster a few dozen KiB; 2 MiB is 956 MachineSets or 4,923 compute
// pools) and small enough that reading, parsing and patching a file of exactly that size, as
// dense as such a file gets, stays under 300 MiB of memory (docs/performance.md).
var (
	InstallConfig = Kind{"an install-config", 2 << 20}
	MachineSets   = Kind{"a MachineSet list", 2 << 20}
	ClusterAPI    = Kind{"a Cluster API manifest list", 2 << 20}
	NodePools     = Kind{"a NodePool list", 2 << 20}
	ControlPlane  = Kind{"a ControlPlaneMachineSet manifest", 2 << 20}
	Kubeconfig    = Kind{"a kubeconfig", 4 << 20}
	CloudsYAML    = Kind{"a clouds.yaml", 1 << 20}
	SecureYAML    = Kind{"a secure.yaml", 1 << 20}
	CABundle      = Kind{"a CA bundle", 4 << 20}
	ClientCert    = Kind{"a client certificate", 1 << 20}
	ClientKey     = Kind{"a client key", 1 << 20}
)

// StdinName is how standard input is named in errors and diffs.
const StdinName = "standard input"

// TooLargeError: the input holds more than its kind may.
type TooLargeError struct {
	Name string // the path, or "standard input"
	Kind Kind
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %s; %s is not", e.Name, Size(e.Kind.Max), e.Kind.Name)
}

// InterruptedError: the context ended (Ctrl-C, SIGTERM) before the input was read whole. It
// wraps the context's error, so errors.Is(err, context.Canceled) holds.
type InterruptedError struct {
	Name string
	Read int64 // bytes read before the stop
	Err  error
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("stopped while reading %s (%s read)", e.Name, Size(e.Read))
}

func (e *InterruptedError) Unwrap() error { return e.Err }

// NotAFileError: the path names a directory (or something else that cannot be read as a file).
type NotAFileError struct {
	Name string
	Kind Kind
	What string // "a directory"
}

func (e *NotAFileError) Error() string {
	return fmt.Sprintf("%s is %s, not %s", e.Name, e.What, e.Kind.Name)
}

// Size prints a limit the way the errors state it: "16 MiB", "512 KiB", "100 bytes".
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n == 1:
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// Read reads path as a file of kind k; "-" is stdin. It returns the name to use in messages
// (the path, or "standard input"). Errors are *TooLargeError, *InterruptedError,
// *NotAFileError, or the *fs.PathError of opening or reading the file.
func Read(ctx context.Context, path string, stdin io.Reader, k Kind) (name string, data []byte, err error) {
	if path == "-" {
		data, err = readStream(ctx, StdinName, func() (io.ReadCloser, error) { return io.NopCloser(stdin), nil }, k)
		return StdinName, data, err
	}
	data, err = ReadFile(ctx, path, k)
	return path, data, err
}

// ReadFile reads the file at path as a file of kind k (see Read).
func ReadFile(ctx context.Context, path string, k Kind) ([]byte, error) {
	// Stat does not open the file, so it never blocks, even on a FIFO.
	st, err := os.Stat(path)
	if err != nil {
		// Said as opening it, as every program says a file it cannot read.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Op = "open"
		}
		return nil, err
	}
	if err := Check(path, st, k); err != nil {
		return nil, err
	}
	return readStream(ctx, path, func() (io.ReadCloser, error) { return os.Open(path) }, k)
}

// Check judges a file by what Stat says of it, before anything opens it: a directory is
// refused, a regular file larger than the kind allows too. Streams (FIFOs, devices, sockets)
// pass: only reading them tells their size. For files that a library reads itself (clouds.yaml's
// cacert through gophercloud), Check is what can be done before handing the path over.
func Check(path string, st fs.FileInfo, k Kind) error {
	switch {
	case st.IsDir():
		return &NotAFileError{Name: path, Kind: k, What: "a directory"}
	case st.Mode().IsRegular() && st.Size() > k.Max:
		return &TooLargeError{Name: path, Kind: k}
	}
	return nil
}

// IsStream tells whether st is something only reading can size: a FIFO, a device, a socket.
func IsStream(st fs.FileInfo) bool {
	return !st.Mode().IsRegular() && !st.IsDir()
}

// chunk is what one read asks for: a stream past the limit is found after at most this much
// more than the limit.
const chunk = 64 << 10

// readStream opens and reads up to k.Max+1 bytes in a goroutine, so that the caller returns
// when ctx ends even while open or read is blocked (a FIFO with no writer, a terminal nobody
// types into). The goroutine left blocked then ends with the process: the CLI exits after an
// interrupt.
func readStream(ctx context.Context, name string, open func() (io.ReadCloser, error), k Kind) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, &InterruptedError{Name: name, Err: err}
	}
	type result struct {
		data []byte
		err  error
	}
	var progress atomic.Int64
	done := make(chan result, 1)
	go func() {
		data, err := readAll(ctx, open, k, &progress)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		if errors.Is(r.err, errTooLarge) {
			return nil, &TooLargeError{Name: name, Kind: k}
		}
		if r.err != nil && ctx.Err() != nil {
			return nil, &InterruptedError{Name: name, Read: progress.Load(), Err: ctx.Err()}
		}
		return r.data, r.err
	case <-ctx.Done():
		return nil, &InterruptedError{Name: name, Read: progress.Load(), Err: ctx.Err()}
	}
}

var errTooLarge = errors.New("too large")

func readAll(ctx context.Context, open func() (io.ReadCloser, error), k Kind, progress *atomic.Int64) ([]byte, error) {
	r, err := open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// The buffer grows as data comes, never past k.Max+1: a stream that claims nothing about
	// its size gets no memory it has not sent.
	buf := make([]byte, 0, min(k.Max+1, chunk))
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if int64(len(buf)) > k.Max {
			return nil, errTooLarge
		}
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(k.Max+1, max(2*int64(cap(buf)), chunk)))
			copy(grown, buf)
			buf = grown
		}
		want := min(cap(buf), len(buf)+chunk)
		n, err := r.Read(buf[len(buf):want])
		buf = buf[:len(buf)+n]
		progress.Store(int64(len(buf)))
		if errors.Is(err, io.EOF) {
			if int64(len(buf)) > k.Max {
				return nil, errTooLarge
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
