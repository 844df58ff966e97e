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
