package attachment

import "github.com/manila-setup/manila-setup/attach/record"

// The record moved to attach/record (it is every kind's, not the Machine API's); these names
// keep its readers building until they import it from there.
const Annotation = record.Annotation

type (
	IDs    = record.IDs
	Record = record.Record
)

// Parse is record.Parse.
func Parse(annotations map[string]string) *Record { return record.Parse(annotations) }
