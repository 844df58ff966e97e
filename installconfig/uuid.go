package installconfig

import (
	"fmt"

	"github.com/google/uuid"
)

// IDVerdict is what CheckID thinks of a string given as an OpenStack resource ID.
type IDVerdict int

const (
	// IDCanonical is a UUID v4 in the canonical 36-character lowercase form Neutron returns.
	IDCanonical IDVerdict = iota
	// IDNonCanonical is a UUID v4 that the installer accepts (it parses with google/uuid) but
	// that is not in canonical form: upper case, "{...}", "urn:uuid:..." or 32 hex digits
	// without dashes. Neutron and the machine controller compare IDs as strings, so validate
	// rejects these and patch rewrites them in canonical form.
	IDNonCanonical
	// IDWrongVersion is a UUID of another version than 4 (the installer rejects it).
	IDWrongVersion
	// IDNotUUID is not a UUID at all (the installer rejects it).
	IDNotUUID
)

// CheckID classifies s the way the installer does (google/uuid.Parse, then version 4; the
// variant is not checked, as in the installer) and, beyond that, demands the canonical form.
// canonical is the normalized form when s parses as a UUID, "" otherwise.
func CheckID(s string) (canonical string, verdict IDVerdict, version int) {
	u, err := uuid.Parse(s)
	if err != nil {
		return "", IDNotUUID, 0
	}
	canonical = u.String()
	version = int(u.Version())
	switch {
	case version != 4:
		return canonical, IDWrongVersion, version
	case s != canonical:
		return canonical, IDNonCanonical, version
	}
	return canonical, IDCanonical, version
}

// NormalizeID returns the canonical form of a UUID v4 given in any form the installer accepts,
// or an error saying why s is not one.
func NormalizeID(s string) (string, error) {
	canonical, verdict, version := CheckID(s)
	switch verdict {
	case IDNotUUID:
		return "", fmt.Errorf("must be a UUID v4")
	case IDWrongVersion:
		return "", fmt.Errorf("must be a UUID v4, not a version %d UUID", version)
	}
	return canonical, nil
}

// idKey is what two IDs are compared by when looking for duplicates: the canonical form when
// the string parses as a UUID, the string itself otherwise.
func idKey(s string) string {
	if u, err := uuid.Parse(s); err == nil {
		return u.String()
	}
	return s
}
