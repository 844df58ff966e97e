package standin

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A driver that never listens makes DialCSI give up when ctx ends, saying why ctx ended.
func TestDialCSIGivesUpWithTheContextsCause(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "csi.sock")
	cause := errors.New("gave up after 200ms")
	ctx, cancel := context.WithTimeoutCause(context.Background(), 200*time.Millisecond, cause)
	defer cancel()
	conn, err := DialCSI(ctx, socket)
	if err == nil {
		_ = conn.Close()
		t.Fatalf("DialCSI of %s, where nothing listens, succeeded", socket)
	}
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), socket) {
		t.Fatalf("DialCSI: %v, want an error naming %s and carrying %q", err, socket, cause)
	}
}
