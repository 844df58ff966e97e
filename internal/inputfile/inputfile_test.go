package inputfile

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var small = Kind{Name: "a test file", Max: 1000}

func TestReadRegularFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte("x"), n), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name    string
		size    int
		tooBig  bool
		wantErr string
	}{
		{"empty", 0, false, ""},
		{"exactly the limit", 1000, false, ""},
		{"one byte over", 1001, true, "is larger than 1000 bytes; a test file is not"},
		{"far over", 1 << 20, true, "is larger than 1000 bytes; a test file is not"},
	} {
		p := write(tt.name, tt.size)
		name, data, err := Read(context.Background(), p, nil, small)
		var tooLarge *TooLargeError
		if tt.tooBig != errors.As(err, &tooLarge) {
			t.Errorf("%s: error %v, want too large: %v", tt.name, err, tt.tooBig)
			continue
		}
		if tt.tooBig {
			if !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), p) {
				t.Errorf("%s: error %q, want the path and %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if name != p || len(data) != tt.size {
			t.Errorf("%s: got %q and %d bytes, want %q and %d", tt.name, name, len(data), p, tt.size)
		}
	}
}

func TestReadRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	_, _, err := Read(context.Background(), dir, nil, small)
	var notFile *NotAFileError
	if !errors.As(err, &notFile) || err.Error() != dir+" is a directory, not a test file" {
		t.Errorf("directory: %v", err)
	}
	_, _, err = Read(context.Background(), filepath.Join(dir, "missing"), nil, small)
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "open ") {
		t.Errorf("missing file: %v, want open ...: no such file", err)
	}
}

// A device that never ends is read to the limit and one byte more, then refused.
func TestReadDevZeroStopsAtTheLimit(t *testing.T) {
	_, _, err := Read(context.Background(), "/dev/zero", nil, Kind{Name: "a test file", Max: 8 << 20})
	var tooLarge *TooLargeError
	if !errors.As(err, &tooLarge) || err.Error() != "/dev/zero is larger than 8 MiB; a test file is not" {
		t.Fatalf("/dev/zero: %v", err)
	}
}

func TestReadStandardInput(t *testing.T) {
	name, data, err := Read(context.Background(), "-", strings.NewReader("abc"), small)
	if err != nil || name != StdinName || string(data) != "abc" {
		t.Errorf("stdin: %q %q %v", name, data, err)
	}
	_, _, err = Read(context.Background(), "-", io.LimitReader(zeros{}, 1001), small)
	if err == nil || err.Error() != "standard input is larger than 1000 bytes; a test file is not" {
		t.Errorf("stdin over the limit: %v", err)
	}
	_, data, err = Read(context.Background(), "-", io.LimitReader(zeros{}, 1000), small)
	if err != nil || len(data) != 1000 {
		t.Errorf("stdin at the limit: %d bytes, %v", len(data), err)
	}
}

// A stream nobody closes (standard input from a pipe, a FIFO with a writer that waits) is left
// when the context ends: the read returns at once, saying how much it had read.
func TestReadEndsWithTheContext(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("partial")) }()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, _, err := Read(ctx, "-", pr, small)
	var stop *InterruptedError
	if !errors.As(err, &stop) || !errors.Is(err, context.Canceled) {
		t.Fatalf("stdin that never closes: %v, want an interruption", err)
	}
	if err.Error() != "stopped while reading standard input (7 bytes read)" {
		t.Errorf("message %q", err)
	}
}

// A FIFO with no writer blocks open(2) itself; the read still ends with the context.
func TestReadFIFOWithoutWriter(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := ReadFile(ctx, fifo, small)
	var stop *InterruptedError
	if !errors.As(err, &stop) || !strings.Contains(err.Error(), "stopped while reading "+fifo) {
		t.Fatalf("FIFO without writer: %v", err)
	}
	// Let the goroutine left in open(2) go.
	if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
		w.Close()
	}
}

// A FIFO whose writer sends everything and closes reads like a file.
func TestReadFIFOThatCloses(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		_, _ = w.Write([]byte("kind: Config\n"))
	}()
	data, err := ReadFile(context.Background(), fifo, small)
	if err != nil || string(data) != "kind: Config\n" {
		t.Errorf("FIFO: %q %v", data, err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{1: "1 byte", 100: "100 bytes", 1 << 10: "1 KiB", 2 << 20: "2 MiB", 1000: "1000 bytes", 1536 << 10: "1536 KiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
