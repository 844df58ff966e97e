package yamledit

import (
	"bytes"
	"errors"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

var errMultiline = errors.New("the value does not fit on one line")

// flowEdit is a flow collection whose entries changed, and its entries as parsed.
type flowEdit struct {
	n    *yaml.Node
	orig []*yaml.Node
}

// touch notes, before its entries change, that flow collection n is to be written.
func (e *Editor) touch(n *yaml.Node) {
	if e.flowOf[n] == nil {
		fe := &flowEdit{n: n, orig: slices.Clone(n.Content)}
		e.flowOf[n] = fe
		e.flows = append(e.flows, fe)
	}
}

// flushFlow queues the change of a flow collection's entries: the new ones spliced in after
// the last, or the removed ones cut out, when it is written on one line; else the collection
// written anew in place. False when even that cannot be done.
func (e *Editor) flushFlow(fe *flowEdit) bool {
	n, cur, orig := fe.n, fe.n.Content, fe.orig
	step := 1
	if n.Kind == yaml.MappingNode {
		step = 2
	}
	switch {
	case slices.Equal(cur, orig):
		return true
	case len(cur) > len(orig) && slices.Equal(cur[:len(orig)], orig):
		var entries []string
		for i := len(orig); i+step-1 < len(cur); i += step {
			text, err := e.flowEntry(cur[i : i+step])
			if err != nil {
				return false
			}
			entries = append(entries, text)
		}
		open := byte('[')
		if step == 2 {
			open = '{'
		}
		if e.t.AppendToFlow(n, open, entries) {
			return true
		}
	case len(cur) < len(orig):
		if e.cutFlow(n, orig, cur, step) {
			return true
		}
	}
	return e.cover(n)
}

// flowEntry is an item, or a key and its value, written in flow style.
func (e *Editor) flowEntry(entry []*yaml.Node) (string, error) {
	var parts []string
	for _, n := range entry {
		text, err := e.flowText(n)
		if err != nil {
			return "", err
		}
		parts = append(parts, text)
	}
	return strings.Join(parts, ": "), nil
}

// cutFlow queues the removal of the entries of orig that cur no longer holds (it holds the
// others, in order) from a flow collection written on one line, with the comma and blanks
// that separate each from its neighbour.
func (e *Editor) cutFlow(n *yaml.Node, orig, cur []*yaml.Node, step int) bool {
	o, close, comment, ok := e.t.FlowSpan(n)
	if !ok || comment || bytes.ContainsAny(e.t.Body()[o:close], "\r\n") {
		return false
	}
	type span struct {
		from, to int
		kept     bool
	}
	var spans []span
	k := 0
	for i := 0; i+step-1 < len(orig); i += step {
		from, to, ok := e.entrySpan(orig[i : i+step])
		if !ok {
			return false
		}
		kept := k < len(cur) && cur[k] == orig[i]
		if kept {
			k += step
		} else if defines(orig[i]) || defines(orig[i+step-1]) {
			return false
		}
		spans = append(spans, span{from, to, kept})
	}
	if k != len(cur) {
		return false // not the same entries in the same order, less some
	}
	if len(cur) == 0 {
		e.t.Replace(o+1, close-o-1, "", 0)
		return true
	}
	keptBefore := false
	for i, s := range spans {
		switch {
		case s.kept:
			keptBefore = true
		case keptBefore: // from the end of the entry before
			e.t.Replace(spans[i-1].to, s.to-spans[i-1].to, "", 0)
		default: // up to the start of the entry after
			e.t.Replace(s.from, spans[i+1].from-s.from, "", 0)
		}
	}
	return true
}

// entrySpan is the text of an entry of a flow collection: from its item or key to the end
// of its item or value.
func (e *Editor) entrySpan(entry []*yaml.Node) (from, to int, ok bool) {
	first, last := entry[0], entry[len(entry)-1]
	from = e.t.Offset(first.Line, first.Column)
	switch {
	case last.Kind == yaml.ScalarNode || last.Kind == yaml.AliasNode:
		_, to, ok = e.t.ScalarToken(last)
	case last.Style&yaml.FlowStyle != 0:
		var close int
		_, close, _, ok = e.t.FlowSpan(last)
		to = close + 1
	}
	return from, to, ok && from >= 0 && from < to
}

// cover notes that flow collection n is written anew in place when Bytes is called; false
// when its text cannot be told, or holds a comment that would be lost.
func (e *Editor) cover(n *yaml.Node) bool {
	if _, _, comment, ok := e.t.FlowSpan(n); !ok || comment {
		return false
	}
	e.covers = append(e.covers, n)
	return true
}

// replaceToken writes value in place of the text of old, a scalar or alias written on one
// line or a flow collection without a comment inside.
func (e *Editor) replaceToken(old, value *yaml.Node) bool {
	var from, to int
	switch {
	case old.Kind == yaml.ScalarNode || old.Kind == yaml.AliasNode:
		var ok bool
		if from, to, ok = e.t.ScalarToken(old); !ok {
			return false
		}
	case old.Style&yaml.FlowStyle != 0:
		o, close, comment, ok := e.t.FlowSpan(old)
		if !ok || comment {
			return false
		}
		from, to = o, close+1
	default:
		return false
	}
	text, err := e.flowText(value)
	if err != nil {
		return false
	}
	e.t.Replace(from, to-from, text, 0)
	return true
}

// onKeyLine is the text of value old of key, written alone after the key's colon on its line
// (from == to, just after the colon, for an empty null), when only blanks or a comment follow
// it on the line.
func (e *Editor) onKeyLine(key, old *yaml.Node) (from, to int, ok bool) {
	if key == nil || key.Line == 0 || old.Line != key.Line {
		return 0, 0, false
	}
	body := e.t.Body()
	_, keyEnd, ok := e.t.ScalarToken(key)
	if !ok {
		return 0, 0, false
	}
	colon := keyEnd
	for colon < len(body) && (body[colon] == ' ' || body[colon] == '\t') {
		colon++
	}
	if colon >= len(body) || body[colon] != ':' {
		return 0, 0, false
	}
	from, to = colon+1, colon+1
	switch {
	case old.Kind == yaml.ScalarNode && old.Value == "" && old.Style == 0:
	case old.Kind == yaml.ScalarNode || old.Kind == yaml.AliasNode:
		from, to, ok = e.t.ScalarToken(old)
	case old.Style&yaml.FlowStyle != 0:
		var close int
		var comment bool
		from, close, comment, ok = e.t.FlowSpan(old)
		to = close + 1
		ok = ok && !comment
	default:
		return 0, 0, false
	}
	if !ok || strings.TrimLeft(string(body[colon+1:from]), " \t") != "" || bytes.ContainsAny(body[from:to], "\r\n") {
		return 0, 0, false
	}
	rest := strings.TrimLeft(e.t.Line(key.Line)[to-e.t.LineStart(key.Line):], " \t")
	return from, to, rest == "" || rest[0] == '#'
}

// flowText is n written in flow style on one line, quoted as a flow collection needs.
func (e *Editor) flowText(n *yaml.Node) (string, error) {
	n = bare(n)
	nullsInFlow(n, true)
	b, err := yaml.Marshal(&yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle, Content: []*yaml.Node{n}})
	if err != nil {
		return "", err
	}
	text := strings.TrimSuffix(string(b), "\n")
	if len(text) < 2 || strings.ContainsAny(text, "\r\n") {
		return "", errMultiline
	}
	return text[1 : len(text)-1], nil
}

// bare is n without its anchor and a tag that is not a standard one: what the text keeps in
// front of the part written anew.
func bare(n *yaml.Node) *yaml.Node {
	c := *n
	c.Anchor = ""
	if !strings.HasPrefix(c.Tag, "!!") {
		c.Tag = ""
	}
	c.HeadComment, c.LineComment, c.FootComment = "", "", ""
	return &c
}
