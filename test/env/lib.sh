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

# module_dir MODULE VERSION prints the module's folder in the Go module cache (read-only),
# downloading it through the module proxy first when needed.
module_dir() {
  local json dir
  json=$(go mod download -json "$1@$2") || die "go mod download $1@$2 failed: $json"
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
  [[ -n $dir && -f $dir/go.mod ]] || die "$1@$2: no source folder in the module cache"
  echo "$dir"
}

# build_binary OUT SRC PKG LDFLAGS builds package ./PKG of the module in folder SRC, from its own
# go.mod and go.sum, into OUT (through OUT.tmp: never half-written), unless OUT is there already.
build_binary() {
  local out=$1 src=$2 pkg=$3 flags=$4 t0
  [[ -x $out ]] && { step "$(basename "$out") already built"; return; }
  t0=$(date +%s)
  step "building $(basename "$out") from $src (cold: minutes; load: $(cut -d' ' -f1-3 /proc/loadavg))"
  (cd "$src" && go build -trimpath -ldflags "$flags" -o "$out.tmp" "./$pkg")
  mv "$out.tmp" "$out"
  step "built $(basename "$out") in $(($(date +%s) - t0)) s (load: $(cut -d' ' -f1-3 /proc/loadavg))"
}

# own_cloud NAME gives the calling script a loopback OpenStack of its own, apart from the demo's
# (make demo, make env-up) and from any other script's: MANILA_SETUP_RUN becomes a new folder
# ${XDG_RUNTIME_DIR:-/tmp}/manila-setup-NAME.XXXXXX, and KEYSTONE_PORT, NEUTRON_PORT and
# MANILA_PORT free ports of 127.0.0.1, all exported, so that up.sh, down.sh, the Go tests
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
  for var in KEYSTONE_PORT NEUTRON_PORT MANILA_PORT; do
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
