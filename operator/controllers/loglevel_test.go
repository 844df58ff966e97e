package controllers

import (
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
)

// TestLogVerbosity: OpenShift's log levels as --v, TraceAll kept below client-go's level for
// logging API bodies (8), where Secrets' data would reach the logs.
func TestLogVerbosity(t *testing.T) {
	for level, want := range map[operatorv1.LogLevel]int{"": 2, operatorv1.Normal: 2, operatorv1.Debug: 4, operatorv1.Trace: 6, operatorv1.TraceAll: 7} {
		if got := logVerbosity(level); got != want {
			t.Errorf("logVerbosity(%q) = %d, want %d", level, got, want)
		}
	}
}
