package yamlsplice

import (
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

func parse(t *testing.T, text string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// value is the value of key in mapping m.
func value(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func TestLines(t *testing.T) {
	for _, c := range []struct {
		in     string
		starts []int
		nl     string
	}{
		{"a\nb\n", []int{0, 2}, "\n"},
		{"a\r\nb", []int{0, 3}, "\r\n"},
		{"a\rb\r", []int{0, 2}, "\n"}, // a lone CR breaks a line, as in YAML
		{"a\r\nb\nc\r\n", []int{0, 3, 5}, "\r\n"},
		{"a\r\nb\nc\n", []int{0, 3, 5}, "\n"}, // CRLF only when most breaks are
		{"", []int{0}, "\n"},
	} {
		text := New([]byte(c.in))
		if !slices.Equal(text.starts, c.starts) || text.NL != c.nl {
			t.Errorf("%q: line starts %v, NL %q; want %v, %q", c.in, text.starts, text.NL, c.starts, c.nl)
		}
	}
	text := New([]byte("k: v\r\nlast"))
	if got := text.Line(1) + "|" + text.Line(2) + "|" + text.Line(3); got != "k: v|last|" {
		t.Errorf("lines: %q", got)
	}
}

// TestTokens: the text of nodes found from yaml.v3's positions, whose columns count
// characters.
func TestTokens(t *testing.T) {
	src := "größe: 'it''s' # c\nl:\n  - &a !!str \"x\\\"y\"\n  -   z\n  - *a\nf: {k: [1, '2]'], j: 3}\n"
	text := New([]byte(src))
	root := parse(t, src)
	token := func(n *yaml.Node) string {
		start, end, ok := text.ScalarToken(n)
		if !ok {
			return "<none>"
		}
		return src[start:end]
	}
	l := value(root, "l")
	for n, want := range map[*yaml.Node]string{
		value(root, "größe"): "'it''s'",
		l.Content[0]:         `"x\"y"`,
		l.Content[1]:         "z",
		l.Content[2]:         "*a",
	} {
		if got := token(n); got != want {
			t.Errorf("token of %q: %q, want %q", n.Value, got, want)
		}
	}
	for i, want := range []int{2, 2, 2} {
		if got := text.DashColumn(l.Content[i]); got != want {
			t.Errorf("dash of item %d: %d, want %d", i, got, want)
		}
	}
	if got := text.DashColumn(value(root, "größe")); got != -1 {
		t.Errorf("dash of a mapping value: %d, want -1", got)
	}
	o, end, inner, ok := text.FlowOnOneLine(value(root, "f"), '{')
	if !ok || src[o:end+1] != "{k: [1, '2]'], j: 3}" || string(inner) != "k: [1, '2]'], j: 3" {
		t.Errorf("flow mapping: %q %q %v", src[o:end+1], inner, ok)
	}
}

func TestApply(t *testing.T) {
	text := New([]byte("a: 1\nb: 2\n"))
	text.InsertLines(1, []string{"  - key"}, KeyRank(2))
	text.InsertLines(1, []string{"  - item"}, ItemRank(2))
	text.Replace(3, 1, "9", 0)
	text.CutLines(2, 2, KeyRank(0))
	out, ok := text.Apply()
	if want := "a: 9\n  - item\n  - key\n"; !ok || string(out) != want {
		t.Errorf("got %q (%v), want %q", out, ok, want)
	}
	text.Replace(6, 2, "x", 0) // inside the cut line 2
	if out, ok := text.Apply(); ok {
		t.Errorf("overlapping edits applied: %q", out)
	}
}

// TestCutEntry: lines inserted after a cut entry that rank deeper than it belong to it and
// make Apply refuse; a sibling's are kept.
func TestCutEntry(t *testing.T) {
	for _, c := range []struct {
		rank int
		ok   bool
	}{{KeyRank(2), true}, {KeyRank(0), true}, {ItemRank(2), false}, {KeyRank(4), false}} {
		text := New([]byte("m:\n  a:\n    b: 1\n"))
		text.CutLines(2, 3, KeyRank(2))
		text.InsertLines(3, []string{"x"}, c.rank)
		if out, ok := text.Apply(); ok != c.ok {
			t.Errorf("rank %d after a key at column 2: applied %v (%q), want %v", c.rank, ok, out, c.ok)
		}
	}
}

func TestAppendToFlow(t *testing.T) {
	src := "a: [x,]\nb: { }\nc: {k: v}\nd: [x,\n  y]\n"
	root := parse(t, src)
	text := New([]byte(src))
	for key, ok := range map[string]bool{"a": true, "b": true, "c": true, "d": false} {
		open := byte('[')
		if value(root, key).Kind == yaml.MappingNode {
			open = '{'
		}
		if got := text.AppendToFlow(value(root, key), open, []string{"n: 1"}); got != ok {
			t.Errorf("%s: %v, want %v", key, got, ok)
		}
	}
	out, _ := text.Apply()
	if want := "a: [x, n: 1]\nb: {n: 1}\nc: {k: v, n: 1}\nd: [x,\n  y]\n"; string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func TestInsertAtTheEnd(t *testing.T) {
	for _, finalBreak := range []bool{false, true} {
		text := New([]byte("l:\r\n- a"))
		text.FinalBreak = finalBreak
		text.InsertLines(2, []string{"- b"}, 0)
		out, _ := text.Apply()
		want := "l:\r\n- a\r\n- b"
		if finalBreak {
			want += "\r\n"
		}
		if string(out) != want {
			t.Errorf("FinalBreak %v: %q, want %q", finalBreak, out, want)
		}
	}
}

func TestStyle(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Style
	}{
		{"a: 1\n", Style{Indent: 2, SeqIndent: 0}},
		{"m:\n    k: v\nl:\n  - a\n", Style{Indent: 4, SeqIndent: 2}},
		{"l:\n- m:\n     k: v\n", Style{Indent: 3, SeqIndent: 0}},
		{"f: {m: {k: v}}\nm:\n k: [1]\n", Style{Indent: 1, SeqIndent: 0}},
	} {
		if got := DetectStyle(parse(t, c.in)); got != c.want {
			t.Errorf("%q: %+v, want %+v", c.in, got, c.want)
		}
	}
	n := parse(t, "name: worker\nplatform:\n  openstack:\n    ids: [a, 'true']\n    none: []\nitems: [{k: v, j: w}]\n")
	lines, err := Style{Indent: 4, SeqIndent: 2}.Block(n)
	want := "name: worker\nplatform:\n    openstack:\n        ids:\n          - a\n          - 'true'\n        none: []\nitems:\n  - k: v\n    j: w"
	if err != nil || strings.Join(lines, "\n") != want {
		t.Errorf("block lines (err %v):\n%s\nwant\n%s", err, strings.Join(lines, "\n"), want)
	}
	if got := Flow(parse(t, "a: [x, y]\nb: {c: d}\n")); got != "{a: [x, y], b: {c: d}}" {
		t.Errorf("flow: %s", got)
	}
}

func TestEnds(t *testing.T) {
	src := "m:\n  q: 'a\n b'\n  f: {x: [1,\n  2]}\n  p: plain\n  c: |\n    text\n  e:\n  # about n\nn:\n- a\n"
	text := New([]byte(src))
	root := parse(t, src)
	m := value(root, "m")
	for key, want := range map[string]int{"q": 3, "f": 5, "p": 6, "e": 9, "c": -1} {
		got, ok := text.EndLine(value(m, key))
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("end of %s: line %d, want %d", key, got, want)
		}
	}
	if end, ok := text.MappingEnd(m); !ok || end != 9 {
		t.Errorf("end of m: line %d (%v), want 9", end, ok)
	}
	if end, ok := text.MappingEnd(root); !ok || end != 12 {
		t.Errorf("end of the root: line %d (%v), want 12 (its list, written at its column)", end, ok)
	}
	if o, ok := text.AfterBareKey(m.Content[8]); !ok || src[:o] != src[:strings.Index(src, "  e:")+4] {
		t.Errorf("after e: offset %d (%v)", o, ok)
	}
	if _, ok := text.AfterBareKey(m.Content[4]); ok {
		t.Error("p has a value on its line, yet AfterBareKey found room")
	}
}
