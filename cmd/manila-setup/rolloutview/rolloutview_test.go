package rolloutview

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/attach/rollout"
)

func TestProgressPrinterPlainPrintsChangesOnly(t *testing.T) {
	var out bytes.Buffer
	p := NewProgressPrinter(&out, false, 0)
	p.Update(rollout.SetProgress{Name: "ostest-worker-0", State: rollout.Pending, Total: 3, Phase: "waiting for its turn"})
	p.Update(rollout.SetProgress{Name: "ostest-worker-1", State: rollout.Pending, Total: 2, Phase: "waiting for its turn"})
	for i := 0; i < 5; i++ { // polls that change nothing print nothing
		p.Update(rollout.SetProgress{Name: "ostest-worker-0", State: rollout.Running, Total: 3, Phase: "surging to 4 replicas"})
	}
	p.Update(rollout.SetProgress{Name: "ostest-worker-0", State: rollout.Done, Replaced: 3, Total: 3, Phase: "done: 3 of 3 replaced"})
	got := out.String()
	want := `ostest-worker-0  0/3 replaced  pending     waiting for its turn
ostest-worker-1  0/2 replaced  pending     waiting for its turn
ostest-worker-0  0/3 replaced  rolling     surging to 4 replicas
ostest-worker-0  3/3 replaced  done        done: 3 of 3 replaced
`
	if got != want {
		t.Errorf("plain output:\n%s\nwant:\n%s", got, want)
	}
	if strings.Contains(got, "\x1b") {
		t.Error("escape sequences in plain output")
	}
}

func TestProgressPrinterTerminalRewritesLines(t *testing.T) {
	var out bytes.Buffer
	p := NewProgressPrinter(&out, true, 60)
	start := time.Unix(1000, 0)
	p.now = func() time.Time { return start.Add(75 * time.Second) }
	p.Update(rollout.SetProgress{Name: "a", State: rollout.Pending, Total: 3, Phase: "waiting for its turn"})
	p.Update(rollout.SetProgress{Name: "b", State: rollout.Pending, Total: 3, Phase: "waiting for its turn"})
	out.Reset()
	p.Update(rollout.SetProgress{Name: "a", State: rollout.Running, Replaced: 1, Total: 3, Since: start,
		Phase: "waiting for new Machine a-x7k2p to become a Ready Node (Provisioned)"})
	got := out.String()
	// Cursor up over the two lines drawn, then both lines rewritten, each cleared first.
	if !strings.HasPrefix(got, "\x1b[2A\r\x1b[K") || strings.Count(got, "\r\x1b[K") != 2 || strings.Count(got, "\n") != 2 {
		t.Errorf("redraw = %q", got)
	}
	for _, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		line = strings.TrimPrefix(strings.TrimPrefix(line, "\x1b[2A"), "\r\x1b[K")
		if n := len([]rune(line)); n > 59 {
			t.Errorf("line of %d runes on a 60-column terminal: %q", n, line)
		}
	}
	if !strings.Contains(got, "1/3 replaced  rolling") {
		t.Errorf("redraw lacks the counts: %q", got)
	}
	// On a wide terminal the elapsed time in the phase shows.
	p.width = 200
	out.Reset()
	p.Update(rollout.SetProgress{Name: "a", State: rollout.Running, Replaced: 1, Total: 3, Since: start, Phase: "surging to 4 replicas"})
	if !strings.Contains(out.String(), "surging to 4 replicas [1m15s]") {
		t.Errorf("no elapsed time: %q", out.String())
	}
}
