package wizard

import (
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/x/ansi"
)

// A screen's keys are key.Bindings: the keys a binding matches and the words the key line and
// the help give it are one value, so what the line says is what the screen does.

// bind is a binding of keys, named help in the key line, doing what.
func bind(help, what string, keys ...string) key.Binding {
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, what))
}

// either is one entry of the key line for several bindings (↑/↓ for up and down): it matches
// what each of them matches.
func either(help, what string, bs ...key.Binding) key.Binding {
	var keys []string
	for _, b := range bs {
		keys = append(keys, b.Keys()...)
	}
	return bind(help, what, keys...)
}

// told is an entry of the key line that matches no key by itself: what the screen does with
// keys it does not bind ("type or /", "any key").
func told(help, what string) key.Binding {
	return key.NewBinding(key.WithHelp(help, what))
}

// The wizard's own keys, and the moves several screens share.
var (
	keyQuit  = bind("q", "quit", "q", "ctrl+c")
	keyHelp  = bind("?", "help", "?")
	keyCtrlC = bind("ctrl+c", "quit", "ctrl+c")
	// keyInterrupt is ctrl+c as the help explains it on every screen.
	keyInterrupt = bind("ctrl+c", "quit (asks first while machines are replaced)", "ctrl+c")
	keyBack      = bind("esc", "back", "esc")

	keyUp     = bind("↑", "up", "up", "k")
	keyDown   = bind("↓", "down", "down", "j")
	keyMove   = either("↑/↓", "move", keyUp, keyDown)
	keyPgUp   = bind("pgup", "page up", "pgup")
	keyPgDown = bind("pgdn", "page down", "pgdown")
	keyTop    = bind("g", "top", "home", "g")
	keyBottom = bind("G", "bottom", "end", "G")
	keySelect = bind("space", "select", " ", "x")
	keyYes    = bind("y", "yes", "y", "Y")
)

// grab says which of the wizard's own keys (q, ?, ctrl+c) a screen takes for itself now.
type grab int

const (
	// grabNone: q and ctrl+c quit, ? opens the help.
	grabNone grab = iota
	// grabTyping: the screen takes text; only ctrl+c quits.
	grabTyping
	// grabQuit: q and ctrl+c go to the screen (it asks before stopping); ? opens the help.
	grabQuit
	// grabAll: every key goes to the screen.
	grabAll
)

// wizardKeys are the wizard's own keys that are in force while a screen grabs g, in the order
// the key line ends with.
func wizardKeys(g grab) []key.Binding {
	switch g {
	case grabTyping:
		return []key.Binding{keyCtrlC}
	case grabQuit:
		return []key.Binding{keyHelp}
	case grabAll:
		return nil
	}
	return []key.Binding{keyHelp, keyQuit}
}

// hintLines are the keys of a screen in lines of width w, broken between keys, never inside
// one, so that no key is cut off at 80 or 60 columns.
func hintLines(bs []key.Binding, w int) []string {
	var lines []string
	cur := ""
	for _, b := range bs {
		h := b.Help()
		part := styleKey.Render(h.Key) + " " + h.Desc
		switch {
		case cur == "":
			cur = part
		case ansi.StringWidth(cur)+2+ansi.StringWidth(part) <= w:
			cur += "  " + part
		default:
			lines = append(lines, cur)
			cur = part
		}
	}
	return append(lines, cut(cur, w))
}

// helpKeys are the lines of the help's list of keys: the key line's, then ctrl+c.
func helpKeys(bs []key.Binding) []string {
	var lines []string
	for _, b := range append(bs, keyInterrupt) {
		lines = append(lines, fmt.Sprintf("  %-12s %s", b.Help().Key, b.Help().Desc))
	}
	return lines
}
