package yamlpatch

import (
	"reflect"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// FuzzSplice: whatever the stream, a patch that is spliced into the text means what the
// patched node tree means: a key added to the first document, an item appended to each of its
// lists, a scalar replaced, a key added to its mappings, its last key removed.
func FuzzSplice(f *testing.F) {
	for _, seed := range []string{
		"a: 1\nl:\n- x\n- y\nm:\n  k: v # c\n",
		"m:\n    l:\n        - a\n    q: \"a\n  b\"\n",
		"l:\r\n- a: 1\r\n  b: [1,\r\n  2]\r\nk: |\r\n  text\r\n",
		"größe: alt\nl: []\nn: ~\n---\nb: 2\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		patch := func(s *Stream) {
			root := s.Roots()[0]
			for i := 0; i+1 < len(root.Content); i += 2 {
				key := "/" + escape(root.Content[i].Value)
				switch v := root.Content[i+1]; {
				case v.Kind == yaml.SequenceNode:
					_ = s.Add(root, key+"/-", map[string]any{"n": []int{1}})
				case v.Kind == yaml.ScalarNode && i == 0:
					_ = s.Add(root, key, "new")
				case v.Kind == yaml.MappingNode:
					_ = s.Add(root, key+"/added", []string{"x"})
				}
			}
			if len(root.Content) > 2 {
				_ = s.Remove(root, "/"+escape(root.Content[len(root.Content)-2].Value))
			}
			_ = s.Add(root, "/zz", map[string]any{"a": []any{"b", 2}})
		}
		spliced, err := Parse(data)
		if err != nil || len(spliced.Roots()) == 0 || spliced.Roots()[0] == nil || spliced.Roots()[0].Kind != yaml.MappingNode {
			return
		}
		if before := decodeAll(t, data); len(before) == 1 && before[0] == nil || isError(before) {
			return // duplicate keys, an unknown tag: nothing to compare
		}
		patch(spliced)
		got, reformatted, err := spliced.Bytes()
		if err != nil || reformatted {
			return
		}
		// What the patched tree means (yaml.v3's encoder, which writes it out as a whole,
		// does not always keep that: an empty null key comes out as '').
		var want []any
		for _, d := range spliced.docs {
			var v any
			if err := d.Decode(&v); err != nil {
				return
			}
			want = append(want, v)
		}
		if g := decodeAll(t, got); !reflect.DeepEqual(g, want) {
			t.Fatalf("spliced:\n%s\nmeans %#v\nthe patched tree means %#v", got, g, want)
		}
	})
}

func escape(key string) string {
	out := ""
	for _, c := range key {
		switch c {
		case '~':
			out += "~0"
		case '/':
			out += "~1"
		default:
			out += string(c)
		}
	}
	return out
}

func isError(docs []any) bool {
	s, ok := docs[0].(string)
	return len(docs) == 1 && ok && (len(s) > 8 && (s[:8] == "not YAML" || s[:8] == "does not"))
}

// decodeAll is what the documents of a stream mean; nil when the stream is not YAML.
func decodeAll(t *testing.T, data []byte) []any {
	t.Helper()
	s, err := Parse(data)
	if err != nil {
		return []any{"not YAML: " + err.Error()}
	}
	var out []any
	for _, d := range s.docs {
		var v any
		if err := d.Decode(&v); err != nil {
			return []any{"does not decode: " + err.Error()}
		}
		out = append(out, v)
	}
	return out
}
