# podman as it runs on machines without systemd, a registry or CAP_SYS_RESOURCE (CI, the test
# machines, many build hosts). Source it; then call `podman_ ARGS...` instead of `podman ARGS...`.
#   PODMAN_ROOT  storage of images and containers (default: podman's own); a test sets its own
#                directory so that it leaves nothing behind.
# The settings, each needed somewhere:
#   --storage-driver vfs         no overlay mounts inside containers
#   --runtime runc               crun refuses cgroups in hybrid mode
#   --cgroup-manager cgroupfs    no systemd
#   default_ulimits = []         setrlimit(NOFILE) is refused without CAP_SYS_RESOURCE

podman_install() {
  command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && return 0
  [[ $(id -u) == 0 ]] || { echo "podman and runc are needed: apt-get install podman runc" >&2; return 1; }
  echo "installing podman and runc (apt-get; about a minute)" >&2
  local log=${TMPDIR:-/tmp}/manila-setup-apt-podman.log
  local opts=(-o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  export DEBIAN_FRONTEND=noninteractive
  # DPkg::Lock::Timeout does not cover the lists lock of "apt-get update": when another apt
  # holds it (a second make test on the machine installing too), wait for it here.
  local try
  for ((try = 1; ; try++)); do
    apt-get "${opts[@]}" update -qq >"$log" 2>&1 && break
    ((try < 60)) || { tail -n 30 "$log" >&2; return 1; }
    sleep 10
  done
  apt-get "${opts[@]}" install -y -qq podman runc >>"$log" 2>&1 || { tail -n 30 "$log" >&2; return 1; }
}

podman_() {
  local conf=${PODMAN_CONF_DIR:-${TMPDIR:-/tmp}/manila-setup-podman}/containers.conf
  if [[ ! -f $conf ]]; then
    mkdir -p "$(dirname "$conf")"
    printf '[containers]\ndefault_ulimits = []\n' >"$conf"
  fi
  local root=()
  [[ -n ${PODMAN_ROOT:-} ]] && root=(--root "$PODMAN_ROOT/root" --runroot "$PODMAN_ROOT/run")
  CONTAINERS_CONF=$conf podman "${root[@]}" --storage-driver vfs --runtime runc --cgroup-manager cgroupfs "$@"
}
