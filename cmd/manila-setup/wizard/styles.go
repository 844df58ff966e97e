package wizard

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// Styles of the wizard. Colors disappear under NO_COLOR, --no-color or an Ascii profile; every
// mark that matters is also a character (›, [x], +, -), so nothing depends on color.
var (
	styleTitle    = lipgloss.NewStyle().Bold(true)
	styleDim      = lipgloss.NewStyle().Foreground(lipgloss.AdaptiveColor{Light: "245", Dark: "244"})
	styleCursor   = lipgloss.NewStyle().Bold(true).Foreground(lipgloss.AdaptiveColor{Light: "27", Dark: "39"})
	styleOK       = lipgloss.NewStyle().Foreground(lipgloss.AdaptiveColor{Light: "28", Dark: "42"})
	styleWarn     = lipgloss.NewStyle().Foreground(lipgloss.AdaptiveColor{Light: "130", Dark: "214"})
	styleErr      = lipgloss.NewStyle().Foreground(lipgloss.AdaptiveColor{Light: "160", Dark: "203"}).Bold(true)
	styleAdd      = lipgloss.NewStyle().Foreground(lipgloss.AdaptiveColor{Light: "28", Dark: "42"})
	styleDel      = lipgloss.NewStyle().Foreground(lipgloss.AdaptiveColor{Light: "160", Dark: "203"})
	styleHunk     = lipgloss.NewStyle().Foreground(lipgloss.AdaptiveColor{Light: "31", Dark: "80"})
	styleKey      = lipgloss.NewStyle().Bold(true)
	styleSelected = lipgloss.NewStyle().Foreground(lipgloss.AdaptiveColor{Light: "28", Dark: "42"})
)

// fit cuts every line to width and pads or cuts the block to exactly height lines, so a screen
// never scrolls the terminal whatever its content.
func fit(lines []string, width, height int) []string {
	out := make([]string, 0, height)
	for _, l := range lines {
		for _, sub := range strings.Split(l, "\n") {
			if len(out) == height {
				return out
			}
			out = append(out, cut(sub, width))
		}
	}
	for len(out) < height {
		out = append(out, "")
	}
	return out
}

// cut shortens s to width cells, ending in … when something was cut.
func cut(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= width {
		return s
	}
	return ansi.Truncate(s, width, "…")
}

// wrap breaks plain text into lines of at most width cells, at spaces where it can.
// hyphenStandIn takes the place of "-" while a text is wrapped: one cell wide, not a breakpoint
// (a private-use character, which no text of the wizard contains).
const hyphenStandIn = "\uE000"

func wrap(s string, width int) []string {
	if width < 10 {
		width = 10
	}
	// Continuation lines keep the indentation of the first; words longer than the line (URLs,
	// IDs) are broken hard.
	body := strings.TrimLeft(s, " ")
	indent := strings.Repeat(" ", min(len(s)-len(body), width/2))
	// ansi.Wrap breaks after any hyphen, which cuts commands, flags and names
	// ("manila-" / "setup"): hyphens are hidden from it and put back.
	body = strings.ReplaceAll(body, "-", hyphenStandIn)
	lines := strings.Split(ansi.Wrap(body, width-len(indent), ""), "\n")
	for i := range lines {
		lines[i] = indent + strings.ReplaceAll(lines[i], hyphenStandIn, "-")
	}
	return lines
}

// window returns the first visible index so that cursor stays within a list of height rows.
func window(offset, cursor, height, n int) int {
	if height <= 0 {
		return 0
	}
	if cursor < offset {
		offset = cursor
	}
	if cursor >= offset+height {
		offset = cursor - height + 1
	}
	if offset > n-height {
		offset = n - height
	}
	if offset < 0 {
		offset = 0
	}
	return offset
}

func check(b bool) string {
	if b {
		return "[x]"
	}
	return "[ ]"
}

func pointer(b bool) string {
	if b {
		return styleCursor.Render("›") + " "
	}
	return "  "
}

// padRight pads s with spaces to width cells.
func padRight(s string, width int) string {
	if n := ansi.StringWidth(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}
