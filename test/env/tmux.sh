#!/usr/bin/env bash
# Installs tmux, which the wizard's smoke test (cmd/manila-setup/networks_attach_tmux_test.go)
# drives the real binary with. Does nothing when tmux is already there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

if command -v tmux >/dev/null 2>&1; then
  step "tmux already installed: $(tmux -V)"
  exit 0
fi
[[ $(id -u) == 0 ]] || die "tmux is missing and this is not root: apt-get install tmux"
step "installing tmux"
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
# DPkg::Lock::Timeout does not cover the lists lock of "apt-get update": when another apt holds
# it (a second make test on the machine installing too), wait for it here.
for ((try = 1; ; try++)); do
  apt-get "${apt_opts[@]}" update -qq && break
  ((try < 60)) || die "apt-get update kept failing"
  sleep 10
done
apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends tmux \
  >"${TMPDIR:-/tmp}/manila-setup-apt-tmux.log" 2>&1 ||
  { tail -n 30 "${TMPDIR:-/tmp}/manila-setup-apt-tmux.log" >&2; exit 1; }
step "tmux installed: $(tmux -V)"
