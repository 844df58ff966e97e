package installconfig

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/yamlsplice"
)

// editMode is how plan.apply turns the edited node tree into bytes.
type editMode int

const (
	// editText splices the new lines into the original text: the diff is only the change.
	editText editMode = iota
	// editTree writes the edited node tree out as a whole.
	editTree
	// editFlattened expands aliases and << merges first, so that no edit can reach a pool
	// through a shared node, then writes the tree out as a whole.
	editFlattened
)

// apply performs the plan on a fresh parse of f.
func (p *plan) apply(orig *File, mode editMode) (out []byte, reformatted bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	f, _ := Parse(orig.Name, orig.Data)
	if f.root == nil {
		return nil, false, errors.New("the file does not parse")
	}
	if mode == editFlattened {
		budget := 1 << 20
		root, err := flatten(f.root, &budget, map[*yaml.Node]bool{})
		if err != nil {
			return nil, false, err
		}
		f.doc.Content[0], f.root = root, root
	}
	c := &checker{f: f}
	c.run()
	m := &c.model
	e := &editor{f: f, t: yamlsplice.New(f.body), text: mode == editText, style: yamlsplice.DetectStyle(f.root)}

	for _, pl := range m.pools() {
		for _, k := range listKinds {
			for _, l := range pl.lists[k] {
				for _, it := range l.items {
					if it.canonical != "" && it.node.Value != it.canonical {
						e.replaceScalar(it.node, it.canonical)
					}
				}
			}
		}
	}
	for _, t := range p.ops {
		var pl *pool
		switch {
		case t.pool == nil:
		case t.kind == ControlPlanePool:
			pl = m.controlPlane
		case t.pool.index < len(m.compute):
			pl = m.compute[t.pool.index]
		}
		if t.pool != nil && (pl == nil || pl.node == nil) {
			return nil, false, errors.New("the file changed shape while patching")
		}
		if pl == nil {
			e.createPool(m, t)
			continue
		}
		e.ensureLists(pl, t.final)
	}

	if e.text {
		if out, ok := e.spliced(); ok {
			return out, false, nil
		}
	}
	out, err = e.encode()
	return out, true, err
}

// editor changes the node tree and, as long as it can, records the same change as text
// splices on the original bytes (the file without its BOM).
type editor struct {
	f     *File
	t     *yamlsplice.Text
	text  bool
	style yamlsplice.Style // the file's indentation, for new lines
}

func (e *editor) fail() { e.text = false }

func (e *editor) add(off, del int, text string) { e.t.Replace(off, del, text, 0) }

// spliced applies the recorded splices to the original bytes.
func (e *editor) spliced() ([]byte, bool) {
	out, ok := e.t.Apply()
	if !ok {
		return nil, false
	}
	return append(append([]byte(nil), e.f.bom...), out...), true
}

