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
	rank     int  // orders edits at the same offset, lowest first
	seq      int  // then the order they were queued in
	cover    bool // the text is the range written anew: edits inside it are in it already
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

// Cover queues text to go in at off in place of the del bytes there, as the whole new text
// of that range: edits queued inside the range (before or after) are dropped by Apply, as
// the caller wrote their change into text. Lines inserted at either end are kept.
func (t *Text) Cover(off, del int, text string) {
	t.edits = append(t.edits, edit{off: off, del: del, text: text, seq: len(t.edits), cover: true})
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
	edits := t.uncovered()
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

// uncovered are the queued edits without those inside the range of a Cover (another
// Cover's too).
func (t *Text) uncovered() []edit {
	var covers []edit
	for _, e := range t.edits {
		if e.cover {
			covers = append(covers, e)
		}
	}
	if len(covers) == 0 {
		return slices.Clone(t.edits)
	}
	inside := func(e, c edit) bool {
		end := c.off + c.del
		if e.seq == c.seq || e.off < c.off || e.off+e.del > end {
			return false
		}
		if e.cover && e.off == c.off && e.del == c.del {
			return e.seq < c.seq // the same range twice: the last one queued stays
		}
		return e.del > 0 || (e.off > c.off && e.off < end)
	}
	var out []edit
next:
	for _, e := range t.edits {
		for _, c := range covers {
			if inside(e, c) {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}
