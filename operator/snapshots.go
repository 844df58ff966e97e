package operator

import (
	"slices"
	"strings"
)

const (
	// VolumeSnapshotClassName is the driver's VolumeSnapshotClass (assets/volumesnapshotclass.yaml),
	// the name OpenShift's own Manila operator gives it too.
	VolumeSnapshotClassName = "csi-manila-standard"
	// AnnotationSnapshotStorageClasses says on the VolumeSnapshotClass which StorageClasses have
	// volumes it can snapshot (comma-separated, sorted), or NoSnapshotStorageClasses.
	AnnotationSnapshotStorageClasses = "manila.csi.openstack.org/storage-classes"
	// NoSnapshotStorageClasses is AnnotationSnapshotStorageClasses' value when no share type
	// can take snapshots.
	NoSnapshotStorageClasses = "none: no Manila share type has both snapshot_support and create_share_from_snapshot_support"
	// ReasonShareTypeCannotSnapshot is the reason of the Warning Event on a VolumeSnapshot the
	// driver refused because the share type of its claim cannot take snapshots.
	ReasonShareTypeCannotSnapshot = "ShareTypeCannotSnapshot"
	// ReasonShareHasSnapshots is the reason of the Warning Event on a volume the provisioner
	// cannot delete because its share has snapshots.
	ReasonShareHasSnapshots = "ShareHasSnapshots"
)

// SnapshotStorageClasses is AnnotationSnapshotStorageClasses' value: the classes (named by share
// type in classOf) whose share types can take snapshots.
func SnapshotStorageClasses(types []ShareType, classOf map[string]string) string {
	var names []string
	for _, t := range types {
		if t.CanSnapshot() && classOf[t.Name] != "" {
			names = append(names, classOf[t.Name])
		}
	}
	if len(names) == 0 {
		return NoSnapshotStorageClasses
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}
