// Package realmachines holds the tests of manila-setup's Day-2 commands on real servers (build
// tag integration, run by make test): `machinesets`, `controlplane` and `clusterapi` patch and
// roll clusters whose Machines are Nova servers of the loopback cloud, made by the real Machine
// API and Cluster API controllers (test/testenv/machineapi, test/testenv/capireal), and the tests
// read what those servers got from Nova and Neutron.
//
// The tests run the built binary, as users do. They are a package of their own so that they run
// beside the command's other tests rather than after them; within the package they run one
// after the other, because side by side they kept the loopback cloud's one Nova API process too
// busy.
package realmachines
