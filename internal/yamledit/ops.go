package yamledit

import (
	"math"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/manila-setup/manila-setup/internal/yamlsplice"
)

// Append adds items at the end of list seq.
func (e *Editor) Append(seq *yaml.Node, items ...*yaml.Node) {
	switch {
	case e.whole || e.isNew(seq):
	case seq.Style&yaml.FlowStyle != 0:
		if len(seq.Content) == 0 && e.toBlock(seq) {
			break
		}
		for _, it := range items {
			setFlow(it)
		}
		e.touch(seq)
	default:
		e.appendLines(seq, items)
	}
	seq.Content = append(seq.Content, items...)
}

// appendLines queues items as lines after the text of the list's last item, written as that
// item is: the same dash column and the same blanks after the dash.
func (e *Editor) appendLines(seq *yaml.Node, items []*yaml.Node) {
	var last *yaml.Node
	for _, c := range seq.Content {
		if c.Line > 0 {
			last = c
		}
	}
	if last == nil {
		e.whole = true
		return
	}
	dash := e.t.DashColumn(last)
	end, ok := e.t.EndLine(last)
	at := e.t.Offset(last.Line, last.Column)
	if dash < 0 || !ok || !e.t.BlankBefore(last.Line, dash) {
		e.whole = true
		return
	}
	start := e.t.LineStart(last.Line)
	first := string(e.t.Body()[start:at]) // blanks, the dash, blanks
	rest := strings.Repeat(" ", dash) + strings.Repeat(" ", len(first)-dash)
	e.later = append(e.later, func() bool {
		var lines []string
		for _, it := range items {
			block, err := e.block(it)
			if err != nil {
				return false
			}
			lines = append(lines, first+block[0])
			for _, l := range block[1:] {
				if l != "" {
					l = rest + l
				}
				lines = append(lines, l)
			}
		}
		e.t.InsertLines(end, lines, yamlsplice.ItemRank(dash))
		return true
	})
}

// block is n as block lines (yamlsplice.Style.Block). A scalar's text is kept: the same ID
// appended to a thousand lists is written by the YAML encoder once.
func (e *Editor) block(n *yaml.Node) ([]string, error) {
	if n.Kind != yaml.ScalarNode || n.Anchor != "" || n.HeadComment != "" || n.LineComment != "" || n.FootComment != "" {
		return e.indentation().Block(n)
	}
	key := scalarKey{n.Value, n.Tag, n.Style}
	if lines, ok := e.scalars[key]; ok {
		return lines, nil
	}
	lines, err := e.indentation().Block(n)
	if err == nil {
		if e.scalars == nil {
			e.scalars = map[scalarKey][]string{}
		}
		e.scalars[key] = lines
	}
	return lines, err
}

type scalarKey struct {
	value, tag string
	style      yaml.Style
}

// AddKey adds key: value at the end of mapping m.
func (e *Editor) AddKey(m *yaml.Node, key string, value *yaml.Node) {
	k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
	switch {
	case e.whole || e.isNew(m):
	case m.Style&yaml.FlowStyle != 0:
		if len(m.Content) == 0 && e.toBlock(m) {
			break
		}
		setFlow(value)
		e.touch(m)
	default:
		e.addKeyLines(m, k, value)
	}
	m.Content = append(m.Content, k, value)
}

// addKeyLines queues key: value as lines after the text of block mapping m, at the column
// of its keys.
func (e *Editor) addKeyLines(m, k, value *yaml.Node) {
	var first *yaml.Node
	for i := 0; i < len(m.Content) && first == nil; i += 2 {
		if m.Content[i].Line > 0 {
			first = m.Content[i]
		}
	}
	end, ok := e.t.MappingEnd(m)
	if first == nil || !ok || e.column(first) < 0 {
		e.whole = true
		return
	}
	col := e.column(first)
	e.later = append(e.later, func() bool {
		lines, err := e.indentation().Block(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{k, value}})
		if err != nil {
			return false
		}
		e.t.InsertLines(end, yamlsplice.Indent(lines, col), yamlsplice.KeyRank(col))
		return true
	})
}

// inLine is the rank of text written within a line: at the end of a text without a final
// line break, it goes before lines inserted there.
const inLine = math.MinInt32

// SetValue makes value the value of key in mapping m, in place of the one there.
func (e *Editor) SetValue(m, key, value *yaml.Node) {
	i := slices.Index(m.Content, key)
	if i < 0 || i%2 != 0 || i+1 >= len(m.Content) {
		return
	}
	old := m.Content[i+1]
	// Written out as a whole, the value keeps the comments of the one it replaces.
	value.HeadComment, value.LineComment, value.FootComment = old.HeadComment, old.LineComment, old.FootComment
	flow := m.Style&yaml.FlowStyle != 0
	if flow {
		setFlow(value)
	}
	m.Content[i+1] = value
	switch {
	case e.whole || e.isNew(m):
	case old.Anchor != "" || e.t.TokenStart(old) != e.t.Offset(old.Line, old.Column):
		// Its anchor or tag would go to the new value.
		e.giveUp(m)
	case flow:
		e.later = append(e.later, func() bool {
			if !e.replaceToken(old, value) {
				e.cover(m)
			}
			return true
		})
	default:
		e.later = append(e.later, func() bool { return e.setBlockValue(key, old, value) })
	}
}

