package nodepools

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
)

// TestRemoveFile: attached, then removed, the GitOps file is what it was, byte for byte: the
// ports manila-setup added go, the one added by hand (hc1-gpu's, on a network of its own)
// stays; a second removal, without a record, changes nothing; --network naming the hand-added
// network is an error naming it.
func TestRemoveFile(t *testing.T) {
	const net = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"
	const handNet = "0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37"
	now := func() time.Time { return time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC) }
	attached, err := PatchFile(context.Background(), "pools.yaml", []byte(gitopsFile), Scope{},
		attach.Options{Attachment: attach.Attachment{Networks: []string{net}}, By: "test", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	remove := func(r attach.Removal, data []byte) (*attach.FileResult, error) {
		return PatchFile(context.Background(), "pools.yaml", data, Scope{}, attach.Options{Remove: &r, By: "test", Now: now})
	}
	removed, err := remove(attach.Removal{}, attached.Output)
	if err != nil {
		t.Fatal(err)
	}
	if string(removed.Output) != gitopsFile || removed.Reformatted {
		t.Errorf("attached then removed is not the original (reformatted %t):\n%s", removed.Reformatted, removed.Output)
	}
	for _, r := range removed.Results {
		if r.Action != attach.ActionPatched || strings.Join(r.RemovedNetworks, ",") != net {
			t.Errorf("%s: %+v", r.Name, r)
		}
	}
	again, err := remove(attach.Removal{}, removed.Output)
	if err != nil || string(again.Output) != gitopsFile || again.Results[1].Action != attach.ActionUnchanged || !strings.Contains(again.Results[1].Reason, "no attachment record") {
		t.Errorf("removed twice: %v %+v", err, again)
	}
	var fe *filepatch.Error // the file's error, exit 1 as the others
	if _, err := remove(attach.Removal{Networks: []string{handNet}}, attached.Output); !errors.As(err, &fe) ||
		!strings.Contains(err.Error(), `--network[0]: Invalid value: "`+handNet+`"`) || !strings.Contains(err.Error(), "NodePool clusters/hc1-gpu") {
		t.Errorf("--network of the hand-added port: %v", err)
	}
}
