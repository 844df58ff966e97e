// Package yamlpatch applies JSON-patch "add" and "remove" operations (RFC 6902) to a YAML stream and keeps
// every other byte of it: comments, key order, quoting, indentation, the other documents. An
// item appended to a block sequence, or a key added to a block mapping, is spliced into the text
// as new lines at the indentation already there; any other change (a flow collection, a value
// replaced) makes the whole stream be written out again from its parsed form, and Bytes says so.
//
// It is what GitOps users need from a patch command: the file in Git changes by the added lines
// only. Callers check the result means what they wanted (see machinesets.PatchFile), as a splice
// works on text. Finding the text of a node and splicing it is internal/yamlsplice's job; this
// package decides what a patch operation changes.
package yamlpatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/manila-setup/manila-setup/internal/yamlsplice"
)

// Stream is a YAML stream being patched.
type Stream struct {
	text     *yamlsplice.Text
	docs     []*yaml.Node // document nodes
	reformat bool
	style    *yamlsplice.Style // how the stream indents, once known
}

// Parse reads a YAML stream of one or more documents.
func Parse(data []byte) (*Stream, error) {
	s := &Stream{text: yamlsplice.New(data)}
	// Lines added after a last line without a line break end with one.
	s.text.FinalBreak = true
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		s.docs = append(s.docs, &doc)
	}
	return s, nil
}

// Roots are the top-level nodes of the documents, in order (nil for an empty document).
func (s *Stream) Roots() []*yaml.Node {
	out := make([]*yaml.Node, len(s.docs))
	for i, d := range s.docs {
		if len(d.Content) > 0 {
			out[i] = d.Content[0]
		}
	}
	return out
}

// Add performs the JSON-patch "add" of value (anything encoding/json encodes; its object keys
// keep their order) at pointer, relative to base.
func (s *Stream) Add(base *yaml.Node, pointer string, value any) error {
	tokens, err := splitPointer(pointer)
	if err != nil {
		return err
	}
	if len(tokens) == 0 {
		return fmt.Errorf("%q: adding at the root is not supported", pointer)
	}
	parent := base
	var parentKey *yaml.Node // the key parent is the value of, when it is one
	for i, tok := range tokens[:len(tokens)-1] {
		if parentKey, parent = child(parent, tok); parent == nil {
			return fmt.Errorf("%q: nothing at /%s", pointer, strings.Join(tokens[:i+1], "/"))
		}
	}
	node, err := valueNode(value)
	if err != nil {
		return err
	}
	last := tokens[len(tokens)-1]
	switch parent.Kind {
	case yaml.SequenceNode:
		if last != "-" {
			return fmt.Errorf("%q: only appending (-) to a sequence is supported", pointer)
		}
		if len(parent.Content) == 0 && parentKey != nil {
			// An empty list ([]) gets its first item as a block list in its place.
			seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{node}}
			s.replaceValue(parentKey, parent, seq)
			parent.Content, parent.Style = seq.Content, 0
			return nil
		}
		s.appendItem(parent, node)
	case yaml.MappingNode:
		for i := 0; i+1 < len(parent.Content); i += 2 {
			if parent.Content[i].Value == last {
				s.replaceValue(parent.Content[i], parent.Content[i+1], node)
				// A whole rewrite keeps the replaced value's comments.
				node.HeadComment, node.LineComment, node.FootComment = parent.Content[i+1].HeadComment, parent.Content[i+1].LineComment, parent.Content[i+1].FootComment
				parent.Content[i+1] = node
				return nil
			}
		}
		s.addKey(parent, last, node)
	default:
		return fmt.Errorf("%q: the parent is a scalar", pointer)
	}
	return nil
}

// Remove performs the JSON-patch "remove" at pointer, relative to base: an item of a sequence
// or a key of a mapping. The lines the item or the key and its value take are cut from the text
// when they hold nothing else (a block collection that keeps another entry); any other removal
// makes the stream be written out again as a whole.
func (s *Stream) Remove(base *yaml.Node, pointer string) error {
	tokens, err := splitPointer(pointer)
	if err != nil {
		return err
	}
	if len(tokens) == 0 {
		return fmt.Errorf("%q: removing the root is not supported", pointer)
	}
	parent := base
	for i, tok := range tokens[:len(tokens)-1] {
		if _, parent = child(parent, tok); parent == nil {
			return fmt.Errorf("%q: nothing at /%s", pointer, strings.Join(tokens[:i+1], "/"))
		}
	}
	last := tokens[len(tokens)-1]
	switch parent.Kind {
	case yaml.SequenceNode:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(parent.Content) {
			return fmt.Errorf("%q: no item %s", pointer, last)
		}
		item := parent.Content[i]
		first := item.Line
		dash := s.text.DashColumn(item)
		if dash < 0 || !s.text.BlankBefore(item.Line, dash) {
			first = 0
		}
		s.cutLines(parent, first, item, len(parent.Content) > 1, yamlsplice.ItemRank(dash))
		parent.Content = slices.Delete(parent.Content, i, i+1)
	case yaml.MappingNode:
		for i := 0; i+1 < len(parent.Content); i += 2 {
			if parent.Content[i].Value != last {
				continue
			}
			key, value := parent.Content[i], parent.Content[i+1]
			first := key.Line
			if key.Line == 0 || !s.text.BlankBefore(key.Line, s.column(key)) {
				first = 0
			}
			s.cutLines(parent, first, value, len(parent.Content) > 2, yamlsplice.KeyRank(s.column(key)))
			parent.Content = slices.Delete(parent.Content, i, i+2)
			return nil
		}
		return fmt.Errorf("%q: no key %s", pointer, last)
	default:
		return fmt.Errorf("%q: the parent is a scalar", pointer)
	}
	return nil
}

