package yamlsplice

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Style is how a text indents its block collections, so that new lines look like their
// neighbours.
type Style struct {
	Indent    int // columns a nested block mapping is indented by, relative to its key
	SeqIndent int // columns a block sequence's "-" is indented by, relative to its key
}

// DetectStyle finds the indentation of the first block mapping, and of the first block
// sequence, written under a key on lines of their own in the trees of roots. Without one, a
// mapping is indented by 2 and a sequence not at all ("key:\n- a", as kubectl and
// openshift-install write them).
func DetectStyle(roots ...*yaml.Node) Style {
	s := Style{Indent: -1, SeqIndent: -1}
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		if depth > 50 || (s.Indent >= 0 && s.SeqIndent >= 0) {
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, depth+1)
			}
		case yaml.MappingNode:
			if n.Style&yaml.FlowStyle != 0 {
				return
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if v.Line > k.Line && v.Style&yaml.FlowStyle == 0 {
					switch v.Kind {
					case yaml.MappingNode:
						if s.Indent < 0 && len(v.Content) > 0 && v.Content[0].Column > k.Column {
							s.Indent = v.Content[0].Column - k.Column
						}
					case yaml.SequenceNode:
						if s.SeqIndent < 0 && v.Column >= k.Column {
							s.SeqIndent = v.Column - k.Column
						}
					}
				}
				walk(v, depth+1)
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, depth+1)
			}
		}
	}
	for _, r := range roots {
		if r != nil {
			walk(r, 0)
		}
	}
	if s.Indent < 0 {
		s.Indent = 2
	}
	if s.SeqIndent < 0 {
		s.SeqIndent = 0
	}
	return s
}

// Block is n written as block YAML lines from column 0, nested as the style says. Scalars are
// written by yaml.v3, which quotes what needs quoting; an empty collection is [] or {}.
func (st Style) Block(n *yaml.Node) ([]string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		b, err := yaml.Marshal(n)
		if err != nil {
			return nil, err
		}
		return []string{strings.TrimRight(string(b), "\n")}, nil
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			return []string{"[]"}, nil
		}
		var out []string
		for _, it := range n.Content {
			lines, err := st.Block(it)
			if err != nil {
				return nil, err
			}
			out = append(out, "- "+lines[0])
			out = append(out, Indent(lines[1:], 2)...)
		}
		return out, nil
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			return []string{"{}"}, nil
		}
		var out []string
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, err := st.Block(n.Content[i])
			if err != nil {
				return nil, err
			}
			v := n.Content[i+1]
			lines, err := st.Block(v)
			if err != nil {
				return nil, err
			}
			if v.Kind == yaml.ScalarNode || len(v.Content) == 0 {
				out = append(out, key[0]+": "+lines[0])
				continue
			}
			indent := st.Indent
			if v.Kind == yaml.SequenceNode {
				indent = st.SeqIndent
			}
			out = append(out, key[0]+":")
			out = append(out, Indent(lines, indent)...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot write a YAML node of kind %v as text", n.Kind)
}

// Indent puts n spaces in front of each line that is not empty.
func Indent(lines []string, n int) []string {
	pad := strings.Repeat(" ", n)
	out := make([]string, len(lines))
	for i, l := range lines {
		if l != "" {
			out[i] = pad + l
		}
	}
	return out
}

// Flow is a new node written in flow style, its scalars as they are: for values that need no
// quoting in a flow collection (names, IDs).
func Flow(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		parts := make([]string, len(n.Content))
		for i, c := range n.Content {
			parts[i] = Flow(c)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case yaml.MappingNode:
		parts := make([]string, 0, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			parts = append(parts, n.Content[i].Value+": "+Flow(n.Content[i+1]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return n.Value
}
