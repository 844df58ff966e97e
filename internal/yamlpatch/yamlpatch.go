// Package yamlpatch applies JSON-patch "add" and "remove" operations (RFC 6902) to a YAML stream and keeps
// every other byte of it: comments, key order, quoting, indentation, the other documents.
//
// It is what GitOps users need from a patch command: the file in Git changes by the added lines
// only. Callers check the result means what they wanted (see machinesets.PatchFile), as a splice
// works on text. This package turns a pointer and a JSON value into a node and an operation;
// internal/yamledit performs the operation on the tree and the text, with its rules for how a
// change is written and when the stream is written out as a whole (Bytes says so).
package yamlpatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/manila-setup/manila-setup/internal/yamledit"
)

// Stream is a YAML stream being patched.
type Stream struct {
	edit *yamledit.Editor
	docs []*yaml.Node // document nodes
}

// Parse reads a YAML stream of one or more documents.
func Parse(data []byte) (*Stream, error) {
	s := &Stream{}
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
	s.edit = yamledit.New(data, s.docs...)
	// Lines added after a last line without a line break end with one.
	s.edit.Text().FinalBreak = true
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
	parent, last, err := s.parentOf(base, pointer, "adding at")
	if err != nil {
		return err
	}
	node, err := valueNode(value)
	if err != nil {
		return err
	}
	switch parent.Kind {
	case yaml.SequenceNode:
		if last != "-" {
			return fmt.Errorf("%q: only appending (-) to a sequence is supported", pointer)
		}
		s.edit.Append(parent, node)
	case yaml.MappingNode:
		if key, _ := child(parent, last); key != nil {
			s.edit.SetValue(parent, key, node)
			return nil
		}
		s.edit.AddKey(parent, last, node)
	default:
		return fmt.Errorf("%q: the parent is a scalar", pointer)
	}
	return nil
}

// Remove performs the JSON-patch "remove" at pointer, relative to base: an item of a sequence
// or a key of a mapping.
func (s *Stream) Remove(base *yaml.Node, pointer string) error {
	parent, last, err := s.parentOf(base, pointer, "removing")
	if err != nil {
		return err
	}
	switch parent.Kind {
	case yaml.SequenceNode:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(parent.Content) {
			return fmt.Errorf("%q: no item %s", pointer, last)
		}
		s.edit.Remove(parent, parent.Content[i])
	case yaml.MappingNode:
		key, _ := child(parent, last)
		if key == nil {
			return fmt.Errorf("%q: no key %s", pointer, last)
		}
		s.edit.Remove(parent, key)
	default:
		return fmt.Errorf("%q: the parent is a scalar", pointer)
	}
	return nil
}

// parentOf is the node pointer's last token is under, and that token.
func (s *Stream) parentOf(base *yaml.Node, pointer, doing string) (*yaml.Node, string, error) {
	tokens, err := splitPointer(pointer)
	if err != nil {
		return nil, "", err
	}
	if len(tokens) == 0 {
		return nil, "", fmt.Errorf("%q: %s the root is not supported", pointer, doing)
	}
	parent := base
	for i, tok := range tokens[:len(tokens)-1] {
		if _, parent = child(parent, tok); parent == nil {
			return nil, "", fmt.Errorf("%q: nothing at /%s", pointer, strings.Join(tokens[:i+1], "/"))
		}
	}
	return parent, tokens[len(tokens)-1], nil
}

// Bytes is the patched stream, and whether it had to be written out again as a whole rather
// than spliced.
func (s *Stream) Bytes() ([]byte, bool, error) { return s.edit.Bytes() }

// Reformat makes Bytes write the whole stream out from its parsed form.
func (s *Stream) Reformat() { s.edit.Reformat() }

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
