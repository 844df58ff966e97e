// Package installconfig loads, validates and patches the OpenStack machine-pool lists of an
// OpenShift install-config.yaml: additionalNetworkIDs and additionalSecurityGroupIDs of the
// compute pools, the control plane and platform.openstack.defaultMachinePlatform.
//
// It reads the file as a YAML node tree (go.yaml.in/yaml/v3), so that patch keeps comments,
// key order, quoting and fields it does not know, and it follows the installer's own reading
// of the file: keys match case-insensitively (encoding/json), a pool's list replaces the
// default pool's list, and keys set twice are an error (strict YAML). This package decides
// what a patch changes; internal/yamlsplice, which internal/yamlpatch uses too, writes the
// change into the text and keeps every other byte. The installer itself
// (github.com/openshift/installer) is not imported; the nested module test/installer-oracle
// runs its validation over the same corpus as these tests and demands the same verdicts.
//
// Problems are field.Error values with a severity, printed one per line as
// `PATH: Invalid value: "VALUE": why`. What only the cloud can tell (does the network exist?)
// is left to a CloudChecker.
package installconfig
