package main

import (
	"errors"
	"strings"
	"testing"
)

func TestPlanCredentials(t *testing.T) {
	cco := func(has bool, err error) func() (bool, error) { return func() (bool, error) { return has, err } }
	for _, tt := range []struct {
		name    string
		noCreds bool
		cloud   string
		hasCCO  func() (bool, error)
		want    credentialsPlan
		code    int
		errText string
	}{
		{"--no-credentials", true, "mycloud", cco(true, nil), credentialsNone, exitOK, ""},
		{"--os-cloud wins over the cloud-credential operator", false, "mycloud", cco(true, nil), credentialsFromCloudsYAMLFile, exitOK, ""},
		{"OpenShift's way without --os-cloud", false, "", cco(true, nil), credentialsFromCCO, exitOK, ""},
		{"no source at all", false, "", cco(false, nil), credentialsNone, exitUsage, "--os-cloud (or OS_CLOUD) is required"},
		{"the API server cannot be asked", false, "", cco(false, errors.New("connection refused")), credentialsNone, exitUsage, "connection refused"},
	} {
		got, err := planCredentials(tt.noCreds, tt.cloud, tt.hasCCO)
		if got != tt.want || exitCodeOf(err) != tt.code || (tt.errText != "" && (err == nil || !strings.Contains(err.Error(), tt.errText))) {
			t.Errorf("%s: plan %v, err %v (exit %d)", tt.name, got, err, exitCodeOf(err))
		}
	}
}
