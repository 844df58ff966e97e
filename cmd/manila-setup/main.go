// Command manila-setup makes ReadWriteMany storage from OpenStack Manila work on OpenShift clusters
// running on OpenStack: install-config checks, Day-2 MachineSet patching, the attach wizard and an
// in-cluster operator for the Manila CSI driver.
package main

import (
	"os"
	"path/filepath"
)

func main() {
	os.Exit(run(argsFor(os.Args), stdStreams()))
}

// argsFor is the command line to run. Called as gather (the CLI image's /usr/bin/gather, which
// `oc adm must-gather --image` runs), it is `must-gather --dest-dir /must-gather`, the folder
// oc copies back.
func argsFor(argv []string) []string {
	if len(argv) == 0 {
		return nil
	}
	if filepath.Base(argv[0]) == "gather" {
		return append([]string{"must-gather", "--dest-dir", "/must-gather"}, argv[1:]...)
	}
	return argv[1:]
}
