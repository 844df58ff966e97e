// Package neutronid is the one home of the rules for OpenStack resource IDs (Neutron networks,
// subnets, security groups): what counts as a valid ID, its canonical form, and when two IDs
// are the same. installconfig, machinesets and the operator all use it, so that an ID accepted
// or matched by one is accepted or matched by the others.
package neutronid

import (
	"fmt"

	"github.com/google/uuid"
)

// Verdict is what Check thinks of a string given as an OpenStack resource ID.
type Verdict int

const (
	// Canonical is a UUID v4 in the canonical 36-character lowercase form Neutron returns.
	Canonical Verdict = iota
	// NonCanonical is a UUID v4 that the installer accepts (it parses with google/uuid) but
	// that is not in canonical form: upper case, "{...}", "urn:uuid:..." or 32 hex digits
	// without dashes. Neutron and the machine controller compare IDs as strings, so validation
	// rejects these where a file is checked, and patching rewrites them in canonical form.
	NonCanonical
	// WrongVersion is a UUID of another version than 4 (the installer rejects it, and Neutron
	// never makes one).
	WrongVersion
	// NotUUID is not a UUID at all.
	NotUUID
)

// Check classifies s the way the installer does (google/uuid.Parse, then version 4; the variant
// is not checked, as in the installer) and, beyond that, tells whether it is in canonical form.
// canonical is the normalized form when s parses as a UUID, "" otherwise.
func Check(s string) (canonical string, verdict Verdict, version int) {
	u, err := uuid.Parse(s)
	if err != nil {
		return "", NotUUID, 0
	}
	canonical = u.String()
	version = int(u.Version())
	switch {
	case version != 4:
		return canonical, WrongVersion, version
	case s != canonical:
		return canonical, NonCanonical, version
	}
	return canonical, Canonical, version
}

// Expected is what an error about a bad ID says is expected, with an example.
const Expected = "must be a UUID v4 (a Neutron ID such as 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c)"

// Normalize returns the canonical form of a UUID v4 given in any form the installer accepts,
// or an error saying why s is not one.
func Normalize(s string) (string, error) {
	canonical, verdict, version := Check(s)
	switch verdict {
	case NotUUID:
		return "", fmt.Errorf("must be a UUID v4")
	case WrongVersion:
		return "", fmt.Errorf("must be a UUID v4, not a version %d UUID", version)
	}
	return canonical, nil
}

// Key is what two IDs are compared by: the canonical form when the string parses as a UUID
// (so case and the "{...}" or "urn:uuid:" wrappings do not matter), the string itself otherwise.
func Key(s string) string {
	if u, err := uuid.Parse(s); err == nil {
		return u.String()
	}
	return s
}

// Equal reports whether a and b name the same object. An empty ID equals nothing.
func Equal(a, b string) bool { return a != "" && b != "" && Key(a) == Key(b) }
