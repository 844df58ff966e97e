// Package standins holds test-only stand-ins for three operand images whose upstream source the
// Go module proxy does not serve at any version (403 for the release tags, as +incompatible and as
// pseudo-versions): the real node of the test cluster (test/env/node, testenv.StartRealNode) runs
// every image the operator renders, built here from source, so these three are built from the
// programs below instead. Each is a small package main that accepts the command line of the
// upstream release it stands for and behaves as that release does on the paths the tests cover:
//
//   - csi-node-driver-registrar follows kubernetes-csi/node-driver-registrar v2.14.0: it asks the
//     CSI driver for its name, serves the kubelet's plugin registration service on
//     <--plugin-registration-path>/<driver>-reg.sock and answers /healthz on --http-endpoint.
//   - livenessprobe follows kubernetes-csi/livenessprobe v2.16.0: /healthz calls the driver's
//     Identity Probe within --probe-timeout.
//   - nfsplugin follows kubernetes-csi/csi-driver-nfs v4.11.0 (cmd/nfsplugin): the Identity,
//     Controller and Node services of the NFS partner plugin that the Manila CSI plugin forwards
//     node calls to. It mounts with mount(2) directly (no mount.nfs helper); volume creation
//     answers Unimplemented, since Manila creates the shares.
//
// What the programs share lives in internal/standin (the sidecars' logging flags, reaching the
// CSI driver, serving HTTP, ending on a fatal error) and their tests' helpers in
// internal/standintest (running the test binary as the program, a short folder for sockets, a
// fake CSI driver).
//
// They are test fixtures: the real node's image build (test/env/node) puts them into the operand
// images of the test cluster, and they are never shipped with the operator.
package standins
