// Command manila-setup makes ReadWriteMany storage from OpenStack Manila work on OpenShift clusters
// running on OpenStack: install-config checks, Day-2 MachineSet patching, the attach wizard and an
// in-cluster operator for the Manila CSI driver.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], stdStreams()))
}
