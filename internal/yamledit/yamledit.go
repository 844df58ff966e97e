// Package yamledit changes a parsed YAML stream and its text together: append items to a
// list, add a key to a mapping, replace a value or a scalar, remove an item or a key. Every
// operation edits the go.yaml.in/yaml/v3 node tree, and records the same change as a splice
// on the original bytes (internal/yamlsplice), so that the output differs from the input by
// the change only; where a splice cannot be made, the stream is written out from the tree as
// a whole, and Bytes says so. Callers choose what to change (paths, values, the style of new
// scalars); the rules of how a change is written are here, once:
//
//   - A block collection gets new entries as lines at the indentation of its own, and loses
//     an entry by the lines it takes.
//   - A flow collection that holds entries is the file's choice: new entries are spliced inside
//     its brackets and removed ones cut out of them, on one line. Where that cannot be done
//     byte for byte (it spans lines, it is rebuilt), that collection alone is written anew on
//     one line, in place; the rest of the text stays. Only a comment inside it, which that
//     would lose, makes the stream be written out as a whole.
//   - [] and {} are how any empty collection is written, so they say nothing of style: as the
//     value of a block mapping's key, they become block collections when they get entries,
//     as a null (~, null, nothing) does when a collection replaces it. A block collection left
//     empty is written [] or {} after its key.
//
// New nodes (no line) are written when Bytes is called, so that later changes to them are
// written too.
package yamledit

import (
	"bytes"
	"slices"

	yaml "go.yaml.in/yaml/v3"

	"github.com/manila-setup/manila-setup/internal/yamlsplice"
)

// Editor is a YAML stream being edited.
type Editor struct {
	t     *yamlsplice.Text
	docs  []*yaml.Node
	whole bool              // the splices were given up: the tree is written out as a whole
	style *yamlsplice.Style // how the stream indents, once known
	// fresh are nodes of the text whose text is written anew from the tree (an empty flow
	// collection turned into a block one): changes under them are tree edits only.
	fresh map[*yaml.Node]bool
	// later are the splices whose text is known when Bytes is called; false gives up.
	later []func() bool
	// flows are the flow collections whose entries changed, with their entries as parsed.
	flows   []*flowEdit
	flowOf  map[*yaml.Node]*flowEdit
	covers  []*yaml.Node // flow collections to write anew in place
	holder  map[*yaml.Node]holder
	scalars map[scalarKey][]string // block text of scalars written so far
}

// holder is the mapping a node is the value of, and its key (nil for a list item).
type holder struct{ parent, key *yaml.Node }

// New is an editor of the text body (without a byte order mark: what node positions refer
// to) and of its parsed documents (document nodes), which it edits.
func New(body []byte, docs ...*yaml.Node) *Editor {
	return &Editor{t: yamlsplice.New(body), docs: docs, fresh: map[*yaml.Node]bool{}, flowOf: map[*yaml.Node]*flowEdit{}}
}

// Text is the text being spliced: its positions, and its options (FinalBreak).
func (e *Editor) Text() *yamlsplice.Text { return e.t }

// Reformat makes Bytes write the stream out from the tree as a whole: for a change the
// caller knows no splice would mean (a node shared through an alias).
func (e *Editor) Reformat() { e.whole = true }

// Bytes is the edited stream, and whether it was written out from the tree as a whole rather
// than spliced. It is called once, after the edits.
func (e *Editor) Bytes() ([]byte, bool, error) {
	if !e.whole && e.splice() {
		if out, ok := e.t.Apply(); ok {
			return out, false, nil
		}
	}
	out, err := e.encode()
	return out, true, err
}

// splice queues the splices that wait for the final tree.
func (e *Editor) splice() bool {
	for _, f := range e.later {
		if !f() {
			return false
		}
	}
	for _, fe := range e.flows {
		if !e.flushFlow(fe) {
			return false
		}
	}
	for _, n := range e.covers {
		o, close, _, _ := e.t.FlowSpan(n)
		text, err := e.flowText(n)
		if err != nil {
			return false
		}
		e.t.Cover(o, close+1-o, text)
	}
	return !e.whole
}

// encode writes the documents out from the tree, in the stream's indentation and line
// breaks.
func (e *Editor) encode() ([]byte, error) {
	st := e.indentation()
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(max(st.Indent, 2))
	if st.SeqIndent == 0 {
		enc.CompactSeqIndent()
	}
	for _, d := range e.docs {
		nullsInFlow(d, false)
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	if e.t.NL != "\n" { // the encoder writes LF: keep the file's CRLF
		out = bytes.ReplaceAll(out, []byte("\n"), []byte(e.t.NL))
	}
	return out, nil
}

// nullsInFlow writes empty nulls inside flow collections as "null": the YAML encoder would
// write them as an empty quoted string, which changes their meaning ({a} is {a: null}).
func nullsInFlow(n *yaml.Node, inFlow bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" && n.Value == "" && inFlow {
		n.Value = "null"
	}
	inFlow = inFlow || n.Style&yaml.FlowStyle != 0
	for _, c := range n.Content {
		nullsInFlow(c, inFlow)
	}
}

// indentation is how the stream's block collections indent (yamlsplice.DetectStyle).
func (e *Editor) indentation() yamlsplice.Style {
	if e.style == nil {
		st := yamlsplice.DetectStyle(e.docs...)
		e.style = &st
	}
	return *e.style
}

// isNew reports whether n's text is written by the editor: a node added since the parse, or
// one written anew.
func (e *Editor) isNew(n *yaml.Node) bool { return n.Line == 0 || e.fresh[n] }

// holderOf is the mapping n is the value of and its key, or the list it is an item of, as
// written (aliases not followed).
func (e *Editor) holderOf(n *yaml.Node) holder {
	if e.holder == nil {
		e.holder = map[*yaml.Node]holder{}
		var walk func(p *yaml.Node)
		walk = func(p *yaml.Node) {
			for i, c := range p.Content {
				h := holder{parent: p}
				if p.Kind == yaml.MappingNode {
					if i%2 == 0 {
						continue
					}
					h.key = p.Content[i-1]
				}
				if _, seen := e.holder[c]; !seen {
					e.holder[c] = h
					walk(c)
				}
			}
		}
		for _, d := range e.docs {
			walk(d)
		}
	}
	return e.holder[n]
}

// defines reports whether n's tree holds an anchor: text an alias elsewhere may refer to.
func defines(n *yaml.Node) bool {
	if n.Anchor != "" {
		return true
	}
	return slices.ContainsFunc(n.Content, defines)
}

// setFlow marks a new subtree as flow style, as a value inside a flow collection must be.
func setFlow(n *yaml.Node) {
	if n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode {
		n.Style |= yaml.FlowStyle
	}
	for _, c := range n.Content {
		setFlow(c)
	}
}