// cutLines queues the removal of the lines first to the last line of end, when parent is a
// block collection that keeps another entry and first is known; else the stream reformats.
// rank is the entry's (yamlsplice.CutLines).
func (s *Stream) cutLines(parent *yaml.Node, first int, end *yaml.Node, othersLeft bool, rank int) {
	lastLine, ok := s.text.EndLine(end)
	if !ok || first == 0 || !othersLeft || parent.Style&yaml.FlowStyle != 0 || end.Style&yaml.FlowStyle != 0 && end.Line != first {
		s.reformat = true
		return
	}
	s.text.CutLines(first, lastLine, rank)
}

// column is the byte column (0-based) where n starts on its line, -1 if unknown.
func (s *Stream) column(n *yaml.Node) int {
	o := s.text.Offset(n.Line, n.Column)
	if o < 0 {
		return -1
	}
	return o - s.text.LineStart(n.Line)
}

// Bytes is the patched stream, and whether it had to be written out again as a whole rather
// than spliced.
func (s *Stream) Bytes() ([]byte, bool, error) {
	if !s.reformat {
		// Edits that collide (a value replaced inside a key that is cut) make the stream be
		// written out as a whole instead.
		if out, ok := s.text.Apply(); ok {
			return out, false, nil
		}
	}
	var b bytes.Buffer
	for i, d := range s.docs {
		if i > 0 {
			b.WriteString("---\n")
		}
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(d); err != nil {
			return nil, true, err
		}
		if err := enc.Close(); err != nil {
			return nil, true, err
		}
	}
	if nl := s.text.NL; nl != "\n" { // the encoder writes LF: keep the file's CRLF
		return bytes.ReplaceAll(b.Bytes(), []byte("\n"), []byte(nl)), true, nil
	}
	return b.Bytes(), true, nil
}

// Reformat makes Bytes write the whole stream out from its parsed form.
func (s *Stream) Reformat() { s.reformat = true }

func (s *Stream) appendItem(seq, item *yaml.Node) {
	orig := originalChildren(seq.Content)
	seq.Content = append(seq.Content, item)
	if len(orig) == 0 || seq.Style&yaml.FlowStyle != 0 {
		s.reformat = true
		return
	}
	dash := s.text.DashColumn(orig[0])
	end, ok := s.text.EndLine(orig[len(orig)-1])
	s.spliceAfter(end, ok, dash, item, "- ", "  ", yamlsplice.ItemRank(dash))
}

func (s *Stream) addKey(m *yaml.Node, key string, value *yaml.Node) {
	orig := originalChildren(m.Content)
	k := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
	m.Content = append(m.Content, k, value)
	if len(orig) == 0 || m.Style&yaml.FlowStyle != 0 {
		s.reformat = true
		return
	}
	col := s.column(orig[0])
	end, ok := s.text.MappingEnd(m)
	s.spliceAfter(end, ok, col, &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{k, value}}, "", "", yamlsplice.KeyRank(col))
}

// spliceAfter queues n, rendered as block lines at column col, after line lastLine, where a
// collection ends; first and rest prefix its first and other lines ("- " and "  " for a list
// item). When the end cannot be told from the text (not ok), the stream is reformatted
// instead. rank orders it among other lines inserted at the same place: the end of a deeper
// structure first.
func (s *Stream) spliceAfter(lastLine int, ok bool, col int, n *yaml.Node, first, rest string, rank int) {
	lines, err := s.render(n)
	if !ok || col < 0 || err != nil {
		s.reformat = true
		return
	}
	pad := strings.Repeat(" ", col)
	out := make([]string, len(lines))
	for i, l := range lines {
		switch {
		case i == 0:
			out[i] = pad + first + l
		case l == "":
		default:
			out[i] = pad + rest + l
		}
	}
	s.text.InsertLines(lastLine, out, rank)
}

