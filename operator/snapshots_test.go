package operator

import (
	"strings"
	"testing"
)

func TestSnapshotVerdictNamesWhatIsMissing(t *testing.T) {
	for _, c := range []struct {
		st          ShareType
		want        string
		notMentions string
	}{
		{ShareType{Name: "gold", SnapshotSupport: true, CreateShareFromSnapshotSupport: true}, SnapshotsSupported, ""},
		{ShareType{Name: "plain"}, `not supported: share type "plain" lacks snapshot_support=True and create_share_from_snapshot_support=True;`, ""},
		{ShareType{Name: "snaponly", SnapshotSupport: true}, `not supported: share type "snaponly" lacks create_share_from_snapshot_support=True;`, "lacks snapshot_support"},
		{ShareType{Name: "odd", CreateShareFromSnapshotSupport: true}, `not supported: share type "odd" lacks snapshot_support=True;`, "lacks snapshot_support=True and"},
	} {
		got := c.st.SnapshotVerdict()
		if !strings.HasPrefix(got, c.want) || (c.notMentions != "" && strings.Contains(got, c.notMentions)) {
			t.Errorf("%s: %q, want it to start %q", c.st.Name, got, c.want)
		}
		if c.st.CanSnapshot() != (got == SnapshotsSupported) {
			t.Errorf("%s: CanSnapshot %v but verdict %q", c.st.Name, c.st.CanSnapshot(), got)
		}
		class := BuildStorageClass("csi-manila-"+c.st.Name, c.st, StorageClassParams{Namespace: "ns"})
		if class.Annotations[AnnotationSnapshots] != got {
			t.Errorf("%s: StorageClass annotation %q, want the verdict %q", c.st.Name, class.Annotations[AnnotationSnapshots], got)
		}
	}
}

func TestSnapshotStorageClasses(t *testing.T) {
	types := []ShareType{
		{Name: "zeta", SnapshotSupport: true, CreateShareFromSnapshotSupport: true},
		{Name: "plain"},
		{Name: "alpha", SnapshotSupport: true, CreateShareFromSnapshotSupport: true},
		// Can, but has no class (a DHSS type without a share network): not listed.
		{Name: "dhss", SnapshotSupport: true, CreateShareFromSnapshotSupport: true, DHSS: true},
	}
	classOf := map[string]string{"zeta": "csi-manila-zeta", "plain": "csi-manila-plain", "alpha": "csi-manila-alpha"}
	if got := SnapshotStorageClasses(types, classOf); got != "csi-manila-alpha,csi-manila-zeta" {
		t.Errorf("got %q, want the two classes that can, sorted", got)
	}
	if got := SnapshotStorageClasses(types[1:2], classOf); got != NoSnapshotStorageClasses {
		t.Errorf("got %q, want %q", got, NoSnapshotStorageClasses)
	}
}
