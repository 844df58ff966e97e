// Package yamlsplice changes YAML text in place and keeps every byte it does not change: it
// finds where a node of a go.yaml.in/yaml/v3 parse is written (the line, the token of a
// scalar, the dash of a list item, the brackets of a flow collection), queues edits on those
// bytes (replace a range, insert whole lines after a line, cut whole lines) and applies them
// in one pass. Callers decide what to change and fall back to writing the tree out as a whole
// when Apply reports that edits collide.
//
// Positions are those of yaml.v3: 1-based lines, where a line break is LF, CRLF or a lone CR,
// and 1-based columns counted in characters, not bytes.
package yamlsplice

import (
	"bytes"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// Text is the text of a YAML stream (without a byte order mark: what node positions refer
// to) and the edits queued on it.
type Text struct {
	body   []byte
	starts []int // byte offset where each line starts
	// NL is the line break new lines get: CRLF when most of the text's line breaks are CRLF.
	NL string
	// FinalBreak makes lines added after the last line of a text that does not end in a line
	// break end with one; without it the text keeps having no final line break.
	FinalBreak bool
	edits      []edit
	// cutEnds maps the offset where cut lines end to the rank of the entry cut there.
	cutEnds map[int]int
}

// edit puts text at off in place of the del bytes there.
type edit struct {
	off, del int
	text     string
	rank     int // orders edits at the same offset, lowest first
	seq      int // then the order they were queued in
}

// New is the text body, with no edit queued.
func New(body []byte) *Text {
	t := &Text{body: body, starts: LineStarts(body), NL: "\n"}
	if bytes.Count(body, []byte("\r\n"))*2 > bytes.Count(body, []byte("\n")) {
		t.NL = "\r\n"
	}
	return t
}

// LineStarts is the byte offset at which each line of data starts. A line break is LF, CRLF or
// a lone CR, as in YAML; a final line break does not start a line.
func LineStarts(data []byte) []int {
	starts := []int{0}
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '\n':
			starts = append(starts, i+1)
		case '\r':
			if i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
			starts = append(starts, i+1)
		}
	}
	if starts[len(starts)-1] == len(data) && len(starts) > 1 {
		starts = starts[:len(starts)-1]
	}
	return starts
}

// Body is the text as it was given.
func (t *Text) Body() []byte { return t.body }

// Lines is the number of lines.
func (t *Text) Lines() int { return len(t.starts) }

// LineStart is the offset of the 1-based line n.
func (t *Text) LineStart(n int) int { return t.starts[n-1] }

// LineEnd is the offset just after line n and its line break: where line n+1 starts.
func (t *Text) LineEnd(n int) int {
	if n < len(t.starts) {
		return t.starts[n]
	}
	return len(t.body)
}

// Line is the text of the 1-based line n without its line break; "" when there is no such line.
func (t *Text) Line(n int) string {
	if n < 1 || n > len(t.starts) {
		return ""
	}
	return strings.TrimRight(string(t.body[t.starts[n-1]:t.LineEnd(n)]), "\r\n")
}

// Offset is the byte offset of a node position (1-based line, 1-based column in characters);
// -1 when it is not in the text.
func (t *Text) Offset(line, col int) int {
	if line < 1 || line > len(t.starts) || col < 1 {
		return -1
	}
	o := t.starts[line-1]
	for i := 1; i < col; i++ {
		if o >= len(t.body) || t.body[o] == '\n' || t.body[o] == '\r' {
			return -1
		}
		_, size := utf8.DecodeRune(t.body[o:])
		o += size
	}
	return o
}

// BlankBefore reports whether line n holds only blanks before byte column col of it.
func (t *Text) BlankBefore(n, col int) bool {
	line := t.Line(n)
	return col >= 0 && col <= len(line) && strings.TrimLeft(line[:col], " \t") == ""
}

// Replace queues text to go in at off in place of the del bytes there. Of edits at the same
// offset, the one of lower rank goes first, then the one queued first.
func (t *Text) Replace(off, del int, text string, rank int) {
	t.edits = append(t.edits, edit{off: off, del: del, text: text, rank: rank, seq: len(t.edits)})
}

// InsertLines queues whole lines (each given without a line break) to go in after line n.
func (t *Text) InsertLines(n int, lines []string, rank int) {
	text := strings.Join(lines, t.NL) + t.NL
	if n < len(t.starts) {
		t.Replace(t.starts[n], 0, text, rank)
		return
	}
	if b := t.body; len(b) > 0 && b[len(b)-1] != '\n' && b[len(b)-1] != '\r' {
		// The last line has no line break: give it one, and keep the text without a final
		// one unless asked.
		if !t.FinalBreak {
			text = strings.TrimSuffix(text, t.NL)
		}
		text = t.NL + text
	}
	t.Replace(len(t.body), 0, text, rank)
}

// CutLines queues the removal of lines first to last, with their line breaks: the text of a
// list item or a mapping entry, whose rank (ItemRank or KeyRank of its column) is given.
// Lines inserted after the last of them that rank lower belong to the entry (a key added to
// the mapping it holds): Apply refuses them.
func (t *Text) CutLines(first, last, rank int) {
	from, to := t.starts[first-1], t.LineEnd(last)
	t.Replace(from, to-from, "", 0)
	if t.cutEnds == nil {
		t.cutEnds = map[int]int{}
	}
	if r, ok := t.cutEnds[to]; !ok || rank > r {
		t.cutEnds[to] = rank
	}
}

// ItemRank and KeyRank order lines inserted at the same offset that start at column col
// (0-based): the end of a deeper structure first, and at one depth an item appended to a list
// before a key added after that list.
func ItemRank(col int) int { return -2 * col }

// KeyRank: see ItemRank.
func KeyRank(col int) int { return -2*col + 1 }

// Apply is the text with the queued edits made, or false when two of them overlap, or lines
// would be inserted into an entry that is cut (the caller then writes its tree out as a
// whole).
func (t *Text) Apply() ([]byte, bool) {
	edits := slices.Clone(t.edits)
	sort.Slice(edits, func(i, j int) bool {
		a, b := edits[i], edits[j]
		if a.off != b.off {
			return a.off < b.off
		}
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		return a.seq < b.seq
	})
	var b bytes.Buffer
	pos := 0
	for _, e := range edits {
		if e.off < pos || e.off+e.del > len(t.body) {
			return nil, false
		}
		if r, cut := t.cutEnds[e.off]; cut && e.del == 0 && e.text != "" && e.rank < r {
			return nil, false
		}
		b.Write(t.body[pos:e.off])
		b.WriteString(e.text)
		pos = e.off + e.del
	}
	b.Write(t.body[pos:])
	return b.Bytes(), true
}

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
	body := t.body
	depth := 0
	for i := o; i < len(body); i++ {
		switch c := body[i]; c {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return i, multiline, true
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
				multiline = true
			}
		case '\n', '\r':
			multiline = true
		}
	}
	return 0, false, false
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