// replaceValue splices a new value for key in place of an empty one written on the key's line
// (null, ~, nothing, [] or {}) or of a scalar written whole on it (a name), without a comment;
// any other value makes the stream reformat.
func (s *Stream) replaceValue(key, old, value *yaml.Node) {
	empty := (old.Kind == yaml.ScalarNode && old.Tag == "!!null") ||
		((old.Kind == yaml.SequenceNode || old.Kind == yaml.MappingNode) && len(old.Content) == 0)
	if !empty && value.Kind == yaml.ScalarNode {
		if from, to, ok := s.scalarSource(old); ok && old.HeadComment == "" {
			// Only the value's characters change: a comment after it stays.
			lines, err := s.render(value)
			if err != nil || len(lines) != 1 {
				s.reformat = true
				return
			}
			s.text.Replace(from, to-from, lines[0], 0)
			return
		}
	}
	if !empty || key.Line == 0 || old.Line != key.Line || key.LineComment != "" || old.LineComment != "" || old.HeadComment != "" {
		s.reformat = true
		return
	}
	if old.Kind != yaml.ScalarNode {
		// [] or {} closed on the key's line: the rest of the line is replaced.
		open := byte('[')
		if old.Kind == yaml.MappingNode {
			open = '{'
		}
		if _, _, _, ok := s.text.FlowOnOneLine(old, open); !ok {
			s.reformat = true
			return
		}
	}
	lines, err := s.render(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{key, value}})
	if err != nil {
		s.reformat = true
		return
	}
	// The key keeps its own text; what follows it is written anew.
	keyLines, err := s.render(key)
	_, keyEnd, ok := s.text.ScalarToken(key)
	col := s.column(key)
	if err != nil || !ok || col < 0 || !strings.HasPrefix(lines[0], keyLines[0]) {
		s.reformat = true
		return
	}
	end := s.text.LineStart(key.Line) + len(s.text.Line(key.Line))
	pad := strings.Repeat(" ", col)
	text := strings.TrimPrefix(lines[0], keyLines[0])
	for _, l := range lines[1:] {
		text += s.text.NL + pad + l
	}
	s.text.Replace(keyEnd, end-keyEnd, text, 0)
}

// scalarSource is the byte range of a scalar's text, when it is written whole on its line
// (plain or quoted, not a block scalar, nor a plain one continued below; no anchor or tag in
// front) with nothing but a comment after it.
func (s *Stream) scalarSource(n *yaml.Node) (from, to int, ok bool) {
	if n.Kind != yaml.ScalarNode || n.Line == 0 || n.Anchor != "" || n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return 0, 0, false
	}
	from, to, ok = s.text.ScalarToken(n)
	col := s.column(n)
	if !ok || col < 0 || from != s.text.LineStart(n.Line)+col {
		return 0, 0, false
	}
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 && n.Line < s.text.Lines() {
		// A plain scalar may go on, indented, on the next line.
		next := s.text.Line(n.Line + 1)
		if t := strings.TrimLeft(next, " "); t != "" && !strings.HasPrefix(t, "#") && len(next)-len(t) > col {
			return 0, 0, false
		}
	}
	// What follows must be nothing or a comment, and the text must read back as the value.
	body := s.text.Body()
	rest := strings.TrimRight(string(body[to:s.text.LineEnd(n.Line)]), "\r\n")
	if after := strings.TrimLeft(rest, " \t"); after != "" && !strings.HasPrefix(after, "#") {
		return 0, 0, false
	}
	var v string
	if err := yaml.Unmarshal([]byte("v: "+string(body[from:to])), &struct {
		V *string `yaml:"v"`
	}{&v}); err != nil || v != n.Value {
		return 0, 0, false
	}
	return from, to, true
}

// originalChildren are the nodes that come from the text (added ones have no line).
func originalChildren(nodes []*yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	for _, n := range nodes {
		if n.Line > 0 {
			out = append(out, n)
		}
	}
	return out
}

// render is a node as block YAML lines at column 0, indented as the stream's own block
// collections are (yamlsplice.DetectStyle).
func (s *Stream) render(n *yaml.Node) ([]string, error) {
	if s.style == nil {
		st := yamlsplice.DetectStyle(s.docs...)
		s.style = &st
	}
	return s.style.Block(n)
}

// child is the node at tok under n, with its key when n is a mapping.
func child(n *yaml.Node, tok string) (key, value *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == tok {
				return n.Content[i], n.Content[i+1]
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
			return nil, n.Content[i]
		}
	}
	return nil, nil
}

func splitPointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("%q is not a JSON pointer", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		toks[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
	}
	return toks, nil
}

// valueNode turns a JSON-encodable value into a YAML node, keeping the order of object keys.
func valueNode(v any) (*yaml.Node, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return jsonNode(dec)
}

func jsonNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := jsonNode(dec)
				if err != nil {
					return nil, err
				}
				m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k.(string)}, v)
			}
			_, err := dec.Token() // }
			return m, err
		case '[':
			s := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				v, err := jsonNode(dec)
				if err != nil {
					return nil, err
				}
				s.Content = append(s.Content, v)
			}
			_, err := dec.Token() // ]
			return s, err
		}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(t.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}
