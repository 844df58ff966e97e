package yamledit

import (
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

func parse(t *testing.T, in string) (*Editor, *yaml.Node) {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(in), &doc); err != nil {
		t.Fatal(err)
	}
	return New([]byte(in), &doc), doc.Content[0]
}

// at is the value of key in mapping m, and the key.
func at(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1], m.Content[i]
		}
	}
	return nil, nil
}

func str(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v} }

func seq(vs ...string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	for _, v := range vs {
		n.Content = append(n.Content, str(v))
	}
	return n
}

// TestFlowRule: a flow collection with entries keeps its style and every other byte of the
// file: entries spliced in or cut out on one line, else that collection alone written anew;
// only a comment inside it makes the file be written out as a whole.
func TestFlowRule(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		whole          bool
		edit           func(e *Editor, root *yaml.Node)
	}{
		{"append, nested flow", "p: {os: {ids: [a, b]}}  # keep\nk:   v\n", "p: {os: {ids: [a, b, c]}}  # keep\nk:   v\n", false,
			func(e *Editor, root *yaml.Node) {
				p, _ := at(root, "p")
				os, _ := at(p, "os")
				ids, _ := at(os, "ids")
				e.Append(ids, str("c"))
			}},
		{"two appends, one splice", "l: []\nm: {x: [1]}\n", "l: []\nm: {x: [1, b, c]}\n", false,
			func(e *Editor, root *yaml.Node) {
				m, _ := at(root, "m")
				x, _ := at(m, "x")
				e.Append(x, str("b"))
				e.Append(x, str("c"))
			}},
		{"on two lines: written anew alone", "a:  1\nl: [x,\n    y]\nz:  2\n", "a:  1\nl: [x, y, 'a, b']\nz:  2\n", false,
			func(e *Editor, root *yaml.Node) {
				l, _ := at(root, "l")
				e.Append(l, str("a, b"))
			}},
		{"a comment inside: the whole file", "l: [x, # one\n    y]\nz:  2\n", "l: [x, # one\n  y, c]\nz: 2\n", true,
			func(e *Editor, root *yaml.Node) {
				l, _ := at(root, "l")
				e.Append(l, str("c"))
			}},
		{"remove the middle item", "l: [x, 'y', z]\n", "l: [x, z]\n", false,
			func(e *Editor, root *yaml.Node) {
				l, _ := at(root, "l")
				e.Remove(l, l.Content[1])
			}},
		{"remove and append: written anew", "l: [x,   y]\n", "l: [y, z]\n", false,
			func(e *Editor, root *yaml.Node) {
				l, _ := at(root, "l")
				e.Remove(l, l.Content[0])
				e.Append(l, str("z"))
			}},
		{"a key removed from a flow mapping", "m: {a: 1, b: [2], c: 3}\n", "m: {a: 1, c: 3}\n", false,
			func(e *Editor, root *yaml.Node) {
				m, _ := at(root, "m")
				_, b := at(m, "b")
				e.Remove(m, b)
			}},
		{"a scalar in a flow list, and the list anew", "l: [&a x, *a,\n  y]\n", "l: [&a X, *a, y, z]\n", false,
			func(e *Editor, root *yaml.Node) {
				l, _ := at(root, "l")
				e.SetScalar(l.Content[0], "X")
				e.Append(l, str("z"))
			}},
		{"a value set in a flow mapping", "m: {a: ~, b: 1}\n", "m: {a: [x], b: 1}\n", false,
			func(e *Editor, root *yaml.Node) {
				m, _ := at(root, "m")
				_, a := at(m, "a")
				e.SetValue(m, a, seq("x"))
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, root := parse(t, c.in)
			c.edit(e, root)
			out, whole, err := e.Bytes()
			if err != nil || string(out) != c.want || whole != c.whole {
				t.Errorf("got %q (whole %t, %v), want %q (whole %t)", out, whole, err, c.want, c.whole)
			}
		})
	}
}

// TestEmptyHasNoStyle: [], {} and a null on a block key's line become block collections
// when they get entries; a block collection left empty is [] or {} after its key.
func TestEmptyHasNoStyle(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		edit           func(e *Editor, root *yaml.Node)
	}{
		{"[] gets items", "a:\n    b: x\nl: [] # none yet\nz: 1\n", "a:\n    b: x\nl: # none yet\n- b\n- c\nz: 1\n",
			func(e *Editor, root *yaml.Node) {
				l, _ := at(root, "l")
				e.Append(l, str("b"))
				e.Append(l, str("c"))
			}},
		{"{} gets a key with a list", "m:\n  os: {}\n", "m:\n  os:\n    ids:\n    - a\n",
			func(e *Editor, root *yaml.Node) {
				m, _ := at(root, "m")
				os, _ := at(m, "os")
				e.AddKey(os, "ids", seq("a"))
			}},
		{"~ replaced by a list, a scalar in place", "m:\n  l: ~\n  s: null # c\n", "m:\n  l:\n  - a\n  s: v # c\n",
			func(e *Editor, root *yaml.Node) {
				m, _ := at(root, "m")
				_, l := at(m, "l")
				_, s := at(m, "s")
				e.SetValue(m, l, seq("a"))
				e.SetValue(m, s, str("v"))
			}},
		{"the last item goes", "l:\n  - a # one\nz: 1\n", "l: []\nz: 1\n",
			func(e *Editor, root *yaml.Node) {
				l, _ := at(root, "l")
				e.Remove(l, l.Content[0])
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, root := parse(t, c.in)
			c.edit(e, root)
			out, whole, err := e.Bytes()
			if err != nil || string(out) != c.want || whole {
				t.Errorf("got %q (whole %t, %v), want %q spliced", out, whole, err, c.want)
			}
		})
	}
}

// TestAnchorKept: an item that defines an anchor is not cut from the text (an alias would be
// left without it): the file is written out as a whole.
func TestAnchorKept(t *testing.T) {
	e, root := parse(t, "l:\n- &a x\n- y\nk: *a\n")
	l, _ := at(root, "l")
	e.Remove(l, l.Content[0])
	if _, whole, _ := e.Bytes(); !whole {
		t.Error("an anchored item was cut from the text")
	}
}
