// Package editdistance is the Levenshtein distance the CLI and the operator use to suggest the
// name a user probably meant (a misspelt install-config key, a StorageClass parameter). It
// counts bytes, which is enough for the ASCII names it compares.
package editdistance

// Levenshtein is the number of single-byte insertions, deletions and substitutions that turn
// a into b.
func Levenshtein(a, b string) int {
	return Within(a, b, max(len(a), len(b)))
}

// Within is the Levenshtein distance of a and b when it is at most limit, and limit+1 once it
// is certainly above: a suggestion needs only to know whether a name is close, and most names
// are not, so the work stops at the first row of the table that exceeds the limit.
func Within(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
