// Package rolloutview draws a MachineSet rollout for people: redrawn lines on a terminal, a
// short history of changes elsewhere. The rollout itself (machinesets) knows nothing of screens.
package rolloutview

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/manila-setup/manila-setup/attach/rollout"
)

// ProgressPrinter shows a rollout as one line per MachineSet. On a terminal it redraws the lines
// in place; elsewhere (a log, a pipe, CI) it prints a set's line only when its state or phase
// changes, so the output stays a short history rather than a wall of logs. Safe for concurrent
// use; pass its Update as machinesets.RolloutOptions.Progress.
type ProgressPrinter struct {
	out   io.Writer
	tty   bool
	width int // terminal width; lines are cut to it so that redrawing stays aligned
	now   func() time.Time

	mu      sync.Mutex
	order   []string
	sets    map[string]rollout.SetProgress
	printed map[string]string // non-terminal: the last line printed per set
	drawn   int               // terminal: lines currently on screen
}

// NewProgressPrinter writes to out; tty says whether out is a terminal of width columns (0:
// unknown).
func NewProgressPrinter(out io.Writer, tty bool, width int) *ProgressPrinter {
	return &ProgressPrinter{out: out, tty: tty, width: width, now: time.Now, sets: map[string]rollout.SetProgress{}, printed: map[string]string{}}
}

// Update records the state of one set and shows it.
func (p *ProgressPrinter) Update(sp rollout.SetProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.sets[sp.Name]; !ok {
		p.order = append(p.order, sp.Name)
	}
	p.sets[sp.Name] = sp
	if p.tty {
		p.redraw()
		return
	}
	line := p.line(sp, false)
	if p.printed[sp.Name] != line {
		p.printed[sp.Name] = line
		fmt.Fprintln(p.out, line)
	}
}

// redraw moves the cursor back over the lines drawn last time and writes them all again.
func (p *ProgressPrinter) redraw() {
	var b strings.Builder
	if p.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", p.drawn)
	}
	for _, name := range p.order {
		line := p.line(p.sets[name], true)
		if p.width > 1 && utf8.RuneCountInString(line) > p.width-1 {
			line = string([]rune(line)[:p.width-2]) + "…"
		}
		b.WriteString("\r\x1b[K" + line + "\n")
	}
	p.drawn = len(p.order)
	io.WriteString(p.out, b.String())
}

// line is the text of one set: name, replaced/total, state and phase; on a terminal with the
// time spent in the current phase.
func (p *ProgressPrinter) line(sp rollout.SetProgress, elapsed bool) string {
	nameWidth := 0
	for _, n := range p.order {
		nameWidth = max(nameWidth, len(n))
	}
	phase := sp.Phase
	if elapsed && sp.State == rollout.Running && !sp.Since.IsZero() {
		if d := p.now().Sub(sp.Since).Truncate(time.Second); d >= time.Second {
			phase += fmt.Sprintf(" [%s]", d)
		}
	}
	counts := fmt.Sprintf("%d/%d replaced", sp.Replaced, sp.Total)
	if sp.State == rollout.Skipped {
		counts = "-"
	}
	return fmt.Sprintf("%-*s  %-12s  %-10s  %s", nameWidth, sp.Name, counts, sp.State, phase)
}
