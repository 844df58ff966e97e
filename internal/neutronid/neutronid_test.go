package neutronid

import "testing"

func TestCheck(t *testing.T) {
	tests := []struct {
		in        string
		canonical string
		verdict   Verdict
	}{
		{"837e03cd-a06c-494f-9f58-88263af211ef", "837e03cd-a06c-494f-9f58-88263af211ef", Canonical},
		{"837E03CD-A06C-494F-9F58-88263AF211EF", "837e03cd-a06c-494f-9f58-88263af211ef", NonCanonical},
		{"{837e03cd-a06c-494f-9f58-88263af211ef}", "837e03cd-a06c-494f-9f58-88263af211ef", NonCanonical},
		{"urn:uuid:837e03cd-a06c-494f-9f58-88263af211ef", "837e03cd-a06c-494f-9f58-88263af211ef", NonCanonical},
		{"URN:UUID:837e03cd-a06c-494f-9f58-88263af211ef", "837e03cd-a06c-494f-9f58-88263af211ef", NonCanonical},
		{"837e03cda06c494f9f5888263af211ef", "837e03cd-a06c-494f-9f58-88263af211ef", NonCanonical},
		// The installer checks the version, not the variant; neither do we.
		{"837e03cd-a06c-494f-cf58-88263af211ef", "837e03cd-a06c-494f-cf58-88263af211ef", Canonical},
		{"aa1788ba-e63a-11f1-aa6c-02fc00000001", "aa1788ba-e63a-11f1-aa6c-02fc00000001", WrongVersion},
		{"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000", WrongVersion},
		{"837e03cd-a06c-494f-9f58-88263af211e", "", NotUUID},
		{" 837e03cd-a06c-494f-9f58-88263af211ef", "", NotUUID},
		{"837e03cd_a06c_494f_9f58_88263af211ef", "", NotUUID},
		{"storage-net", "", NotUUID},
		{"", "", NotUUID},
	}
	for _, tt := range tests {
		canonical, verdict, _ := Check(tt.in)
		if canonical != tt.canonical || verdict != tt.verdict {
			t.Errorf("Check(%q) = %q, %v; want %q, %v", tt.in, canonical, verdict, tt.canonical, tt.verdict)
		}
	}
}

func TestEqual(t *testing.T) {
	const id = "837e03cd-a06c-494f-9f58-88263af211ef"
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{id, id, true},
		{id, "837E03CD-A06C-494F-9F58-88263AF211EF", true},
		{id, "{" + id + "}", true},
		{id, "urn:uuid:" + id, true},
		{id, "0dd482e1-3ffd-4730-b40f-0fac550c4626", false},
		{"storage-net", "storage-net", true},
		{"storage-net", "STORAGE-NET", false},
		{"", "", false},
		{id, "", false},
	} {
		if got := Equal(tt.a, tt.b); got != tt.want {
			t.Errorf("Equal(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
