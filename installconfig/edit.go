package installconfig

import (
	"errors"
	"fmt"

	yaml "go.yaml.in/yaml/v3"

	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/yamledit"
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
	e := &editor{f: f, ed: yamledit.New(f.body, f.doc)}
	if mode != editText {
		e.ed.Reformat()
	}

	for _, pl := range m.pools() {
		for _, k := range listKinds {
			for _, l := range pl.lists[k] {
				for _, it := range l.items {
					if it.canonical != "" && it.node.Value != it.canonical {
						e.ed.SetScalar(it.node, it.canonical)
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

	out, reformatted, err = e.ed.Bytes()
	if err != nil {
		return nil, false, err
	}
	if reformatted {
		out = append(out, e.rest()...)
	}
	return append(append([]byte(nil), f.bom...), out...), reformatted, nil
}

// editor decides which nodes and values the plan changes; yamledit writes the changes into
// the tree and the text.
type editor struct {
	f  *File
	ed *yamledit.Editor
}

// ensureLists makes the pool's own lists equal final (for the kinds that change), creating
// platform, openstack and the list keys as needed.
func (e *editor) ensureLists(pl *pool, final [2][]string) {
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
				e.ed.AddKey(om, k.Key(), seqNode(final[k]))
			}
		}
		return
	}
	os := listsNode(final)
	switch {
	case pl.openstack.present():
		e.replaceValue(pl.openstack, os)
	case pl.platform.node != nil:
		e.ed.AddKey(pl.platform.node, "openstack", os)
	case pl.platform.present():
		e.replaceValue(pl.platform, mapNode("openstack", os))
	default:
		e.ed.AddKey(pl.node, "platform", mapNode("openstack", os))
	}
}

// createPool adds the compute pool "worker" or the controlPlane the file does not have.
func (e *editor) createPool(m *model, t *target) {
	platform := mapNode("openstack", listsNode(t.final))
	if t.kind == ControlPlanePool {
		cp := mapNode("name", strNode("master"), "platform", platform)
		if m.cpStep.present() {
			e.replaceValue(m.cpStep, cp)
		} else {
			e.ed.AddKey(e.f.root, "controlPlane", cp)
		}
		return
	}
	worker := mapNode("name", strNode("worker"), "platform", platform)
	s := m.computeStep
	switch {
	case !s.present():
		e.ed.AddKey(e.f.root, "compute", &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{worker}})
	case s.node == nil:
		e.replaceValue(s, &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{worker}})
	default: // an empty list
		if s.shared {
			e.ed.Reformat()
		}
		e.ed.Append(s.node, worker)
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
	if o := e.ed.Text().Offset(docs[1].Line, 1); o >= 0 {
		return e.f.body[o:]
	}
	return nil
}

// ---- edits ----

// removeItems takes out of an existing list the IDs that keep does not hold (patch --remove).
// A list reached through an alias or a merge is shared with other pools: it is written out
// from the tree.
func (e *editor) removeItems(list step, keep []string) {
	kept := map[string]bool{}
	for _, id := range keep {
		kept[id] = true
	}
	var gone []*yaml.Node
	for _, c := range list.node.Content {
		if r := resolve(c); r != nil && !kept[neutronid.Key(r.Value)] {
			gone = append(gone, c)
		}
	}
	if len(gone) > 0 && (list.shared || list.raw != list.node) {
		e.ed.Reformat()
	}
	for _, n := range gone {
		e.ed.Remove(list.node, n)
	}
}

// appendItems adds IDs at the end of an existing list, quoted as its last item is.
func (e *editor) appendItems(seq *yaml.Node, ids []string) {
	var st yaml.Style
	if len(seq.Content) > 0 {
		if last := resolve(seq.Content[len(seq.Content)-1]); last != nil && last.Kind == yaml.ScalarNode {
			st = last.Style & (yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle)
		}
	}
	items := make([]*yaml.Node, len(ids))
	for i, id := range ids {
		items[i] = strNode(id)
		items[i].Style = st
	}
	e.ed.Append(seq, items...)
}

// replaceValue replaces a null value (written as nothing, ~ or null) with a new one.
func (e *editor) replaceValue(s step, value *yaml.Node) {
	holder := s.parent
	if holder == nil {
		e.ed.Reformat()
		return
	}
	for i := 1; i < len(holder.Content); i += 2 {
		if holder.Content[i] == s.raw {
			e.ed.SetValue(holder, holder.Content[i-1], value)
			return
		}
	}
	// The null comes from a merge: give this mapping its own key instead.
	e.ed.Reformat()
	e.ed.AddKey(holder, s.key.Value, value)
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
