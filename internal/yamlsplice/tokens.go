package yamlsplice

import (
	"bytes"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// TokenStart is the offset where node n itself starts, after an anchor and a tag in front of
// it (node positions point at those); -1 when unknown.
func (t *Text) TokenStart(n *yaml.Node) int {
	body := t.body
	o := t.Offset(n.Line, n.Column)
	if o < 0 {
		return -1
	}
	for o < len(body) && (body[o] == '&' || body[o] == '!') {
		for o < len(body) && body[o] != ' ' && body[o] != '\t' && body[o] != '\n' && body[o] != '\r' {
			o++
		}
		for o < len(body) && (body[o] == ' ' || body[o] == '\t') {
			o++
		}
	}
	return o
}

// ScalarToken is the byte range of scalar (or alias) n as written, when it is on one line.
func (t *Text) ScalarToken(n *yaml.Node) (start, end int, ok bool) {
	body := t.body
	o := t.TokenStart(n)
	if o < 0 {
		return 0, 0, false
	}
	if n.Kind == yaml.AliasNode {
		end := o + 1 + len(n.Value)
		if end <= len(body) && string(body[o:end]) == "*"+n.Value {
			return o, end, true
		}
		return 0, 0, false
	}
	if n.Kind != yaml.ScalarNode || o >= len(body) {
		return 0, 0, false
	}
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		if end, ok := quotedEnd(body, o, '"', false); ok {
			return o, end, true
		}
	case n.Style&yaml.SingleQuotedStyle != 0:
		if end, ok := quotedEnd(body, o, '\'', false); ok {
			return o, end, true
		}
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) == 0:
		end := o + len(n.Value)
		if n.Value != "" && end <= len(body) && string(body[o:end]) == n.Value && !strings.ContainsAny(n.Value, "\r\n") {
			return o, end, true
		}
	}
	return 0, 0, false
}

// quotedEnd is the offset just after the scalar quoted with q that opens at o, when it
// closes (on its line unless multiline): a double-quoted one escapes with a backslash, a single-quoted one by
// doubling the quote.
func quotedEnd(body []byte, o int, q byte, multiline bool) (int, bool) {
	if body[o] != q {
		return 0, false
	}
	for i := o + 1; i < len(body); i++ {
		switch body[i] {
		case '\\':
			if q == '"' {
				i++
			}
		case q:
			if q == '\'' && i+1 < len(body) && body[i+1] == '\'' {
				i++
				continue
			}
			return i + 1, true
		case '\n', '\r':
			if !multiline {
				return 0, false
			}
		}
	}
	return 0, false
}

// DashColumn is the byte column (0-based) of the "-" that introduces list item n on its line,
// -1 if there is none.
func (t *Text) DashColumn(item *yaml.Node) int {
	o := t.Offset(item.Line, item.Column)
	if o < 0 {
		return -1
	}
	start := t.starts[item.Line-1]
	for c := o - 1; c >= start; c-- {
		switch t.body[c] {
		case '-':
			if c == o-1 {
				return -1 // "-x" is a scalar, not an item
			}
			return c - start
		case ' ', '\t':
		default:
			return -1
		}
	}
	return -1
}

// AfterBareKey is the offset just after the colon of key, when key is a plain scalar
// written with nothing after its colon but blanks: where a value can be written on its line.
func (t *Text) AfterBareKey(key *yaml.Node) (int, bool) {
	if key == nil || key.Kind != yaml.ScalarNode || key.Style != 0 || key.Line < 1 {
		return 0, false
	}
	o := t.Offset(key.Line, key.Column)
	if o < 0 {
		return 0, false
	}
	after := t.Line(key.Line)[o-t.LineStart(key.Line):]
	if !strings.HasPrefix(after, key.Value) {
		return 0, false
	}
	after = after[len(key.Value):]
	rest := strings.TrimLeft(after, " \t")
	if !strings.HasPrefix(rest, ":") || strings.TrimSpace(rest[1:]) != "" {
		return 0, false
	}
	return o + len(key.Value) + strings.Index(after, ":") + 1, true
}

// ScanFlow finds the bracket closing the flow collection that opens at offset o, and whether
// the collection spans lines.
func (t *Text) ScanFlow(o int) (close int, multiline, ok bool) {
	close, multiline, _, ok = t.scanFlow(o)
	return close, multiline, ok
}

// FlowSpan is the text of flow collection n: the offsets of its opening and closing
// brackets, and whether a comment sits inside (text that writing the collection anew would
// lose); false when the closing bracket cannot be told from the text.
func (t *Text) FlowSpan(n *yaml.Node) (o, close int, comment, ok bool) {
	o = t.TokenStart(n)
	if o < 0 || o >= len(t.body) || (t.body[o] != '[' && t.body[o] != '{') {
		return 0, 0, false, false
	}
	close, _, comment, ok = t.scanFlow(o)
	// A quote inside a plain scalar (a"b) misleads the scan: the bracket must come after
	// every node of the collection.
	if !ok || t.lastOffset(n) >= close {
		return 0, 0, false, false
	}
	return o, close, comment, true
}

func (t *Text) scanFlow(o int) (close int, multiline, comment, ok bool) {
	body := t.body
	depth := 0
	for i := o; i < len(body); i++ {
		switch c := body[i]; c {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return i, multiline, comment, true
			}
		case '"':
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				} else if body[i] == '\n' {
					multiline = true
				}
			}
		case '\'':
			for i++; i < len(body); i++ {
				if body[i] == '\'' {
					if i+1 < len(body) && body[i+1] == '\'' {
						i++
						continue
					}
					break
				}
				if body[i] == '\n' {
					multiline = true
				}
			}
		case '#':
			if i > o && (body[i-1] == ' ' || body[i-1] == '\t') {
				for i < len(body) && body[i] != '\n' {
					i++
				}
				multiline, comment = true, true
			}
		case '\n', '\r':
			multiline = true
		}
	}
	return 0, false, false, false
}

// FlowOnOneLine finds flow collection n ("[...]" or "{...}", opening with open) written on one
// line: the offsets of its brackets and what is between them, trailing blanks trimmed.
func (t *Text) FlowOnOneLine(n *yaml.Node, open byte) (o, close int, inner []byte, ok bool) {
	body := t.body
	o = t.TokenStart(n)
	if o < 0 || o >= len(body) || body[o] != open {
		return 0, 0, nil, false
	}
	close, multiline, ok := t.ScanFlow(o)
	if !ok || multiline {
		return 0, 0, nil, false
	}
	return o, close, bytes.TrimRight(body[o+1:close], " \t"), true
}

// AppendToFlow queues entries, written as they are, at the end of flow collection n written
// on one line ("[a]" or "{k: v}", opening with open), after a ", " or in place of blanks;
// false when n is not such a collection.
func (t *Text) AppendToFlow(n *yaml.Node, open byte, entries []string) bool {
	o, close, inner, ok := t.FlowOnOneLine(n, open)
	if !ok {
		return false
	}
	text := strings.Join(entries, ", ")
	switch {
	case len(bytes.TrimSpace(inner)) == 0:
		t.Replace(o+1, close-o-1, text, 0)
	case inner[len(inner)-1] == ',':
		t.Replace(o+1+len(inner), 0, " "+text, 0)
	default:
		t.Replace(o+1+len(inner), 0, ", "+text, 0)
	}
	return true
}
