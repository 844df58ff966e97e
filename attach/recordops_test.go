package attach

import (
	"reflect"
	"testing"
)

// TestRecordOps: what is left of the record is written, a record with nothing left goes (with
// the annotations when it was the only one), an unchanged record writes nothing.
func TestRecordOps(t *testing.T) {
	const key = "/metadata/annotations/manila-setup.io~1storage-attachment"
	left := &Record{Attachment: Attachment{Networks: []string{"3c2ef2f4-921b-40a6-94e7-55c1d8ef2c5b"}}, Time: "2026-11-26T00:00:00Z"}
	for _, tt := range []struct {
		name        string
		d           Detach
		annotations map[string]string
		want        []PatchOp
	}{
		{"unchanged", Detach{}, map[string]string{Annotation: "{}"}, nil},
		{"something left", Detach{RecordChanged: true, Record: left}, map[string]string{Annotation: "{}"},
			[]PatchOp{{Op: "add", Path: key, Value: `{"networks":["3c2ef2f4-921b-40a6-94e7-55c1d8ef2c5b"],"time":"2026-11-26T00:00:00Z"}`}}},
		{"the only annotation goes", Detach{RecordChanged: true}, map[string]string{Annotation: "{}"},
			[]PatchOp{{Op: "remove", Path: "/metadata/annotations"}}},
		{"one annotation of several goes", Detach{RecordChanged: true}, map[string]string{Annotation: "{}", "team": "storage"},
			[]PatchOp{{Op: "remove", Path: key}}},
		{"already gone", Detach{RecordChanged: true}, map[string]string{"team": "storage"}, nil},
	} {
		if got := tt.d.RecordOps(tt.annotations); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
