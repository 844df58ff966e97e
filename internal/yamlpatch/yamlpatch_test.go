package yamlpatch

import (
	"encoding/json"
	"testing"
)

func TestAdd(t *testing.T) {
	type op struct {
		path  string
		value string // JSON
	}
	for _, c := range []struct {
		name, in, want string
		ops            []op
		reformatted    bool
	}{
		{"append, kubectl's compact lists", "a:\n  list:\n  - x: 1 # one\n    y: 2\n  # after\n  other: true\n",
			"a:\n  list:\n  - x: 1 # one\n    y: 2\n  - x: 3\n    y: 4\n  # after\n  other: true\n",
			[]op{{"/a/list/-", `{"x":3,"y":4}`}}, false},
		{"append, indented lists", "list:\n    - 'a'\n    - \"b\"\n", "list:\n    - 'a'\n    - \"b\"\n    - c\n    - \"true\"\n",
			[]op{{"/list/-", `"c"`}, {"/list/-", `"true"`}}, false},
		{"a key with a list, compact", "m:\n  l:\n  - 1\n  k: v\n", "m:\n  l:\n  - 1\n  k: v\n  new:\n  - z: \"2\"\n",
			[]op{{"/m/new", `[{"z":"2"}]`}}, false},
		{"a key with a list, indented", "m:\n  l:\n    - 1\n", "m:\n  l:\n    - 1\n  new:\n    - a\n",
			[]op{{"/m/new", `["a"]`}}, false},
		{"a key whose name needs an escape", "metadata:\n  name: x\n", "metadata:\n  name: x\n  a/b: '{\"k\":1}'\n",
			[]op{{"/metadata/a~1b", `"{\"k\":1}"`}}, false},
		{"null and [] replaced in place", "s:\n  n: null\n  e: []\n  z: 1\n", "s:\n  n:\n  - 1\n  e:\n  - 2\n  z: 1\n",
			[]op{{"/s/n", `[1]`}, {"/s/e/-", `2`}}, false},
		{"CRLF, no newline at the end", "l:\r\n- a", "l:\r\n- a\r\n- b\r\n", []op{{"/l/-", `"b"`}}, false},
		{"flow list", "l: [a]\n", "l: [a, b]\n", []op{{"/l/-", `"b"`}}, false},
		{"flow list, CRLF kept", "l: [a]\r\nk: v\r\n", "l: [a, b]\r\nk: v\r\n", []op{{"/l/-", `"b"`}}, false},
		{"flow mapping, a value that needs quotes", "m: {a: 1}  # c\n", "m: {a: 1, b: 'x, y', c: [1]}  # c\n", []op{{"/m/b", `"x, y"`}, {"/m/c", `[1]`}}, false},
		{"flow list on two lines, written anew on one", "l: [a,\n  b]\nk: v\n", "l: [a, b, c]\nk: v\n", []op{{"/l/-", `"c"`}}, false},
		{"two items into [], then a key into one", "l: []\n", "l:\n- a: 1\n  b: 2\n- c\n", []op{{"/l/-", `{"a":1}`}, {"/l/-", `"c"`}, {"/l/0/b", `2`}}, false},
		{"a key into {} on the key's line", "m: {} # none\n", "m: # none\n  k:\n  - 1\n", []op{{"/m/k", `[1]`}}, false},
		{"a value replaced", "k: 1\n", "k: 2\n", []op{{"/k", `2`}}, false},
		{"a name replaced, quoted or not", "ref:\n  name: old\n  kind: 'T'\nx: \"a\"\n", "ref:\n  name: new-1\n  kind: U\nx: b\n",
			[]op{{"/ref/name", `"new-1"`}, {"/ref/kind", `"U"`}, {"/x", `"b"`}}, false},
		{"a plain scalar that goes on below", "k: a\n  b\nz: 1\n", "k: c\nz: 1\n", []op{{"/k", `"c"`}}, true},
		{"a value with a comment", "k: a # keep\nj: 'x' #k\n", "k: c # keep\nj: \"1\" #k\n", []op{{"/k", `"c"`}, {"/j", `"1"`}}, false},
		{"a double-quoted value", "k: \"a\\\"b\" # c\n", "k: d # c\n", []op{{"/k", `"d"`}}, false},
		{"a list replaced by a scalar", "k:\n- a\n", "k: b\n", []op{{"/k", `"b"`}}, true},
		{"a block scalar at the end, written out in the file's indentation", "l:\n- |\n  text\n", "l:\n- |\n  text\n- b\n", []op{{"/l/-", `"b"`}}, true},
	} {
		s, err := Parse([]byte(c.in))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, o := range c.ops {
			if err := s.Add(s.Roots()[0], o.path, json.RawMessage(o.value)); err != nil {
				t.Fatalf("%s: %s: %v", c.name, o.path, err)
			}
		}
		out, reformatted, err := s.Bytes()
		if err != nil || string(out) != c.want || reformatted != c.reformatted {
			t.Errorf("%s: reformatted %t (want %t), err %v\n--- got\n%s--- want\n%s", c.name, reformatted, c.reformatted, err, out, c.want)
		}
	}
}

func TestAddErrors(t *testing.T) {
	s, err := Parse([]byte("a:\n  b: 1\nl:\n- x\n"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/missing/x": `"/missing/x": nothing at /missing`,
		"/l/0":       `"/l/0": only appending (-) to a sequence is supported`,
		"/a/b/c":     `"/a/b/c": the parent is a scalar`,
		"a":          `"a" is not a JSON pointer`,
	} {
		if err := s.Add(s.Roots()[0], path, 1); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", path, err, want)
		}
	}
}
