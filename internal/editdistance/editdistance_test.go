package editdistance

import "testing"

func TestLevenshtein(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"kitten", "sitting", 3},
		{"additionalNetworkIDs", "additionalNetworkIds", 1},
		{"type", "tpye", 2},
		{"same", "same", 0},
	} {
		if got := Levenshtein(tt.a, tt.b); got != tt.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := Levenshtein(tt.b, tt.a); got != tt.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d (symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"kitten", "sitting", 3, 3},
		{"kitten", "sitting", 2, 3}, // above: limit+1
		{"a", "abcdefgh", 2, 3},     // lengths alone decide
		{"abcdef", "uvwxyz", 1, 2},  // stops at a row above the limit
		{"additionalnetworkid", "additionalnetworkids", 5, 1},
		{"", "", 0, 0},
	} {
		if got := Within(tt.a, tt.b, tt.limit); got != tt.want {
			t.Errorf("Within(%q, %q, %d) = %d, want %d", tt.a, tt.b, tt.limit, got, tt.want)
		}
	}
}
