#!/usr/bin/env bash
# Installs the linters `make lint` runs beside gofmt and go vet: staticcheck and goimports, at
# pinned versions from the Go module proxy, into a cache folder keyed by those versions (a second
# run is instant). Prints the folder on standard output, timings on stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib.sh"

STATICCHECK_VERSION=v0.8.2 # honnef.co/go/tools
GOIMPORTS_VERSION=v0.41.0  # golang.org/x/tools
dir="$MANILA_SETUP_CACHE/lint/staticcheck-${STATICCHECK_VERSION#v}_goimports-${GOIMPORTS_VERSION#v}"

if [[ -x $dir/staticcheck && -x $dir/goimports && -f $dir/.complete ]]; then
  echo "$dir"
  exit 0
fi
rm -rf "$dir"
mkdir -p "$dir.tmp"
step "installing staticcheck $STATICCHECK_VERSION and goimports $GOIMPORTS_VERSION (cold: about a minute)"
# Outside any module (GOFLAGS cleared): `go install pkg@version` resolves each tool's own go.mod.
for tool in "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" "golang.org/x/tools/cmd/goimports@$GOIMPORTS_VERSION"; do
  GOBIN="$dir.tmp" GOFLAGS= GOWORK=off GOTOOLCHAIN=local go install "$tool"
done
touch "$dir.tmp/.complete"
mv "$dir.tmp" "$dir"
echo "$dir"
