package operator

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	// StorageClassPrefix starts the name of every StorageClass the operator keeps.
	StorageClassPrefix = "csi-manila-"
	// maxStorageClassName keeps names usable as DNS-1123 labels (they end up in labels and
	// annotations of claims and volumes, and in users' scripts).
	maxStorageClassName = 63
	hashSuffixLen       = 8

	// AnnotationShareType records which Manila share type a StorageClass serves.
	AnnotationShareType = "manila.csi.openstack.org/share-type"
	// AnnotationShareTypeGone marks a StorageClass whose share type is no longer offered by
	// Manila. The class is kept: claims and volumes may still refer to it.
	AnnotationShareTypeGone = "manila.csi.openstack.org/share-type-missing-since"
	// LabelManagedBy marks what the operator owns.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy on what the operator owns.
	ManagedByValue = "manila-setup-operator"
	// AnnotationSnapshots says on a StorageClass whether VolumeSnapshots of its volumes can be
	// taken and restored: SnapshotsSupported, or "not supported: " and why.
	AnnotationSnapshots = "manila.csi.openstack.org/snapshots"
	// SnapshotsSupported is AnnotationSnapshots' value for a share type that can.
	SnapshotsSupported = "supported"
)

// sanitizeDNS1123 maps a share type name to a DNS-1123 label fragment: lower case, every run of
// characters outside [a-z0-9] becomes one "-", no leading or trailing "-".
func sanitizeDNS1123(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimRight(b.String(), "-")
}

// shortHash is a stable 8-hex-digit digest of a share type name.
func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:hashSuffixLen]
}

// baseStorageClassName is <prefix><sanitized type>, cut to the length limit.
func baseStorageClassName(prefix, shareType string) string {
	s := sanitizeDNS1123(shareType)
	if s == "" {
		return hashedStorageClassName(prefix, shareType)
	}
	return trimName(prefix + s)
}

// hashedStorageClassName is the base name with a stable short hash of the type name appended,
// what a type gets when its base name is taken.
func hashedStorageClassName(prefix, shareType string) string {
	s := sanitizeDNS1123(shareType)
	head := prefix + s
	if s == "" {
		head = strings.TrimSuffix(prefix, "-")
	}
	return trimName(head[:min(len(head), maxStorageClassName-hashSuffixLen-1)]) + "-" + shortHash(shareType)
}

func trimName(s string) string {
	if len(s) > maxStorageClassName {
		s = s[:maxStorageClassName]
	}
	return strings.TrimRight(s, "-")
}

// StorageClassNames assigns a StorageClass name to each share type name. A name stays with the
// type that has it today (existing maps StorageClass name -> share type, read from the classes'
// annotations), so names never move between types. Otherwise a type gets csi-manila-<type>
// sanitized to DNS-1123; when several types sanitize to the same name, the type whose name
// needed no sanitizing keeps it and the others get a stable hash suffix; taken is the set of
// names used by classes the operator does not own.
func StorageClassNames(types []string, existing map[string]string, taken map[string]bool) map[string]string {
	return StorageClassNamesWithPrefix(StorageClassPrefix, types, existing, taken)
}

// StorageClassNamesWithPrefix is StorageClassNames for names that start with prefix (the
// companion's, CompanionStorageClassPrefix).
func StorageClassNamesWithPrefix(prefix string, types []string, existing map[string]string, taken map[string]bool) map[string]string {
	sorted := append([]string(nil), types...)
	sort.Strings(sorted)
	byBase := map[string][]string{}
	for _, t := range sorted {
		b := baseStorageClassName(prefix, t)
		byBase[b] = append(byBase[b], t)
	}
	owner := map[string]string{} // name -> type, for names handed out
	for name, t := range existing {
		owner[name] = t
	}
	result := map[string]string{}
	// Keep names that already belong to a type.
	for name, t := range existing {
		if _, offered := byBase[baseStorageClassName(prefix, t)]; offered && (name == baseStorageClassName(prefix, t) || name == hashedStorageClassName(prefix, t)) {
			if _, done := result[t]; !done {
				result[t] = name
			}
		}
	}
	bases := make([]string, 0, len(byBase))
	for b := range byBase {
		bases = append(bases, b)
	}
	sort.Strings(bases)
	for _, base := range bases {
		group := byBase[base]
		// Who may have the plain name: its current owner, else the one type that needed no
		// sanitizing, else (no collision) the only type.
		winner := ""
		if t, ok := owner[base]; ok {
			winner = t
		} else if !taken[base] {
			for _, t := range group {
				if prefix+t == base {
					winner = t
				}
			}
			if winner == "" && len(group) == 1 {
				winner = group[0]
			}
		}
		for _, t := range group {
			if _, done := result[t]; done {
				continue
			}
			if t == winner {
				result[t] = base
			} else {
				result[t] = hashedStorageClassName(prefix, t)
			}
			owner[result[t]] = t
		}
	}
	return result
}

