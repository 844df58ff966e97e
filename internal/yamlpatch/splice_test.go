package yamlpatch

import "testing"

// spliced parses in, runs ops on its first document and checks the output is want, spliced
// (reformatted false) or written out as a whole.
func spliced(t *testing.T, in, want string, reformatted bool, ops func(s *Stream) error) {
	t.Helper()
	s, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := ops(s); err != nil {
		t.Fatal(err)
	}
	out, gotReformatted, err := s.Bytes()
	if err != nil || string(out) != want || gotReformatted != reformatted {
		t.Errorf("got %q, reformatted %v, err %v; want %q, reformatted %v", out, gotReformatted, err, want, reformatted)
	}
}

// TestCollidingEdits: a value replaced inside a key that is then removed; the two splices
// overlap, so the stream is written out as a whole (it used to index out of range).
func TestCollidingEdits(t *testing.T) {
	spliced(t, "m:\n  a: 1\n  b: 2\nk: v\n", "k: v\n", true, func(s *Stream) error {
		if err := s.Add(s.Roots()[0], "/m/a", "x"); err != nil {
			return err
		}
		return s.Remove(s.Roots()[0], "/m")
	})
}

// TestCharacterColumns: yaml.v3 counts columns in characters; a value after a key written
// with multi-byte characters is replaced in place (it used to make the stream reformat, which
// rewrote the indentation of every other line).
func TestCharacterColumns(t *testing.T) {
	spliced(t, "m:\n    größe: alt # kept\n    k: v\n", "m:\n    größe: neu # kept\n    k: v\n", false, func(s *Stream) error {
		return s.Add(s.Roots()[0], "/m/größe", "neu")
	})
}

// TestIndentLikeNeighbours: a key added with a nested mapping and list is indented as the
// stream's own block collections are (here by 4), not by 2 whatever the file does.
func TestIndentLikeNeighbours(t *testing.T) {
	spliced(t, "spec:\n    template:\n        l:\n            - a\n",
		"spec:\n    template:\n        l:\n            - a\n    new:\n        m:\n            l:\n                - b\n", false,
		func(s *Stream) error {
			return s.Add(s.Roots()[0], "/spec/new", map[string]any{"m": map[string]any{"l": []string{"b"}}})
		})
}

// TestDeeperFirst: an item appended to the last list of a mapping and a key added to that
// mapping go in at the same place; the item comes first, whatever the order of the
// operations (the key used to come first when added first, and the item then landed after
// it, outside its list).
func TestDeeperFirst(t *testing.T) {
	spliced(t, "m:\n  l:\n  - a\nk: v\n", "m:\n  l:\n  - a\n  - b\n  new: x\nk: v\n", false, func(s *Stream) error {
		if err := s.Add(s.Roots()[0], "/m/new", "x"); err != nil {
			return err
		}
		return s.Add(s.Roots()[0], "/m/l/-", "b")
	})
	spliced(t, "l:\n- a: 1\n", "l:\n- a: 1\n  b: 2\n- c\n", false, func(s *Stream) error {
		if err := s.Add(s.Roots()[0], "/l/-", "c"); err != nil {
			return err
		}
		return s.Add(s.Roots()[0], "/l/0/b", 2)
	})
}

// TestMappingEnd: a key is added after the whole text of the mapping's last value: a quoted
// scalar that goes on below (it used to go in after the scalar's first line, inside it), a
// block scalar (it used to make the stream reformat).
func TestMappingEnd(t *testing.T) {
	add := func(s *Stream) error { return s.Add(s.Roots()[0], "/m/new", "x") }
	spliced(t, "m:\n  k: \"a\n  b\"\nz: 1\n", "m:\n  k: \"a\n  b\"\n  new: x\nz: 1\n", false, add)
	spliced(t, "m:\n  k: |\n    a\n\n    b\n  # about z\nz: 1\n", "m:\n  k: |\n    a\n\n    b\n  new: x\n  # about z\nz: 1\n", false, add)
}

// TestRemovePlainGoingOn: the end of a plain scalar that goes on below cannot be told from
// the parse, so removing its key writes the stream out again (it used to cut the key's line
// only and leave the scalar's second line behind, under the previous key).
func TestRemovePlainGoingOn(t *testing.T) {
	spliced(t, "m:\n  a: x\n    y\n  b: 2\n", "m:\n  b: 2\n", true, func(s *Stream) error {
		return s.Remove(s.Roots()[0], "/m/a")
	})
}
