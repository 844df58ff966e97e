package textdiff

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The expected outputs are what GNU diff -u prints for the same inputs (without its header).
func TestUnified(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"change and append without newline",
			"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n", "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn",
			"@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -11,3 +11,4 @@\n k\n l\n m\n+n\n\\ No newline at end of file\n"},
		{"from empty", "", "x\n", "@@ -0,0 +1 @@\n+x\n"},
		{"to empty", "x\n", "", "@@ -1 +0,0 @@\n-x\n"},
		{"two hunks, 7 lines apart",
			"a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n", "a\nb\nX\nc\nd\ne\nf\ng\nh\ni\nY\nj\n",
			"@@ -1,5 +1,6 @@\n a\n b\n+X\n c\n d\n e\n@@ -7,4 +8,5 @@\n g\n h\n i\n+Y\n j\n"},
		{"one hunk, 6 lines apart",
			"a\nb\nc\nd\ne\nf\ng\nh\ni\n", "a\nb\nX\nc\nd\ne\nf\ng\nh\nY\ni\n",
			"@@ -1,9 +1,11 @@\n a\n b\n+X\n c\n d\n e\n f\n g\n h\n+Y\n i\n"},
		{"line break change", "a\r\nb\n", "a\nb\n", "@@ -1,2 +1,2 @@\n-a\r\n+a\n b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Unified("a", "b", []byte(tt.a), []byte(tt.b))
			if tt.want != "" {
				tt.want = "--- a\n+++ b\n" + tt.want
			}
			if got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			if tt.want != "" {
				if applied, err := applyUnified(tt.a, got); err != nil || applied != tt.b {
					t.Errorf("applying the diff gives %q (%v), want %q", applied, err, tt.b)
				}
			}
		})
	}
}

// applyUnified applies a unified diff made by Unified to a, checking every context and
// removed line, so that tests can prove that a diff really turns a into b.
func applyUnified(a, diff string) (string, error) {
	if diff == "" {
		return a, nil
	}
	al := splitLines(a)
	lines := strings.SplitAfter(diff, "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "--- ") || !strings.HasPrefix(lines[1], "+++ ") {
		return "", fmt.Errorf("no header")
	}
	var out []string
	pos := 0
	for i := 2; i < len(lines) && lines[i] != ""; {
		h := lines[i]
		var aStart int
		if _, err := fmt.Sscanf(h, "@@ -%d", &aStart); err != nil {
			return "", fmt.Errorf("bad hunk header %q", h)
		}
		start := aStart - 1
		if strings.HasPrefix(h, "@@ -"+strconv.Itoa(aStart)+",0 ") {
			start = aStart
		}
		if start < pos || start > len(al) {
			return "", fmt.Errorf("hunk %q out of order", h)
		}
		out = append(out, al[pos:start]...)
		pos = start
		i++
		for i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "@@") {
			l := lines[i]
			text := l[1:]
			if i+1 < len(lines) && lines[i+1] == "\\ No newline at end of file\n" {
				text = strings.TrimSuffix(text, "\n")
				i++
			}
			switch l[0] {
			case ' ', '-':
				if pos >= len(al) || al[pos] != text {
					return "", fmt.Errorf("line %d does not match %q", pos+1, l)
				}
				if l[0] == ' ' {
					out = append(out, text)
				}
				pos++
			case '+':
				out = append(out, text)
			default:
				return "", fmt.Errorf("bad line %q", l)
			}
			i++
		}
	}
	out = append(out, al[pos:]...)
	return strings.Join(out, ""), nil
}

// FuzzUnifiedDiff: applying the diff of a and b to a gives b.
func FuzzUnified(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nc\nd")
	f.Add("", "x")
	f.Add("x\r\ny\n", "x\ny\r\n")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := Unified("a", "b", []byte(a), []byte(b))
		got, err := applyUnified(a, d)
		if err != nil || got != b {
			t.Fatalf("apply(diff) = %q, %v; want %q\n%s", got, err, b, d)
		}
	})
}

// BenchmarkUnifiedManyHunks: the --dry-run diff of a 2 MiB file of 956 MachineSets, each given
// three lines (the largest -f file accepted, as dense as such files get): 2,868 edits apart.
func BenchmarkUnifiedManyHunks(b *testing.B) {
	var a, c strings.Builder
	for i := range 956 {
		for j := range 60 {
			line := fmt.Sprintf("    line %d of MachineSet worker-%d: some providerSpec text\n", j, i)
			a.WriteString(line)
			c.WriteString(line)
			if j == 40 {
				fmt.Fprintf(&c, "  - uuid: 2f2d0c9e-6a3b-4bb6-9a36-2a8d3c7f1e55\n    noAllowedAddressPairs: true\n  # set %d\n", i)
			}
		}
	}
	before, after := []byte(a.String()), []byte(c.String())
	b.ReportAllocs()
	for b.Loop() {
		if Unified("a", "b", before, after) == "" {
			b.Fatal("no diff")
		}
	}
}
