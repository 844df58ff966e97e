// Package datapath holds the tests of what a Manila share does for real: real Linux kernels
// (QEMU guests with the addresses of Neutron ports) mount the exports of the loopback cloud's
// nfs-ganesha back end, and the NFS server itself enforces the access rules Manila grants.
// Integration tests only (go test -tags integration; make test runs them as root).
package datapath
