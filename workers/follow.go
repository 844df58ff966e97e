package workers

import (
	"slices"

	"github.com/manila-setup/manila-setup/attach"
)

// ResultOf is the result of row r among results.
func ResultOf(r Row, results []attach.Result) (attach.Result, bool) {
	i := slices.IndexFunc(results, r.Is)
	if i < 0 {
		return attach.Result{}, false
	}
	return results[i], true
}

// Follows reports whether, after a patch whose results are results, the progress of row r is
// read again: rows that roll by themselves, once their patch changed them (or always, where
// AlwaysFollowed says so).
func Follows(r Row, results []attach.Result) bool {
	if r.Rolls != ByItself {
		return false
	}
	if r.AlwaysFollowed {
		return true
	}
	res, ok := ResultOf(r, results)
	return ok && res.Action == attach.ActionPatched
}

// Sections are the section IDs of rows, once each, in the rows' order.
func Sections(rows []Row) []string {
	var ids []string
	for _, r := range rows {
		if !slices.Contains(ids, r.Section) {
			ids = append(ids, r.Section)
		}
	}
	return ids
}

// Reads are the Kinds an Inventory reads to refresh the rows of section id.
func Reads(id string) Kinds {
	switch id {
	case SectionMachineSets:
		return Kinds{MachineSets: true}
	case SectionClusterAPI:
		return Kinds{ClusterAPI: true}
	case SectionNodePools:
		return Kinds{NodePools: true}
	case SectionControlPlane:
		return Kinds{ControlPlane: true}
	}
	return Kinds{}
}

// UnderBars reports whether the screen that rolls the sets tells res among the patched sets
// under their bars (the Machine API MachineSets'; the others are told in their own lines).
func UnderBars(res attach.Result) bool { return SectionOf(res) == SectionMachineSets }
