// Package e2e holds the end-to-end tests (build tag integration, run by make test): the real
// Manila CSI driver provisioning shares in the loopback OpenStack from the Secret and the
// StorageClasses the operator generates, and the whole journey from install-config to a
// ReadWriteMany claim. The tests need the loopback OpenStack (test/env/openstack/up.sh), the
// kube binaries (test/env/kube/build.sh) and the CSI binaries (test/env/csi/build.sh).
//
// manifest.yaml beside them describes the driver to the Kubernetes external storage test suite,
// for runs against a real cluster.
package e2e