// ShareType is a Manila share type, as far as StorageClasses care.
type ShareType struct {
	ID   string
	Name string
	// DHSS is driver_handles_share_servers: shares of this type need a share network.
	DHSS bool
	// SnapshotSupport and CreateShareFromSnapshotSupport are the extra specs snapshot_support
	// and create_share_from_snapshot_support: the Manila CSI driver snapshots a share only when
	// its type has both (a snapshot it could not restore would be of no use to a claim).
	SnapshotSupport, CreateShareFromSnapshotSupport bool
}

// CanSnapshot tells whether the Manila CSI driver takes (and restores) snapshots of shares of
// this type.
func (st ShareType) CanSnapshot() bool {
	return st.SnapshotSupport && st.CreateShareFromSnapshotSupport
}

// SnapshotVerdict is AnnotationSnapshots' value for the share type: SnapshotsSupported, or why
// not, naming the extra specs that are missing.
func (st ShareType) SnapshotVerdict() string {
	if st.CanSnapshot() {
		return SnapshotsSupported
	}
	var lacks []string
	if !st.SnapshotSupport {
		lacks = append(lacks, "snapshot_support=True")
	}
	if !st.CreateShareFromSnapshotSupport {
		lacks = append(lacks, "create_share_from_snapshot_support=True")
	}
	return fmt.Sprintf("not supported: share type %q lacks %s; the Manila CSI driver snapshots only shares whose type has both "+
		"snapshot_support=True and create_share_from_snapshot_support=True", st.Name, strings.Join(lacks, " and "))
}

// StorageClassParams is what a StorageClass needs beyond the share type.
type StorageClassParams struct {
	Namespace      string // where csi-manila-secrets lives
	ShareClients   string // nfs-shareClient: where the workers mount from (operator/shareclient)
	ShareNetworkID string // for share types with driver_handles_share_servers=true
}

// BuildStorageClass is the StorageClass for one share type.
func BuildStorageClass(name string, st ShareType, p StorageClassParams) *storagev1.StorageClass {
	params := map[string]string{
		"type": st.Name,
		"csi.storage.k8s.io/provisioner-secret-name":            DriverSecretName,
		"csi.storage.k8s.io/provisioner-secret-namespace":       p.Namespace,
		"csi.storage.k8s.io/controller-expand-secret-name":      DriverSecretName,
		"csi.storage.k8s.io/controller-expand-secret-namespace": p.Namespace,
		"csi.storage.k8s.io/node-stage-secret-name":             DriverSecretName,
		"csi.storage.k8s.io/node-stage-secret-namespace":        p.Namespace,
		"csi.storage.k8s.io/node-publish-secret-name":           DriverSecretName,
		"csi.storage.k8s.io/node-publish-secret-namespace":      p.Namespace,
	}
	if p.ShareClients != "" {
		params["nfs-shareClient"] = p.ShareClients
	}
	if st.DHSS && p.ShareNetworkID != "" {
		params["shareNetworkID"] = p.ShareNetworkID
	}
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{LabelManagedBy: ManagedByValue},
			Annotations: map[string]string{AnnotationShareType: st.Name, AnnotationSnapshots: st.SnapshotVerdict()},
		},
		Provisioner:          DriverName,
		Parameters:           params,
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		AllowVolumeExpansion: ptr.To(true),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
	}
}
