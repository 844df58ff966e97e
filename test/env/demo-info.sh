#!/usr/bin/env bash
# Prints what `make demo` brought up and how to use it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
os="$MANILA_SETUP_RUN/openstack"
cat <<TXT

The sandbox is up:
  - a real Keystone, Neutron and Manila on 127.0.0.1 (state and logs in $os)
  - the Kubernetes control-plane binaries in $(bash "$here/kube/build.sh" 2>/dev/null)

Use it:
  export OS_CLIENT_CONFIG_FILE=$os/clouds.yaml OS_CLOUD=manila-setup
  bin/manila-setup --help

What was seeded (networks, security groups, share types, a share): $os/seed.json

Stop it:  make env-down
TXT