// setBlockValue writes value for key of a block mapping, in place of old: a scalar, an empty
// collection or a value replacing a flow collection on one line in old's place; another
// collection as block lines below the key, when old is written on the key's line.
func (e *Editor) setBlockValue(key, old, value *yaml.Node) bool {
	oneLine := value.Kind == yaml.ScalarNode || len(value.Content) == 0 ||
		(old.Style&yaml.FlowStyle != 0 && len(old.Content) > 0)
	if oneLine && e.replaceToken(old, value) {
		return true
	}
	from, to, ok := e.onKeyLine(key, old)
	if !ok {
		return false
	}
	if oneLine {
		text, err := e.flowText(value)
		if err != nil || from != to {
			return false
		}
		e.t.Replace(from, 0, " "+text, inLine)
		return true
	}
	return e.valueBelow(key, from, to, value)
}

// valueBelow cuts from..to (the old value on the key's line, with the blanks before it) and
// writes value as block lines below the key.
func (e *Editor) valueBelow(key *yaml.Node, from, to int, value *yaml.Node) bool {
	body := e.t.Body()
	for from > 0 && (body[from-1] == ' ' || body[from-1] == '\t') {
		from--
	}
	col := e.column(key)
	st := e.indentation()
	lines, err := st.Block(value)
	if err != nil || col < 0 {
		return false
	}
	indent := st.Indent
	if value.Kind == yaml.SequenceNode {
		indent = st.SeqIndent
	}
	e.t.Replace(from, to-from, "", 0)
	// Deeper than the key: before lines added after it to its mapping or list.
	e.t.InsertLines(key.Line, yamlsplice.Indent(lines, col+indent), yamlsplice.KeyRank(col+1))
	return true
}

// SetScalar gives scalar n the value v, written in n's own quoting style, its anchor and tag
// kept.
func (e *Editor) SetScalar(n *yaml.Node, v string) {
	n.Value = v
	if e.whole || e.isNew(n) {
		return
	}
	e.later = append(e.later, func() bool { return e.replaceToken(n, n) || e.giveUp(e.holderOf(n).parent) })
}

// Remove takes child out of parent: an item of a list, or a key of a mapping (with its value).
func (e *Editor) Remove(parent, child *yaml.Node) {
	i := slices.Index(parent.Content, child)
	step := 1
	if parent.Kind == yaml.MappingNode {
		step = 2
	}
	if i < 0 || i%step != 0 || i+step > len(parent.Content) {
		return
	}
	switch {
	case e.whole || e.isNew(parent):
	case parent.Style&yaml.FlowStyle != 0:
		e.touch(parent)
	default:
		e.cutEntry(parent, parent.Content[i], parent.Content[i+step-1], len(parent.Content) > step)
	}
	parent.Content = slices.Delete(parent.Content, i, i+step)
}

// cutEntry queues the removal of the lines an entry of a block collection takes, from the
// line of its dash or key (which must start the line) to the end of its text (last); the
// last entry of a collection is replaced with [] or {} after its key.
func (e *Editor) cutEntry(parent, first, last *yaml.Node, othersLeft bool) {
	col, rank := e.column(first), yamlsplice.KeyRank(e.column(first))
	if parent.Kind == yaml.SequenceNode {
		col = e.t.DashColumn(first)
		rank = yamlsplice.ItemRank(col)
	}
	lastLine, ok := e.t.EndLine(last)
	if !ok || first.Line == 0 || col < 0 || !e.t.BlankBefore(first.Line, col) || defines(first) || defines(last) ||
		(last.Style&yaml.FlowStyle != 0 && last.Line != first.Line) {
		e.whole = true
		return
	}
	if !othersLeft {
		h := e.holderOf(parent)
		colon, ok := e.t.AfterBareKey(h.key)
		if !ok || h.parent.Style&yaml.FlowStyle != 0 {
			e.whole = true
			return
		}
		empty := " []"
		if parent.Kind == yaml.MappingNode {
			empty = " {}"
		}
		e.t.Replace(colon, 0, empty, 0)
	}
	e.t.CutLines(first.Line, lastLine, rank)
}

// toBlock turns empty flow collection n, the value of a block mapping's key written alone on
// the key's line, into a block collection written below the key with whatever it holds when
// Bytes is called; false when n is not such a collection.
func (e *Editor) toBlock(n *yaml.Node) bool {
	h := e.holderOf(n)
	if h.key == nil || h.parent.Style&yaml.FlowStyle != 0 || n.Anchor != "" || e.t.TokenStart(n) != e.t.Offset(n.Line, n.Column) {
		return false
	}
	from, to, ok := e.onKeyLine(h.key, n)
	if !ok {
		return false
	}
	n.Style &^= yaml.FlowStyle
	e.fresh[n] = true
	e.later = append(e.later, func() bool {
		if len(n.Content) == 0 {
			return true // nothing went in after all
		}
		return e.valueBelow(h.key, from, to, n)
	})
	return true
}

// giveUp writes flow collection m anew in place, or, when m is not one, the stream as a
// whole; it returns true.
func (e *Editor) giveUp(m *yaml.Node) bool {
	if m == nil || m.Style&yaml.FlowStyle == 0 || !e.cover(m) {
		e.whole = true
	}
	return true
}

// column is the byte column (0-based) where n starts on its line, -1 if unknown.
func (e *Editor) column(n *yaml.Node) int {
	o := e.t.Offset(n.Line, n.Column)
	if o < 0 {
		return -1
	}
	return o - e.t.LineStart(n.Line)
}
