#!/usr/bin/env bash
# Build (or reuse) Helm for zkop's chart tests (tests/chart, tests/cluster/test_install.py) and the release
# workflow's `helm package`, at the release pinned in hack/helm/go.mod. Test and release tooling only.
#
#   hack/build-helm.sh
#
# Prints, as its last line, the path of the helm binary. Builds into a version-keyed cache outside the
# repository (like hack/control-plane/build-flux.sh):
#   ${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/helm/helm-<release>-<go>-<hash>/helm
# where <hash> covers hack/helm/go.mod, go.sum and this script. Built as Helm's Makefile builds it
# (CGO_ENABLED=0, -trimpath, -s -w, the version stamped into helm.sh/helm/v4/internal/version). The Go on PATH
# builds it (GOTOOLCHAIN=local). Cold (Helm's modules not yet downloaded) on two busy cores: see README
# ("Installing with Helm"); a cache hit returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "build-helm.sh: unknown argument: $1" >&2; exit 2 ;;
esac
command -v go >/dev/null || { echo "build-helm.sh: go is not on PATH (Go 1.26 builds Helm)" >&2; exit 1; }
export GOTOOLCHAIN=local

release=$(awk '$1 == "require" && $2 == "helm.sh/helm/v4" {print $3}' "$here/helm/go.mod")
go_version=$(go env GOVERSION)
hash=$(cat "$here"/helm/go.{mod,sum} "$0" | sha256sum | cut -c1-12)
cache=${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/helm
bin="$cache/helm-$release-$go_version-$hash"

if [ -x "$bin/helm" ]; then
  echo "$bin/helm"
  exit 0
fi

export CGO_ENABLED=0 GOFLAGS="-modcacherw -mod=readonly -buildvcs=false"
work="$bin.partial"
rm -rf "$work"
mkdir -p "$work"
started=$(date +%s)
echo "building helm $release with $go_version" >&2
(cd "$here/helm" && go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$release -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  -o "$work/helm" helm.sh/helm/v4/cmd/helm)
rm -rf "$bin"
mv "$work" "$bin"
echo "built $(du -sh "$bin" | cut -f1) in $(( $(date +%s) - started )) s: $bin" >&2
echo "$bin/helm"