// encode writes the node tree out as a whole, in the file's indentation, line breaks and BOM,
// followed by any further documents as they were.
func (e *editor) encode() ([]byte, error) {
	nullsInFlow(e.f.doc, false)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(max(e.style.Indent, 2))
	if e.style.SeqIndent == 0 {
		enc.CompactSeqIndent()
	}
	if err := enc.Encode(e.f.doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	if e.t.NL != "\n" {
		out = bytes.ReplaceAll(out, []byte("\n"), []byte(e.t.NL))
	}
	if rest := e.rest(); len(rest) > 0 {
		out = append(out, rest...)
	}
	return append(append([]byte(nil), e.f.bom...), out...), nil
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

// ensureLists makes the pool's own lists equal final (for the kinds that change), creating
// platform, openstack and the list keys as needed.
func (e *editor) ensureLists(pl *pool, final [2][]string) {
	// "openstack: {}" or "platform: {}" (as openshift-install writes it) in a block mapping
	// is replaced with a block, rather than filled in flow style.
	if om := pl.openstack.node; om != nil && emptyFlowInBlock(pl.openstack) {
		e.replaceValue(pl.openstack, listsNode(final))
		return
	}
	if pm := pl.platform.node; pm != nil && pl.openstack.node == nil && !pl.openstack.present() && emptyFlowInBlock(pl.platform) {
		e.replaceValue(pl.platform, mapNode("openstack", listsNode(final)))
		return
	}
	if om := pl.openstack.node; om != nil {
		for _, k := range listKinds {
			if final[k] == nil {
				continue
			}
			l := pl.list(k)
			switch {
			case l != nil && l.step.node != nil:
				have := map[string]bool{}
				for _, c := range l.step.node.Content {
					if r := resolve(c); r != nil {
						have[neutronid.Key(r.Value)] = true
					}
				}
				var missing []string
				for _, id := range final[k] {
					if !have[id] {
						missing = append(missing, id)
					}
				}
				if len(missing) > 0 {
					e.appendItems(l.step.node, missing)
				}
				e.removeItems(l.step, final[k])
			case l != nil:
				e.replaceValue(l.step, seqNode(final[k]))
			default:
				e.addKey(om, k.Key(), seqNode(final[k]))
			}
		}
		return
	}
	os := listsNode(final)
	switch {
	case pl.openstack.present():
		e.replaceValue(pl.openstack, os)
	case pl.platform.node != nil:
		e.addKey(pl.platform.node, "openstack", os)
	case pl.platform.present():
		e.replaceValue(pl.platform, mapNode("openstack", os))
	default:
		e.addKey(pl.node, "platform", mapNode("openstack", os))
	}
}

func emptyFlowInBlock(s step) bool {
	n := s.raw
	return n != nil && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) && n.Style&yaml.FlowStyle != 0 &&
		len(n.Content) == 0 && s.parent != nil && s.parent.Style&yaml.FlowStyle == 0
}

// createPool adds the compute pool "worker" or the controlPlane the file does not have.
func (e *editor) createPool(m *model, t *target) {
	platform := mapNode("openstack", listsNode(t.final))
	if t.kind == ControlPlanePool {
		cp := mapNode("name", strNode("master"), "platform", platform)
		if m.cpStep.present() {
			e.replaceValue(m.cpStep, cp)
		} else {
			e.addKey(e.f.root, "controlPlane", cp)
		}
		return
	}
	worker := mapNode("name", strNode("worker"), "platform", platform)
	s := m.computeStep
	switch {
	case !s.present():
		e.addKey(e.f.root, "compute", &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{worker}})
	case s.node == nil || emptyFlowInBlock(s):
		e.replaceValue(s, &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{worker}})
	default: // an empty list
		e.fail()
		s.node.Content = append(s.node.Content, worker)
	}
}

func strNode(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }

func seqNode(values []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, v := range values {
		n.Content = append(n.Content, strNode(v))
	}
	return n
}

