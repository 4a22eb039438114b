#!/usr/bin/env bash
# Build (or reuse) Stakater Reloader for zkop's rolling-restart test (tests/cluster/test_reloader.py), at the
# release pinned in hack/reloader/go.mod (a module of its own, so that it keeps its release's dependency versions).
# Test tooling only: nothing here is part of what zkop ships.
#
#   hack/build-reloader.sh [--cached]
#
# Prints, as its last line, the directory holding `reloader` and `reloader.yaml` (Reloader's own rendered install,
# deployments/kubernetes/reloader.yaml of the module source the binary was built from: its RBAC is what the test
# runs Reloader under).
# --cached builds nothing: it prints the directory if the build is there, else exits 1 silently.
# Concurrent runs take turns on a lock file beside the cache. It builds into
#   ${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/reloader/reloader-<release>-<go>-<hash>/
# where <hash> covers hack/reloader/go.mod, go.sum and this script. Built as Reloader's Dockerfile builds it
# (CGO_ENABLED=0), stripped (-s -w). The Go on PATH builds it (GOTOOLCHAIN=local: Reloader v1.4.22's go.mod says
# go 1.26.8, this machine's Go). On two busy cores with Go's module cache holding the control plane's and Flux's
# modules: 58 s (49 MB here); a cache hit returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cached_only=
case "${1:-}" in
  "") ;;
  --cached) cached_only=1 ;;
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "build-reloader.sh: unknown argument: $1" >&2; exit 2 ;;
esac
command -v go >/dev/null || { echo "build-reloader.sh: go is not on PATH (Go 1.26.8 builds Reloader)" >&2; exit 1; }
export GOTOOLCHAIN=local

release=$(awk '$1 == "require" && $2 == "github.com/stakater/Reloader" {print $3}' "$here/reloader/go.mod")
go_version=$(go env GOVERSION)
hash=$(cat "$here"/reloader/go.{mod,sum} "$0" | sha256sum | cut -c1-12)
cache=${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/reloader
dir="$cache/reloader-$release-$go_version-$hash"

built() { [ -x "$dir/reloader" ] && [ -f "$dir/reloader.yaml" ]; }
if built; then
  echo "$dir"
  exit 0
fi
[ -z "$cached_only" ] || exit 1
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
if built; then  # another run built it while this one waited
  echo "$dir"
  exit 0
fi

export CGO_ENABLED=0 GOFLAGS="-modcacherw -mod=readonly -buildvcs=false"
work="$dir.partial"
rm -rf "$work"
mkdir -p "$work"
started=$(date +%s)
echo "building Stakater Reloader $release with $go_version" >&2
(cd "$here/reloader" && go build -trimpath -ldflags "-s -w" -o "$work/reloader" github.com/stakater/Reloader)
source_dir=$(cd "$here/reloader" && go list -m -f '{{.Dir}}' github.com/stakater/Reloader)
cp "$source_dir/deployments/kubernetes/reloader.yaml" "$work/reloader.yaml"
chmod u+w "$work/reloader.yaml"
rm -rf "$dir"
mv "$work" "$dir"
echo "built $(du -sh "$dir" | cut -f1) in $(( $(date +%s) - started )) s: $dir" >&2
echo "$dir"
