package main

import (
	"strings"
	"testing"
)

// TestAttachFlagsValidate: the one set of rules of the flags of machinesets, nodepools and
// clusterapi patch, and of the IDs a list looks for.
func TestAttachFlagsValidate(t *testing.T) {
	const net, sg = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c", "77c0a1d2-1111-4111-8111-111111111111"
	for _, c := range []struct {
		name  string
		flags attachFlags
		cloud string
		code  int
		want  string
	}{
		{"a network", attachFlags{Networks: []string{net}, SecurityGroups: []string{sg}}, "", exitOK, ""},
		{"--discover with a cloud, no network", attachFlags{Discover: true, SecurityGroups: []string{sg}}, "openstack", exitOK, ""},
		{"--discover with a bad group", attachFlags{Discover: true, SecurityGroups: []string{"x"}}, "openstack", exitInvalid, `--security-group[0]: Invalid value: "x"`},
		{"--discover without a cloud", attachFlags{Discover: true}, "", exitUsage, "--discover asks the cloud"},
		{"nothing", attachFlags{}, "", exitUsage, "--network is required"},
		{"a bad network", attachFlags{Networks: []string{net, "abc"}}, "", exitInvalid, `--network[1]: Invalid value: "abc"`},
		{"twice", attachFlags{Networks: []string{net, strings.ToUpper(net)}}, "", exitInvalid, "--network[1]: Duplicate value"},
		{"--in-place without -f", attachFlags{Networks: []string{net}, InPlace: true}, "", exitUsage, "--in-place"},
	} {
		err := c.flags.validate(&GlobalOptions{OSCloud: c.cloud})
		if code := exitCodeOf(err); code != c.code || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: exit %d (%v), want %d with %q", c.name, code, err, c.code, c.want)
		}
	}
	// A list looks for what it is given, a network or not.
	if err := attachmentFlagErrors(attachFlags{SecurityGroups: []string{sg}}.attachment(), false); err != nil {
		t.Errorf("security groups alone, for a list: %v", err)
	}
}