// mapNode builds a mapping from key, value pairs.
func mapNode(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Content = append(n.Content, strNode(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return n
}

func listsNode(final [2][]string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for _, k := range listKinds {
		if final[k] != nil {
			n.Content = append(n.Content, strNode(k.Key()), seqNode(final[k]))
		}
	}
	return n
}

// rest is what follows the first document when there is a second one, from its "---" line.
func (e *editor) rest() []byte {
	docs, err := decodeDocuments(e.f.body, 2)
	if err != nil || len(docs) < 2 {
		return nil
	}
	if o := e.t.Offset(docs[1].Line, 1); o >= 0 {
		return e.f.body[o:]
	}
	return nil
}

// quote writes v in the quoting style of a neighbour.
func quote(v string, st yaml.Style) string {
	switch {
	case st&yaml.DoubleQuotedStyle != 0:
		return `"` + v + `"`
	case st&yaml.SingleQuotedStyle != 0:
		return "'" + v + "'"
	}
	return v
}

// ---- edits ----

// replaceScalar rewrites a scalar's value in its own quoting style.
func (e *editor) replaceScalar(n *yaml.Node, v string) {
	if e.text {
		if s, end, ok := e.t.ScalarToken(n); ok {
			e.add(s, end-s, quote(v, n.Style))
		} else {
			e.fail()
		}
	}
	n.Value = v
}

// removeItems takes out of an existing list the IDs that keep does not hold (patch --remove).
// In the text, the line of each such item goes, when it holds nothing else: a block list that
// keeps an item; anything else (a flow list, a list left empty, an alias) is written out as a
// whole.
func (e *editor) removeItems(list step, keep []string) {
	seq := list.node
	kept := map[string]bool{}
	for _, id := range keep {
		kept[id] = true
	}
	var out []*yaml.Node
	var gone []*yaml.Node
	for _, c := range seq.Content {
		if r := resolve(c); r != nil && !kept[neutronid.Key(r.Value)] {
			gone = append(gone, c)
			continue
		}
		out = append(out, c)
	}
	if len(gone) == 0 {
		return
	}
	seq.Content = out
	if !e.text {
		return
	}
	if seq.Style&yaml.FlowStyle != 0 || list.shared || list.raw != seq {
		e.fail()
		return
	}
	if len(out) == 0 && !e.emptyAfterKey(list.key) {
		return
	}
	for _, n := range gone {
		start, end, ok := e.t.ScalarToken(n)
		if !ok || n.Kind != yaml.ScalarNode || n.Anchor != "" || n.Line < 1 || n.Line > e.t.Lines() {
			e.fail()
			return
		}
		_, alone := e.itemPrefix(n)
		after := strings.TrimRight(string(e.f.body[end:e.t.LineEnd(n.Line)]), "\r\n")
		if !alone || start != e.t.Offset(n.Line, n.Column) || (strings.TrimSpace(after) != "" && !strings.HasPrefix(strings.TrimSpace(after), "#")) {
			e.fail()
			return
		}
		e.t.CutLines(n.Line, n.Line, yamlsplice.ItemRank(e.t.DashColumn(n)))
	}
}

// itemPrefix is the text before list item n on its line, when that is blanks, the item's
// dash and blanks.
func (e *editor) itemPrefix(n *yaml.Node) (string, bool) {
	dash := e.t.DashColumn(n)
	if dash < 0 || !e.t.BlankBefore(n.Line, dash) {
		return "", false
	}
	return string(e.f.body[e.t.LineStart(n.Line):e.t.Offset(n.Line, n.Column)]), true
}

// emptyAfterKey writes " []" after the colon of key, written alone on its line, for a block
// list left empty (a key without a value would be null); otherwise the text is given up.
func (e *editor) emptyAfterKey(key *yaml.Node) bool {
	colon, ok := e.t.AfterBareKey(key)
	if !ok {
		e.fail()
		return false
	}
	e.add(colon, 0, " []")
	return true
}

// appendItems adds IDs at the end of an existing list, in the style of its last item.
func (e *editor) appendItems(seq *yaml.Node, ids []string) {
	var st yaml.Style
	if len(seq.Content) > 0 {
		if last := resolve(seq.Content[len(seq.Content)-1]); last != nil && last.Kind == yaml.ScalarNode {
			st = last.Style & (yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle)
		}
	}
	if e.text {
		e.appendText(seq, ids, st)
	}
	for _, id := range ids {
		n := strNode(id)
		n.Style = st
		seq.Content = append(seq.Content, n)
	}
}

func (e *editor) appendText(seq *yaml.Node, ids []string, st yaml.Style) {
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = quote(id, st)
	}
	if seq.Line == 0 {
		e.fail()
		return
	}
	if seq.Style&yaml.FlowStyle != 0 {
		if !e.t.AppendToFlow(seq, '[', quoted) {
			e.fail()
		}
		return
	}
	last := seq.Content[len(seq.Content)-1]
	start, _, ok := e.t.ScalarToken(last)
	if !ok || last.Line == 0 {
		e.fail()
		return
	}
	prefix, alone := e.itemPrefix(last)
	if !alone || start < e.t.Offset(last.Line, last.Column) {
		e.fail()
		return
	}
	lines := make([]string, len(quoted))
	for i, q := range quoted {
		lines[i] = prefix + q
	}
	e.t.InsertLines(last.Line, lines, yamlsplice.ItemRank(e.t.DashColumn(last)))
}

// addKey adds key: value at the end of mapping m.
func (e *editor) addKey(m *yaml.Node, key string, value *yaml.Node) {
	if m.Style&yaml.FlowStyle != 0 {
		setFlow(value)
	}
	if e.text {
		e.addKeyText(m, key, value)
	}
	m.Content = append(m.Content, strNode(key), value)
}

func (e *editor) addKeyText(m *yaml.Node, key string, value *yaml.Node) {
	if m.Line == 0 || m.Style&yaml.FlowStyle == 0 && len(m.Content) == 0 {
		e.fail()
		return
	}
	if m.Style&yaml.FlowStyle != 0 {
		if !e.t.AppendToFlow(m, '{', []string{key + ": " + yamlsplice.Flow(value)}) {
			e.fail()
		}
		return
	}
	end, ok := e.t.MappingEnd(m)
	if !ok {
		e.fail()
		return
	}
	col := m.Content[0].Column
	e.t.InsertLines(end, e.block(mapNode(key, value), col-1), yamlsplice.KeyRank(col-1))
}

// replaceValue replaces a null value (written as nothing, ~ or null) with a new one.
func (e *editor) replaceValue(s step, value *yaml.Node) {
	raw := s.raw
	holder := s.parent
	idx := -1
	if holder != nil {
		for i := 1; i < len(holder.Content); i += 2 {
			if holder.Content[i] == raw {
				idx = i
			}
		}
	}
	if idx < 0 || (raw.Kind != yaml.ScalarNode && !emptyFlowInBlock(s)) {
		// The null comes from a merge: give this mapping its own key instead.
		e.fail()
		if holder != nil {
			holder.Content = append(holder.Content, strNode(s.key.Value), value)
		}
		return
	}
	flowParent := holder.Style&yaml.FlowStyle != 0
	if flowParent {
		setFlow(value)
	}
	if e.text {
		e.replaceValueText(s, value, flowParent)
	}
	holder.Content[idx] = value
}

func (e *editor) replaceValueText(s step, value *yaml.Node, flowParent bool) {
	raw, body := s.raw, e.f.body
	o := e.t.TokenStart(raw)
	if o < 0 || raw.Line == 0 || o >= len(body) {
		e.fail()
		return
	}
	if raw.Kind != yaml.ScalarNode { // {} or []: drop it and write the value as a block below
		close, multiline, ok := e.t.ScanFlow(o)
		rest := strings.TrimSpace(string(body[min(close+1, len(body)):e.t.LineEnd(raw.Line)]))
		if !ok || multiline || raw.Line != s.key.Line || (rest != "" && rest[0] != '#') {
			e.fail()
			return
		}
		start := o
		for start > 0 && (body[start-1] == ' ' || body[start-1] == '\t') {
			start--
		}
		e.add(start, close+1-start, "")
		e.t.InsertLines(raw.Line, e.valueLines(value, s.key.Column-1), yamlsplice.KeyRank(s.key.Column))
		return
	}
	switch raw.Value {
	case "~", "null", "Null", "NULL":
		if o+len(raw.Value) <= len(body) && string(body[o:o+len(raw.Value)]) == raw.Value {
			e.add(o, len(raw.Value), yamlsplice.Flow(value))
			return
		}
	case "":
		rest := strings.TrimSpace(string(body[o:e.t.LineEnd(raw.Line)]))
		if flowParent || raw.Line != s.key.Line || (rest != "" && rest[0] != '#') {
			break
		}
		e.t.InsertLines(raw.Line, e.valueLines(value, s.key.Column-1), yamlsplice.KeyRank(s.key.Column))
		return
	}
	e.fail()
}

// valueLines renders the block value of a key at column keyCol (0-based), without the key.
func (e *editor) valueLines(value *yaml.Node, keyCol int) []string {
	if value.Kind == yaml.SequenceNode {
		if lines := e.block(mapNode("x", value), keyCol); len(lines) > 0 {
			return lines[1:]
		}
		return nil
	}
	return e.block(value, keyCol+e.style.Indent)
}

// block renders n in block style from column col (0-based), in the file's indentation.
func (e *editor) block(n *yaml.Node, col int) []string {
	lines, err := e.style.Block(n)
	if err != nil {
		e.fail()
		return nil
	}
	return yamlsplice.Indent(lines, col)
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

// flatten copies a node tree with every alias expanded and every << merge inlined, without
// anchors, so that no node is shared. budget bounds the size of the copy.
func flatten(n *yaml.Node, budget *int, onStack map[*yaml.Node]bool) (*yaml.Node, error) {
	if *budget--; *budget < 0 {
		return nil, errors.New("the document expands to too many nodes")
	}
	if n.Kind == yaml.AliasNode {
		target := resolve(n)
		if target == nil || onStack[target] {
			return nil, errors.New("an alias refers to itself")
		}
		n = target
	}
	if onStack[n] {
		return nil, errors.New("an alias refers to itself")
	}
	onStack[n] = true
	defer delete(onStack, n)
	c := *n
	c.Anchor = ""
	c.Alias = nil
	c.Content = nil
	switch n.Kind {
	case yaml.SequenceNode, yaml.DocumentNode:
		for _, child := range n.Content {
			fc, err := flatten(child, budget, onStack)
			if err != nil {
				return nil, err
			}
			c.Content = append(c.Content, fc)
		}
	case yaml.MappingNode:
		es, bad, overflow := entries(n)
		if len(bad) > 0 || overflow {
			return nil, errors.New("a << merge cannot be expanded")
		}
		seen := map[string]bool{}
		for _, en := range es {
			if en.key == nil || seen[en.key.Value] {
				continue
			}
			seen[en.key.Value] = true
			k, err := flatten(en.key, budget, onStack)
			if err != nil {
				return nil, err
			}
			v, err := flatten(en.value, budget, onStack)
			if err != nil {
				return nil, err
			}
			c.Content = append(c.Content, k, v)
		}
	}
	return &c, nil
}
