// Package textdiff writes unified diffs (as `diff -u` does) for everything manila-setup shows
// before it writes: install-config patches and MachineSet providerSpec patches.
package textdiff

import (
	"fmt"
	"strings"
)

// Unified returns the differences between a and b as a unified diff (as `diff -u` writes
// it) with three lines of context, or "" when they are equal. Lines are compared with their
// line breaks, so a CRLF/LF change shows; a missing final line break is marked with
// "\ No newline at end of file".
//
// It is a small implementation of Myers' O(ND) algorithm (E. Myers, "An O(ND) Difference
// Algorithm and Its Variations", 1986), kept rather than taken from the diff libraries already
// in go.mod, for measured reasons (BenchmarkUnifiedDiffLarge: the patch of a 1 MiB
// install-config, 1,000 lists changed): this code took 75 ms and 346 MB (24 ms and 14 MB since it
// keeps only the diagonals each step reads); go-difflib's
// SequenceMatcher takes 16.6 s and 17 GB (1.5 s and 1.7 GB with its auto-junk heuristic, which
// then anchors on fewer lines); go-udiff diffs bytes, so an unchanged line next to a change is
// shown as removed and added again (and its line-based Myers package is deprecated).
func Unified(aName, bName string, a, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	al, bl := splitLines(string(a)), splitLines(string(b))
	ops := myers(al, bl)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	const context = 3
	// Walk the edit script and cut it into hunks.
	type line struct {
		kind byte // ' ', '-', '+'
		text string
		ai   int // index in a (for ' ' and '-')
		bi   int // index in b (for ' ' and '+')
	}
	var script []line
	ai, bi := 0, 0
	for _, op := range ops {
		switch op {
		case '=':
			script = append(script, line{' ', al[ai], ai, bi})
			ai++
			bi++
		case '-':
			script = append(script, line{'-', al[ai], ai, bi})
			ai++
		case '+':
			script = append(script, line{'+', bl[bi], ai, bi})
			bi++
		}
	}
	for i := 0; i < len(script); {
		// Find the next change.
		for i < len(script) && script[i].kind == ' ' {
			i++
		}
		if i == len(script) {
			break
		}
		start := max(i-context, 0)
		// Extend the hunk while changes are within 2*context lines of each other.
		end := i
		for j := i; j < len(script); j++ {
			if script[j].kind != ' ' {
				end = j
			} else if j-end > 2*context {
				break
			}
		}
		stop := min(end+context+1, len(script))
		aStart, bStart := script[start].ai, script[start].bi
		aCount, bCount := 0, 0
		for _, l := range script[start:stop] {
			if l.kind != '+' {
				aCount++
			}
			if l.kind != '-' {
				bCount++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aCount), hunkRange(bStart, bCount))
		for _, l := range script[start:stop] {
			out.WriteByte(l.kind)
			text := l.text
			if strings.HasSuffix(text, "\n") {
				out.WriteString(text)
			} else {
				out.WriteString(text)
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = stop
	}
	return out.String()
}

func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}

// splitLines splits after each "\n", keeping it.
func splitLines(s string) []string {
	var lines []string
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i+1])
		s = s[i+1:]
	}
	return lines
}

// myers returns the shortest edit script from a to b as a string of '=', '-' and '+'.
// Lines are interned first, and common prefix and suffix are stripped, so the quadratic
// worst case only applies to what actually changed.
func myers(a, b []string) []byte {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ids := map[string]int{}
	intern := func(ls []string) []int {
		out := make([]int, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	x, y := intern(a[pre:len(a)-suf]), intern(b[pre:len(b)-suf])
	var ops []byte
	for range pre {
		ops = append(ops, '=')
	}
	ops = append(ops, shortestEdit(x, y)...)
	for range suf {
		ops = append(ops, '=')
	}
	return ops
}

// maxEdits bounds the search for the shortest edit script. The walk back needs, for each number
// of edits d, the furthest point of each of its 2d+1 diagonals, so memory grows with the square
// of the edits: 4,096 edits keep at most 67 MB (the patch of a 2 MiB file of 956 MachineSets is
// 2,868 edits). Past that, what lies between the common head and tail is shown removed and
// added whole: still a correct diff, only not the shortest.
const maxEdits = 4096

func shortestEdit(a, b []int) []byte {
	n, m := len(a), len(b)
	whole := func() []byte {
		ops := make([]byte, 0, n+m)
		for range n {
			ops = append(ops, '-')
		}
		for range m {
			ops = append(ops, '+')
		}
		return ops
	}
	if n == 0 || m == 0 {
		return whole()
	}
	maxD := min(n+m, maxEdits)
	offset := n + m
	v := make([]int32, 2*offset+2)
	// trace[d] is V before step d, only where step d reads it: diagonals -d..d.
	var trace [][]int32
	for d := 0; d <= maxD; d++ {
		trace = append(trace, append([]int32(nil), v[offset-d:offset+d+1]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[offset+k-1] < v[offset+k+1]) {
				x = int(v[offset+k+1])
			} else {
				x = int(v[offset+k-1]) + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[offset+k] = int32(x)
			if x >= n && y >= m {
				return backtrack(trace, n, m, d)
			}
		}
	}
	return whole()
}

// backtrack walks the saved V windows back from (n, m) to (0, 0); trace[d] holds diagonals
// -d..d of V as it was before step d.
func backtrack(trace [][]int32, n, m, d int) []byte {
	var rev []byte
	x, y := n, m
	for ; d > 0; d-- {
		v := trace[d]
		at := func(k int) int { return int(v[k+d]) }
		k := x - y
		var prevK int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := at(prevK)
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			rev = append(rev, '=')
			x--
			y--
		}
		if x == prevX {
			rev = append(rev, '+')
		} else {
			rev = append(rev, '-')
		}
		x, y = prevX, prevY
	}
	for x > 0 && y > 0 {
		rev = append(rev, '=')
		x--
		y--
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}
