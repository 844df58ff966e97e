#!/usr/bin/env bash
# Builds the images a real node of the test cluster runs, offline with podman, each an archive
# that `ctr images import` loads under the name a pod spec uses:
#   test/env/node/images.sh OUTDIR
# writes OUTDIR/pause.tar, OUTDIR/manila-setup-operator.tar and one archive per operand image
# asked for, and prints one line per image: reference, archive. The names are
# $IMAGE_REPO/pause:$NODE_IMAGE_TAG and the operator's own build (build/image.sh) as
# $IMAGE_REPO/manila-setup-operator:$NODE_IMAGE_TAG; the operand images are built under the
# references in the operator's variables (DRIVER_IMAGE, NFS_DRIVER_IMAGE, PROVISIONER_IMAGE,
# SNAPSHOTTER_IMAGE, RESIZER_IMAGE, LIVENESS_PROBE_IMAGE, NODE_DRIVER_REGISTRAR_IMAGE,
# KUBE_RBAC_PROXY_IMAGE), each one that is set: the names `operator render` prints; and
# SHELL_IMAGE, a busybox image for test and demo pods.
# Each operand image holds its binary, built from source at the operand table's version
# (test/env/csi/build.sh, test/env/node/operands.sh), or the stand-in of test/env/node/standins
# where the module proxy serves no source (see operands.sh), as its entry point, run as root like
# the upstream images; the driver's image also has a shell (busybox), which its node
# DaemonSet's init container runs.
# podman's storage lives in OUTDIR/podman and is removed at the end: nothing is left behind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
. "$here/../lib.sh"
. "$top/build/podman.sh"

out=${1:?usage: $0 OUTDIR}
IMAGE_REPO=${IMAGE_REPO:-localhost/manila-setup}
NODE_IMAGE_TAG=${NODE_IMAGE_TAG:-node-test}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PODMAN_ROOT=$out/podman PODMAN_CONF_DIR=$out/podman-conf
trap 'rm -rf "$PODMAN_ROOT" "$PODMAN_CONF_DIR" "$out/pause-ctx" "$out/operand-ctx"' EXIT
podman_install

