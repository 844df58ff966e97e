# Shared helpers for the test/env scripts. Source it; do not run it.

# Where slow-to-build things are cached, outside the repository, keyed by version.
MANILA_SETUP_CACHE=${MANILA_SETUP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/manila-setup}
# Where running environments keep their state (PIDs, logs, config).
MANILA_SETUP_RUN=${MANILA_SETUP_RUN:-${XDG_RUNTIME_DIR:-/tmp}/manila-setup}
# The sandbox of make demo: its kubeconfig, logs and PID (a test of the user guide runs one elsewhere).
MANILA_SETUP_SANDBOX=${MANILA_SETUP_SANDBOX:-$MANILA_SETUP_RUN/sandbox}

# Loopback only: a proxy in the environment must never see our traffic.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY
export no_proxy=127.0.0.1,localhost NO_PROXY=127.0.0.1,localhost

_env_t0=$(date +%s)

# step prints a progress line with the seconds since the script started.
step() { printf '[%4ds] %s\n' "$(( $(date +%s) - _env_t0 ))" "$*" >&2; }

die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The binaries the tests run beside this repository's own (the control plane, etcd, the kubelet,
# the CSI driver and its sidecars, kube-rbac-proxy, the CNI plugins; all but kwok) are built from
# one Go module, test/env/binaries: it requires each upstream command at its released version and
# pins every k8s.io library to the cluster's own (v0.34.10), so that client-go, the API types,
# gRPC and the other shared dependencies are compiled once for all of them. Built each from its
# own go.mod, each compiled its own copy of them at another version (docs/development.md has the
# numbers).
binaries_module=$(cd "$(dirname "${BASH_SOURCE[0]}")/binaries" && pwd)

# A cache folder's .complete holds the stamp of the dependency set it was built from (a hash of
# test/env/binaries/go.sum): a folder built from another set is rebuilt, never reused.
binaries_stamp() { sha256sum "$binaries_module/go.sum" | cut -c1-16; }

# cached DIR says whether DIR was completed from this dependency set; a folder left by another
# set, or half-built, is removed so that it is built again.
cached() {
  [[ -f $1/.complete && $(cat "$1/.complete") == "$(binaries_stamp)" ]] && return 0
  rm -rf "$1"
  return 1
}

# mark_complete DIR records that DIR holds everything, built from this dependency set.
mark_complete() { binaries_stamp >"$1/.complete"; }

# pinned MODULE VERSION dies unless test/env/binaries builds MODULE at VERSION (the version its
# go.mod selects, or the replace that overrides it): a script's version and the module's cannot
# drift apart.
pinned() {
  local got
  got=$(cd "$binaries_module" && GOWORK=off GOFLAGS=-mod=readonly GOTOOLCHAIN=local \
    go list -m -f '{{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}' "$1" 2>&1) || got="not there ($got)"
  [[ $got == "$2" ]] || die "test/env/binaries/go.mod builds $1 at $got, but the scripts name $2: change the two together"
}

# build_binary OUT PKG LDFLAGS builds the command PKG of test/env/binaries (static, no debug
# information, paths trimmed) into OUT (through OUT.tmp: never half-written), unless OUT is there.
# Two builds at once would compile the same shared packages twice: the scripts run one after
# the other.
build_binary() {
  local out=$1 pkg=$2 flags=$3 t0
  [[ -x $out ]] && { step "$(basename "$out") already built"; return; }
  t0=$(date +%s)
  step "building $(basename "$out") ($pkg; cold: minutes; load: $(cut -d' ' -f1-3 /proc/loadavg))"
  (cd "$binaries_module" && CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off GOFLAGS="-mod=readonly -buildvcs=false" \
    go build -trimpath -ldflags "$flags" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  step "built $(basename "$out") in $(($(date +%s) - t0)) s (load: $(cut -d' ' -f1-3 /proc/loadavg))"
}

# own_cloud NAME gives the calling script a loopback OpenStack of its own, apart from the demo's
# (make demo, make env-up) and from any other script's: MANILA_SETUP_RUN becomes a new folder
# ${XDG_RUNTIME_DIR:-/tmp}/manila-setup-NAME.XXXXXX, and KEYSTONE_PORT, NEUTRON_PORT,
# MANILA_PORT, NOVA_PORT, PLACEMENT_PORT and GLANCE_PORT free ports of 127.0.0.1, all exported, so that up.sh, down.sh, the Go tests
# (test/testenv) and make demo inside a test all use that cloud. A port is reserved by an
# flock on ${TMPDIR:-/tmp}/manila-setup-ports/PORT.lock, held by an open file descriptor that
# this shell and its children (the services too) inherit: two scripts picking ports at the same
# time never pick the same ones, and a port goes back to the pool when the last holder exits.
# Ports come from 20000-32767: below Linux's ephemeral range (32768-60999), which the kernel
# hands to the tests' own servers and to outgoing connections, and clear of the demo's defaults.
own_cloud() {
  local name=$1 locks="${TMPDIR:-/tmp}/manila-setup-ports" var port fd tries
  MANILA_SETUP_RUN=$(mktemp -d "${XDG_RUNTIME_DIR:-/tmp}/manila-setup-$name.XXXXXX")
  MANILA_SETUP_SANDBOX=$MANILA_SETUP_RUN/sandbox
  export MANILA_SETUP_RUN MANILA_SETUP_SANDBOX
  mkdir -p "$locks"
  for var in KEYSTONE_PORT NEUTRON_PORT MANILA_PORT NOVA_PORT PLACEMENT_PORT GLANCE_PORT; do
    for ((tries = 0; ; tries++)); do
      ((tries < 200)) || die "no free port for $var in 20000-32767"
      port=$((20000 + (RANDOM * 32768 + RANDOM) % 12768))
      exec {fd}>>"$locks/$port.lock"
      if flock -n "$fd" && ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        break
      fi
      exec {fd}>&-
    done
    printf -v "$var" '%s' "$port"
    export "${var?}"
  done
}
