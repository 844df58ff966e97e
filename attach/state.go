package attach

// How far an object (a MachineSet, a NodePool, ...) has what a list was asked about.
const (
	StateAttached = "attached" // every ID is in its spec
	StatePartial  = "partial"  // some are
	StateMissing  = "missing"  // none is
	StateUnknown  = "unknown"  // no IDs to look for: none given and none recorded
	StateNA       = "n/a"      // not an OpenStack object, or a broken one
)

// AttachState says whether an object has every one of ids (attached), some (partial) or none
// (missing); unknown when no ID is asked about.
func AttachState(ids []string, has func(string) bool) string {
	if len(ids) == 0 {
		return StateUnknown
	}
	n := 0
	for _, id := range ids {
		if has(id) {
			n++
		}
	}
	switch n {
	case len(ids):
		return StateAttached
	case 0:
		return StateMissing
	}
	return StatePartial
}
