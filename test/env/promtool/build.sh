#!/usr/bin/env bash
# Installs promtool, which checks the operator's alert rules (assets/prometheusrule.yaml) and runs
# their unit tests (test/alerts), at a pinned version from the Go module proxy, into a cache
# folder keyed by that version (a second run is instant). Prints the path of the promtool binary
# on standard output, timings on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

# Prometheus tags its Go module v0.X.Y for its release 3.X.Y: v0.316.0 is Prometheus 3.16.0.
PROMTOOL_VERSION=v0.316.0 # github.com/prometheus/prometheus
# remove_all_sd leaves out Prometheus' service discovery plugins (Kubernetes, AWS, Azure, GCE,
# ...), which the rule checks and tests never use: measured cold, 166 CPU-seconds instead of 433.
PROMTOOL_TAGS=remove_all_sd
dir="$MANILA_SETUP_CACHE/promtool/promtool-${PROMTOOL_VERSION#v}_$PROMTOOL_TAGS"

if [[ -x $dir/promtool && -f $dir/.complete ]]; then
  echo "$dir/promtool"
  exit 0
fi
rm -rf "$dir" "$dir.tmp"
mkdir -p "$dir.tmp"
step "installing promtool $PROMTOOL_VERSION (cold: about 3 CPU-minutes)"
# Outside any module (GOFLAGS cleared): `go install pkg@version` resolves promtool's own go.mod.
GOBIN="$dir.tmp" GOFLAGS= GOWORK=off GOTOOLCHAIN=local \
  go install -tags "$PROMTOOL_TAGS" "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION"
touch "$dir.tmp/.complete"
mv "$dir.tmp" "$dir"
echo "$dir/promtool"
