package yamlpatch

import "testing"

func TestRemove(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		paths          []string
		reformatted    bool
	}{
		{"an item of a compact list, its lines cut", "l:\n- uuid: a # one\n  x: 1\n- uuid: b\n  x: 2\nk: v\n", "l:\n- uuid: a # one\n  x: 1\nk: v\n",
			[]string{"/l/1"}, false},
		{"two items, indices as the patch shifts them", "l:\n  - a\n  - b\n  - c\n", "l:\n  - b\n",
			[]string{"/l/0", "/l/1"}, false},
		{"a key and its value", "m:\n  a: '{\"x\":1}'\n  b: 2 # kept\n", "m:\n  b: 2 # kept\n", []string{"/m/a"}, false},
		{"a key whose value is a list", "m:\n  l:\n  - 1\n  - 2\n  k: v\n", "m:\n  k: v\n", []string{"/m/l"}, false},
		{"the last item of a list, [] after the key", "l:\n- a\nk: v\n", "l: []\nk: v\n", []string{"/l/0"}, false},
		{"CRLF kept", "l:\r\n- a\r\n- b\r\n", "l:\r\n- a\r\n", []string{"/l/1"}, false},
		{"an item of a flow list, cut from its brackets", "l: [a, b] # two\n", "l: [a] # two\n", []string{"/l/1"}, false},
		{"the first items of a flow list", "l: [a, 'b', c]\n", "l: [c]\n", []string{"/l/0", "/l/0"}, false},
		{"the last key of a mapping", "m:\n  a: 1\nk: v\n", "m: {}\nk: v\n", []string{"/m/a"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse([]byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range c.paths {
				if err := s.Remove(s.Roots()[0], p); err != nil {
					t.Fatal(err)
				}
			}
			out, reformatted, err := s.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != c.want || reformatted != c.reformatted {
				t.Errorf("got (reformatted %v)\n%s\nwant (reformatted %v)\n%s", reformatted, out, c.reformatted, c.want)
			}
		})
	}
	s, _ := Parse([]byte("l:\n- a\n"))
	if err := s.Remove(s.Roots()[0], "/l/3"); err == nil {
		t.Error("removing an item that is not there: no error")
	}
}
