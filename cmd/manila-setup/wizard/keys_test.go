package wizard

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// keyLine is the key line under the screen the driver shows, one line however it wraps.
func keyLine(d *driver) string {
	lines := strings.Split(ansi.Strip(d.m.View()), "\n")
	rule := len(lines) - 1
	for rule > 0 && !strings.HasPrefix(lines[rule], "────") {
		rule--
	}
	return strings.Join(lines[rule+1:], "  ")
}

// TestKeyLineSaysWhatKeysDo: the key line is made of the bindings the screens match, so where
// a screen takes q, ? or esc for itself the line does not offer them for anything else.
func TestKeyLineSaysWhatKeysDo(t *testing.T) {
	// The guard's question: esc answers no, it does not go back.
	d := toNetwork(t, newFakeBackend(), false, 80, 24)
	d.press("/", "d", "e", "c", "enter", "enter")
	if line := keyLine(d); strings.Contains(line, "esc back") || !strings.Contains(line, "n, enter or esc choose another") {
		t.Errorf("the guard's key line: %q", line)
	}
	d.press("esc")
	if d.m.step != stepNetwork || d.m.screens.network.confirming != "" {
		t.Errorf("esc at the guard: step %d, confirming %q; want the network screen, no question", d.m.step, d.m.screens.network.confirming)
	}

	// A filter that is kept: esc clears it before it goes back.
	if line := keyLine(d); !strings.Contains(line, "esc clear") || strings.Contains(line, "esc back") {
		t.Errorf("the key line with a filter: %q", line)
	}
	d.press("esc")
	if d.m.step != stepNetwork || d.m.screens.network.filter != "" {
		t.Errorf("esc with a filter: step %d, filter %q", d.m.step, d.m.screens.network.filter)
	}
	if line := keyLine(d); !strings.Contains(line, "esc back") {
		t.Errorf("the key line without a filter: %q", line)
	}

	// While machines are replaced q asks to stop, as ctrl+c does; the question takes every key.
	d = rolling(t, 80, 24)
	if line := keyLine(d); !strings.Contains(line, "ctrl+c or q stop") || strings.Contains(line, "q quit") {
		t.Errorf("the rollout's key line: %q", line)
	}
	d.press("q")
	if d.m.quit || !d.m.screens.apply.confirmStop {
		t.Errorf("q during the rollout: quit %v, asked to stop %v", d.m.quit, d.m.screens.apply.confirmStop)
	}
	if line := keyLine(d); strings.Contains(line, "? help") || strings.Contains(line, "q quit") {
		t.Errorf("the stop question's key line: %q", line)
	}
	d.press("?")
	if d.m.help || !d.m.screens.apply.confirmStop {
		t.Errorf("? at the stop question: help %v, still asking %v", d.m.help, d.m.screens.apply.confirmStop)
	}
	d.press("n")
	if d.m.screens.apply.confirmStop || !d.m.screens.apply.running() {
		t.Errorf("n at the stop question: asking %v, running %v", d.m.screens.apply.confirmStop, d.m.screens.apply.running())
	}
}