# The sandbox image: a static binary that waits for a signal, on an empty base.
ctx=$out/pause-ctx
mkdir -p "$ctx"
(cd "$top" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w -buildid=" -o "$ctx/pause" ./test/env/node/pause)
printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
ref=$IMAGE_REPO/pause:$NODE_IMAGE_TAG
podman_ build -q --timestamp 0 -t "$ref" -f "$ctx/Containerfile" "$ctx" >/dev/null
# docker-archive keeps the full name, which `ctr images import` gives the image.
podman_ save -q --format docker-archive -o "$out/pause.tar" "$ref"
printf '%s\t%s\n' "$ref" "$out/pause.tar"

# The operator's image, built as make image builds it.
ref=$IMAGE_REPO/manila-setup-operator:$NODE_IMAGE_TAG
VERSION=$NODE_IMAGE_TAG IMAGE_REPO=$IMAGE_REPO IMAGE_DIR=$out/oci BINARIES=manila-setup-operator \
  "$top/build/image.sh" build >/dev/null
podman_ save -q --format docker-archive -o "$out/manila-setup-operator.tar" "$ref"
rm -rf "$out/oci"
printf '%s\t%s\n' "$ref" "$out/manila-setup-operator.tar"

# operand_image VAR NAME BINARY [EXTRA...]: the image VAR names (skipped when VAR is unset), with
# BINARY as /NAME, its entry point, and each EXTRA (a file) under /bin.
operand_image() {
  local var=$1 name=$2 bin=$3 ref=${!1:-} ctx f
  shift 3
  [[ -n $ref ]] || return 0
  [[ -x $bin ]] || die "$var: $bin is missing"
  ctx=$out/operand-ctx/$var
  mkdir -p "$ctx/bin"
  cp "$bin" "$ctx/$name"
  local copies=""
  for f in "$@"; do
    cp "$f" "$ctx/bin/$(basename "$f")"
  done
  [[ $# -gt 0 ]] && copies='COPY bin/ /bin/'
  printf 'FROM scratch\nCOPY %s /%s\n%s\nENTRYPOINT ["/%s"]\n' "$name" "$name" "$copies" "$name" >"$ctx/Containerfile"
  podman_ build -q --timestamp 0 -t "$ref" -f "$ctx/Containerfile" "$ctx" >/dev/null
  podman_ save -q --format docker-archive -o "$out/$var.tar" "$ref"
  printf '%s\t%s\n' "$ref" "$out/$var.tar"
}

# SHELL_IMAGE, when set: busybox (static) with its applets on PATH (sh, tail, sleep, date, ...),
# for the pods a test or the demo runs on a node, such as the writers of one share.
if [[ -n ${SHELL_IMAGE:-} ]]; then
  [[ -x /bin/busybox ]] && ! ldd /bin/busybox >/dev/null 2>&1 || die "SHELL_IMAGE: /bin/busybox must be busybox-static"
  ctx=$out/operand-ctx/SHELL_IMAGE
  mkdir -p "$ctx/bin"
  cp /bin/busybox "$ctx/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [[ $applet == busybox ]] || ln -s busybox "$ctx/bin/$applet"
  done
  printf 'FROM scratch\nCOPY bin/ /bin/\nENV PATH=/bin\nENTRYPOINT ["/bin/sh"]\n' >"$ctx/Containerfile"
  podman_ build -q --timestamp 0 -t "$SHELL_IMAGE" -f "$ctx/Containerfile" "$ctx" >/dev/null
  podman_ save -q --format docker-archive -o "$out/SHELL_IMAGE.tar" "$SHELL_IMAGE"
  printf '%s\t%s\n' "$SHELL_IMAGE" "$out/SHELL_IMAGE.tar"
fi

operands=(DRIVER_IMAGE NFS_DRIVER_IMAGE PROVISIONER_IMAGE SNAPSHOTTER_IMAGE RESIZER_IMAGE LIVENESS_PROBE_IMAGE NODE_DRIVER_REGISTRAR_IMAGE KUBE_RBAC_PROXY_IMAGE)
wanted=0
for v in "${operands[@]}"; do [[ -n ${!v:-} ]] && wanted=1; done
((wanted)) || exit 0

csi=${MANILA_SETUP_CSI_BIN:-$(bash "$here/../csi/build.sh")}
bins=${MANILA_SETUP_OPERAND_BIN:-$(bash "$here/operands.sh")}
standins=$out/operand-ctx/standins
mkdir -p "$standins"
(cd "$top" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w -buildid=" -o "$standins/" \
  ./test/env/node/standins/csi-node-driver-registrar ./test/env/node/standins/livenessprobe ./test/env/node/standins/nfsplugin)
# The driver image's shell: busybox, static, as sh and sleep (what the init container runs).
busybox=/bin/busybox
[[ -x $busybox ]] || die "$busybox is missing: run test/env/node/build.sh (it installs busybox-static)"
ldd "$busybox" >/dev/null 2>&1 && die "$busybox is linked dynamically: the image has no libraries; install busybox-static"
mkdir -p "$standins/shell"
cp "$busybox" "$standins/shell/sh" && cp "$busybox" "$standins/shell/sleep"

operand_image DRIVER_IMAGE manila-csi-plugin "$csi/manila-csi-plugin" "$standins/shell/sh" "$standins/shell/sleep"
operand_image NFS_DRIVER_IMAGE nfsplugin "$standins/nfsplugin"
operand_image PROVISIONER_IMAGE csi-provisioner "$csi/csi-provisioner"
operand_image SNAPSHOTTER_IMAGE csi-snapshotter "$bins/csi-snapshotter"
operand_image RESIZER_IMAGE csi-resizer "$bins/csi-resizer"
operand_image LIVENESS_PROBE_IMAGE livenessprobe "$standins/livenessprobe"
operand_image NODE_DRIVER_REGISTRAR_IMAGE csi-node-driver-registrar "$standins/csi-node-driver-registrar"
operand_image KUBE_RBAC_PROXY_IMAGE kube-rbac-proxy "$bins/kube-rbac-proxy"
