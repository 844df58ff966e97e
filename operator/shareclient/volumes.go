package shareclient

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Existing shares keep the access rules they were created with: the driver turns a class's
// nfs-shareClient into the share's ip rules once, when it creates the share, and nothing
// updates them when the answer changes later (the storage network attached after the classes
// and volumes were made). So every existing volume is checked on its own, against its share's
// access list in Manila.

// Volume is a PersistentVolume of the Manila CSI driver.
type Volume struct {
	// Name is the PersistentVolume's name.
	Name string `json:"name"`
	// Claim is namespace/name of the claim it is bound to; empty when it has none.
	Claim string `json:"claim,omitempty"`
	// ShareID is the Manila share it stands for; ShareName the share's name when a
	// pre-provisioned volume names its share by name only (then ShareID is empty).
	ShareID   string `json:"share,omitempty"`
	ShareName string `json:"shareName,omitempty"`
}

// VolumeOf reads a PersistentVolume; ok is false when it is not a CSI volume of driver. The
// share is volumeAttributes shareID, else the volume handle (which is the share ID for the
// volumes the driver provisions); a pre-provisioned volume may instead name its share with
// shareName.
func VolumeOf(pv *corev1.PersistentVolume, driver string) (v Volume, ok bool) {
	csi := pv.Spec.CSI
	if csi == nil || csi.Driver != driver {
		return Volume{}, false
	}
	v = Volume{Name: pv.Name}
	if ref := pv.Spec.ClaimRef; ref != nil && ref.Name != "" {
		v.Claim = ref.Namespace + "/" + ref.Name
	}
	switch {
	case csi.VolumeAttributes["shareID"] != "":
		v.ShareID = csi.VolumeAttributes["shareID"]
	case csi.VolumeAttributes["shareName"] != "":
		v.ShareName = csi.VolumeAttributes["shareName"]
	default:
		v.ShareID = csi.VolumeHandle
	}
	return v, true
}

// AccessRule is one access rule of a Manila share, as its access list shows it.
type AccessRule struct {
	ID    string
	Type  string // ip, cert, user, cephx
	To    string
	Level string // rw, ro
	State string
}

// Admits tells whether the rule lets clients of its network mount the share read-write now or
// in a moment: an ip rule, rw, applied or on its way (new is the state of rules being applied
// before microversion 2.28). Rules in error, or being denied, admit nothing.
func (r AccessRule) Admits() bool {
	if !strings.EqualFold(r.Type, "ip") || !strings.EqualFold(r.Level, "rw") {
		return false
	}
	switch strings.ToLower(r.State) {
	case "active", "queued_to_apply", "applying", "new":
		return true
	}
	return false
}

// VolumeVerdict is whether a volume's share admits where the workers mount from.
type VolumeVerdict struct {
	Volume
	// Admits are the networks the share's rules admit read-write (ip rules only).
	Admits []netip.Prefix `json:"admits"`
	// Missing are the networks the workers mount from that no rule admits.
	Missing []netip.Prefix `json:"missing"`
	// Fix holds the commands that add (and, where a rule for the same network is in the way,
	// first remove) the missing rules, one per line.
	Fix []string `json:"fix,omitempty"`
	// Skipped says why the volume was not judged; then the other fields are empty.
	Skipped string `json:"skipped,omitempty"`
}

// CheckVolume compares a volume's access rules with where the workers mount from (the
// answer's Clients).
func CheckVolume(v Volume, rules []AccessRule, a Answer) VolumeVerdict {
	out := VolumeVerdict{Volume: v, Admits: []netip.Prefix{}, Missing: []netip.Prefix{}}
	if v.ShareID == "" {
		out.Skipped = "the volume names its share by name only (shareName " + v.ShareName + "), not by ID"
		return out
	}
	ip, cephx := false, false
	for _, r := range rules {
		ip = ip || strings.EqualFold(r.Type, "ip")
		cephx = cephx || strings.EqualFold(r.Type, "cephx")
		if !r.Admits() {
			continue
		}
		p, err := ParseRule(strings.TrimSpace(r.To))
		if err == nil && !slices.Contains(out.Admits, p) {
			out.Admits = append(out.Admits, p)
		}
	}
	if cephx && !ip {
		out.Skipped = "its share is accessed through cephx rules (CephFS), which do not depend on the workers' addresses"
		return out
	}
	out.Missing = append(out.Missing, Missing(out.Admits, a.Clients)...)
	for _, m := range out.Missing {
		for _, r := range rules {
			// A rule for the very same network that admits nothing (ro, error) is in the way:
			// Manila refuses a second rule for the same address.
			p, err := ParseRule(strings.TrimSpace(r.To))
			state := strings.ToLower(r.State)
			if strings.EqualFold(r.Type, "ip") && err == nil && p == m && !r.Admits() && state != "queued_to_deny" && state != "denying" && r.ID != "" {
				out.Fix = append(out.Fix, fmt.Sprintf("openstack share access delete %s %s", v.ShareID, r.ID))
			}
		}
		out.Fix = append(out.Fix, fmt.Sprintf("openstack share access create %s ip %s --access-level rw", v.ShareID, m))
	}
	return out
}

// Finding tells, in one sentence, what is wrong with the volume; empty when nothing is.
// reason is why the workers mount from where they do (Answer.Reason).
func (v VolumeVerdict) Finding(reason string) string {
	if v.Skipped != "" || len(v.Missing) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "volume %s (share %s", v.Name, v.ShareID)
	if v.Claim != "" {
		fmt.Fprintf(&b, ", claim %s", v.Claim)
	}
	b.WriteString("): its access rules admit ")
	if len(v.Admits) == 0 {
		fmt.Fprintf(&b, "none of %s", Join(v.Missing))
	} else {
		fmt.Fprintf(&b, "%s but not %s", Join(v.Admits), Join(v.Missing))
	}
	fmt.Fprintf(&b, ", where the workers mount from (%s)", reason)
	return b.String()
}
