#!/usr/bin/env bash
# Builds the NFS client guests of the data-path tests: Debian's own kernel and a busybox
# initramfs that holds the kernel's NFS client modules and the distribution's mount.nfs. This
# host's kernel has no NFS client, so a mount that must really happen (a pod's volume, a refused
# client, a revoked rule) happens in one of these under QEMU (TCG): a real Linux NFS client with
# an address of its own on the storage network. Cached outside the repository, keyed by the
# kernel package's version and this folder's files: a second run is instant. Prints the folder
# (MANILA_SETUP_GUEST: vmlinuz, initrd.img, kernel-version) on standard output, timings on stderr.
# Needs the packages of install_guest_packages (apt; root only when they are missing).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

# install_guest_packages: QEMU for the guests; nfs-common for mount.nfs, which goes into the
# initramfs (the host never mounts with it); busybox-static for the guest's userland; kmod's
# depmod and modprobe to find the modules' closure; socat, which guest nodes run from the host's
# root (shared read-only) to reach the host's loopback servers.
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[[ -x /sbin/mount.nfs || -x /usr/sbin/mount.nfs ]] || need+=(nfs-common)
[[ -x /bin/busybox ]] && /bin/busybox --list | grep -qx insmod || need+=(busybox-static)
command -v depmod >/dev/null || need+=(kmod)
command -v socat >/dev/null || need+=(socat)
if ((${#need[@]})); then
  ((EUID == 0)) || die "the data-path guests need ${need[*]} (apt-get install as root)"
  step "installing ${need[*]}"
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" \
    >"${TMPDIR:-/tmp}/manila-setup-guest-apt.log" 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends "${need[@]}" >"${TMPDIR:-/tmp}/manila-setup-guest-apt.log" 2>&1; } ||
    { tail -n 30 "${TMPDIR:-/tmp}/manila-setup-guest-apt.log" >&2; die "apt-get install ${need[*]} failed"; }
fi

# The kernel: the one linux-image-amd64 points at (Debian 12's current point release).
kernel_package() {
  apt-cache show --no-all-versions linux-image-amd64 2>/dev/null |
    sed -n 's/^Depends: \(linux-image-[^ ]*\) (= \([^)]*\)).*/\1 \2/p' | head -n 1
}
read -r kpkg kver_deb < <(kernel_package) || true
if [[ -z ${kpkg:-} ]] && ((EUID == 0)); then
  step "apt-get update (the package lists do not name linux-image-amd64)"
  apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null 2>&1 || true
  read -r kpkg kver_deb < <(kernel_package) || true
fi
[[ -n ${kpkg:-} ]] || die "apt-cache knows no linux-image-amd64 (run apt-get update)"
stamp=$(cat "$here/build.sh" "$here/init" | sha256sum | cut -c1-12)
dir="$MANILA_SETUP_CACHE/guest/${kpkg}_${kver_deb}-$stamp"
if [[ -f $dir/.complete ]]; then
  step "NFS client guest cached in $dir"
  echo "$dir"
  exit 0
fi
rm -rf "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t0=$SECONDS
step "NFS client guest: $kpkg $kver_deb (kernel and modules from its package; not installed on this host)"
if ! (cd "$work" && apt-get download "$kpkg=$kver_deb" >"$work/download.log" 2>&1); then
  # Old package lists can name a kernel the mirror no longer serves: read them anew, once.
  ((EUID == 0)) && apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null 2>&1 || true
  read -r kpkg kver_deb < <(kernel_package) || true
  [[ -n ${kpkg:-} ]] && (cd "$work" && apt-get download "$kpkg=$kver_deb" >"$work/download.log" 2>&1) ||
    { cat "$work/download.log" >&2; die "apt-get download of the kernel package failed"; }
  stamp_dir="$MANILA_SETUP_CACHE/guest/${kpkg}_${kver_deb}-$stamp"
  [[ $stamp_dir == "$dir" ]] || { dir=$stamp_dir; rm -rf "$dir"; }
fi
dpkg-deb -x "$work"/"$kpkg"_*.deb "$work/pkg"
kernel=$(basename "$work"/pkg/lib/modules/*)
depmod -b "$work/pkg" "$kernel"

root=$work/root
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,run,tmp,mnt,var/lib/nfs,lib/modules}
install -m 0755 /bin/busybox "$root/bin/busybox"
install -m 0755 "$here/init" "$root/init"
# The modules of the virtio devices QEMU gives a guest (network, the control port) and of the NFS
# client (v4.x and v3), in the order modprobe would load them; and, for a guest that runs a
# kubelet (testenv.StartGuestNode), 9p to read the host's root, overlay to write above it, and
# the pod network's bridge and veth pairs.
: >"$root/lib/modules/load"
for m in virtio_pci virtio_net virtio_console nfsv4 nfsv3 9pnet_virtio 9p overlay bridge veth; do
  modprobe -d "$work/pkg" -S "$kernel" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
done | awk '!seen[$0]++' | while read -r ko; do
  install -m 0644 "$ko" "$root/lib/modules/"
  echo "/lib/modules/$(basename "$ko")" >>"$root/lib/modules/load"
done
# The distribution's mount.nfs with its libraries, and the files it reads.
mount_nfs=$(command -v mount.nfs || echo /sbin/mount.nfs)
install -m 0755 "$mount_nfs" "$root/sbin/mount.nfs"
ln -s mount.nfs "$root/sbin/mount.nfs4"
ldd "$mount_nfs" | awk '$(NF-1) ~ /^\// {print $(NF-1)} $1 ~ /^\// {print $1}' | sort -u | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cp /etc/protocols /etc/services /etc/netconfig "$root/etc/"
printf 'root:x:0:0:root:/:/bin/sh\n' >"$root/etc/passwd"
printf 'root:x:0:\n' >"$root/etc/group"

mkdir -p "$dir.tmp"
install -m 0644 "$work"/pkg/boot/vmlinuz-* "$dir.tmp/vmlinuz"
(cd "$root" && find . | busybox cpio -o -H newc -R 0:0 2>/dev/null | gzip -6) >"$dir.tmp/initrd.img"
echo "$kernel" >"$dir.tmp/kernel-version"
touch "$dir.tmp/.complete"
mv "$dir.tmp" "$dir"
step "NFS client guest ready in $dir ($(du -h "$dir/initrd.img" | cut -f1) initramfs, $((SECONDS - t0)) s)"
echo "$dir"
