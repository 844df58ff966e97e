// Package testenv brings up the real servers the integration tests run against: a kube-apiserver
// with etcd and the OpenShift CRDs (envtest), a "sim cluster" that adds kube-controller-manager,
// kube-scheduler and kwok fake nodes so that Deployments and DaemonSets get Ready pods, and the
// loopback OpenStack (Keystone, Neutron, Manila) started by test/env/openstack/up.sh.
//
// The binaries come from test/env/kube/build.sh, which `make test` runs first. A test that needs
// an environment that is not there fails with the command that provides it: under `make test`
// nothing is skipped.
package testenv
