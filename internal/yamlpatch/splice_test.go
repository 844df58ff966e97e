package yamlpatch

import "testing"

// TestCollidingEdits: a value replaced inside a key that is then removed; the two splices
// overlap, so the stream is written out as a whole (it used to index out of range).
func TestCollidingEdits(t *testing.T) {
	s, err := Parse([]byte("m:\n  a: 1\n  b: 2\nk: v\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(s.Roots()[0], "/m/a", "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(s.Roots()[0], "/m"); err != nil {
		t.Fatal(err)
	}
	out, reformatted, err := s.Bytes()
	if err != nil || string(out) != "k: v\n" || !reformatted {
		t.Errorf("got %q, reformatted %v, err %v; want \"k: v\\n\", reformatted", out, reformatted, err)
	}
}

// TestCharacterColumns: yaml.v3 counts columns in characters; a value after a key written
// with multi-byte characters is replaced in place (it used to make the stream reformat, which
// rewrote the indentation of every other line).
func TestCharacterColumns(t *testing.T) {
	s, err := Parse([]byte("m:\n    größe: alt # kept\n    k: v\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(s.Roots()[0], "/m/größe", "neu"); err != nil {
		t.Fatal(err)
	}
	out, reformatted, err := s.Bytes()
	if want := "m:\n    größe: neu # kept\n    k: v\n"; err != nil || string(out) != want || reformatted {
		t.Errorf("got %q, reformatted %v, err %v; want %q spliced", out, reformatted, err, want)
	}
}

// TestIndentLikeNeighbours: a key added with a nested mapping and list is indented as the
// stream's own block collections are (here by 4), not by 2 whatever the file does.
func TestIndentLikeNeighbours(t *testing.T) {
	s, err := Parse([]byte("spec:\n    template:\n        l:\n            - a\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(s.Roots()[0], "/spec/new", map[string]any{"m": map[string]any{"l": []string{"b"}}}); err != nil {
		t.Fatal(err)
	}
	out, reformatted, err := s.Bytes()
	want := "spec:\n    template:\n        l:\n            - a\n    new:\n        m:\n            l:\n                - b\n"
	if err != nil || string(out) != want || reformatted {
		t.Errorf("got %q, reformatted %v, err %v; want %q spliced", out, reformatted, err, want)
	}
}
