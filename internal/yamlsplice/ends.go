package yamlsplice

import (
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// BlockEnd is the last line of a block mapping whose keys are at column col (1-based) and
// whose last key is on line from: the last line with content before a line indented less than
// the keys (a list at the keys' column, as kubectl writes one, is still the mapping's).
// Comment lines after it are left out: they are about what follows.
func (t *Text) BlockEnd(from, col int) int {
	end := from
	for l := from + 1; l <= t.Lines(); l++ {
		text := t.Line(l)
		trimmed := strings.TrimLeft(text, " ")
		if strings.TrimSpace(trimmed) == "" || trimmed[0] == '#' {
			continue
		}
		ind := len(text) - len(trimmed)
		if ind == 0 && (strings.HasPrefix(trimmed, "---") || strings.HasPrefix(trimmed, "...")) {
			break
		}
		if ind+1 > col || (ind+1 == col && (trimmed == "-" || strings.HasPrefix(trimmed, "- "))) {
			end = l
			continue
		}
		break
	}
	return end
}

// EndLine is the last line the text of n takes, when that can be told from the text: a quoted
// scalar or a flow collection ends on the line of its closing quote or bracket (yaml.v3 lets
// their lines go on indented less than the node). Not for a block scalar, a plain scalar that
// goes on below, nor an alias (its text is elsewhere): their end is told by indentation
// (BlockEnd). Nodes added since the parse (no line) are left out.
func (t *Text) EndLine(n *yaml.Node) (int, bool) {
	if n.Line == 0 {
		return 0, true
	}
	switch {
	case n.Kind == yaml.AliasNode || n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		return 0, false
	case n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0:
		q := byte('"')
		if n.Style&yaml.SingleQuotedStyle != 0 {
			q = '\''
		}
		if o := t.TokenStart(n); o >= 0 && o < len(t.body) {
			if end, ok := quotedEnd(t.body, o, q, true); ok {
				return t.lineOf(end - 1), true
			}
		}
		return 0, false
	case n.Kind == yaml.ScalarNode:
		if n.Value == "" || strings.Contains(n.Value, "\n") {
			return n.Line, n.Value == ""
		}
		_, _, ok := t.ScalarToken(n)
		return n.Line, ok
	case n.Style&yaml.FlowStyle != 0:
		if o := t.TokenStart(n); o >= 0 {
			// The closing bracket must come after every node of the collection: a quote
			// inside a plain scalar (a"b) misleads the scan.
			if close, _, ok := t.ScanFlow(o); ok && t.lastOffset(n) < close {
				return t.lineOf(close), true
			}
		}
		return 0, false
	}
	last := n.Line
	for _, c := range n.Content {
		l, ok := t.EndLine(c)
		if !ok {
			return 0, false
		}
		last = max(last, l)
	}
	return last, true
}

// lastOffset is the largest offset a node of n's tree starts at.
func (t *Text) lastOffset(n *yaml.Node) int {
	last := t.Offset(n.Line, n.Column)
	for _, c := range n.Content {
		last = max(last, t.lastOffset(c))
	}
	return last
}

// lineOf is the 1-based line the byte at offset o is on.
func (t *Text) lineOf(o int) int {
	return sort.Search(len(t.starts), func(i int) bool { return t.starts[i] > o })
}

// MappingEnd is the last line of block mapping m as parsed (entries added since have no
// line): after its last key, the lines indented more than its keys (BlockEnd), and to the end
// of its last value's text (EndLine); false when m has no key from the text, or a key that
// does not start its line.
func (t *Text) MappingEnd(m *yaml.Node) (int, bool) {
	var lastKey, lastValue *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Line > 0 {
			lastKey, lastValue = m.Content[i], m.Content[i+1]
		}
	}
	if lastKey == nil || m.Content[0].Line == 0 {
		return 0, false
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		// Every key starts its line, after blanks and the dashes of list items: not an
		// explicit key ("? k"), whose node sits after the "?", nor a key on a flow line.
		if k := m.Content[i]; k.Line > 0 {
			o := t.Offset(k.Line, k.Column)
			if o < 0 || strings.Trim(string(t.body[t.starts[k.Line-1]:o]), " -") != "" {
				return 0, false
			}
		}
	}
	// From the last line a node of the value starts on (a block scalar's "|" may sit at the
	// keys' column), the lines indented more than the keys.
	end := t.BlockEnd(max(lastKey.Line, lastStart(lastValue)), m.Content[0].Column)
	if l, ok := t.EndLine(lastValue); ok {
		end = max(end, l)
	} else if underIndented(lastValue) {
		return 0, false // a flow collection or a quoted scalar whose end was not found
	}
	return end, true
}

// underIndented reports whether n's tree holds a flow collection or a quoted scalar: text
// whose lines may go on indented less than the node.
func underIndented(n *yaml.Node) bool {
	if n.Style&(yaml.FlowStyle|yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		return true
	}
	for _, c := range n.Content {
		if underIndented(c) {
			return true
		}
	}
	return false
}

// lastStart is the last line a node of n's tree starts on.
func lastStart(n *yaml.Node) int {
	last := n.Line
	for _, c := range n.Content {
		last = max(last, lastStart(c))
	}
	return last
}
