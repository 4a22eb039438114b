#!/usr/bin/env bash
# Build (or reuse) Flux's source-controller and kustomize-controller for zkop's Flux story test
# (tests/cluster/test_flux.py), at the releases pinned in flux/source-controller/go.mod and
# flux/kustomize-controller/go.mod (a module each, so that each keeps its release's dependency versions).
# Test tooling only: nothing here is part of what zkop ships.
#
#   hack/control-plane/build-flux.sh [--cached]
#
# Prints, as its last line, the directory holding source-controller, kustomize-controller and crds/ (the
# CRDs of both, copied from config/crd/bases of the module sources the binaries were built from).
# --cached builds nothing: it prints the directory if the build is there, else exits 1 silently.
# Concurrent runs take turns on a lock file beside the cache, as build.sh's do.
# Like build.sh (a sibling script, so that changing one does not rebuild the other's cache), it builds into
#   ${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/control-plane/flux-<sc>-<kc>-<go>-<hash>/
# where <hash> covers both go.mod/go.sum files and this script. Built as the controllers' Dockerfiles
# build them (CGO_ENABLED=0, -trimpath), stripped (-s -w). The Go on PATH builds them (GOTOOLCHAIN=local:
# a release whose go.mod needs a newer Go fails here rather than download a toolchain). Cold (empty module
# and build caches) on two busy cores: 27 minutes (3.1 GB of modules, 2.9 GB of Go build cache, 179 MB here);
# with Go's caches warm 40 s; a cache hit returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cached_only=
case "${1:-}" in
  "") ;;
  --cached) cached_only=1 ;;
  -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "build-flux.sh: unknown argument: $1" >&2; exit 2 ;;
esac
command -v go >/dev/null || { echo "build-flux.sh: go is not on PATH (Go 1.26 builds Flux's controllers)" >&2; exit 1; }
export GOTOOLCHAIN=local

release() {  # the pinned release of github.com/fluxcd/$1
  awk -v m="github.com/fluxcd/$1" '$1 == "require" && $2 == m {print $3}' "$here/flux/$1/go.mod"
}
sc_release=$(release source-controller)
kc_release=$(release kustomize-controller)
go_version=$(go env GOVERSION)
hash=$(cat "$here"/flux/source-controller/go.{mod,sum} "$here"/flux/kustomize-controller/go.{mod,sum} "$0" \
  | sha256sum | cut -c1-12)
cache=${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/control-plane
bin="$cache/flux-sc$sc_release-kc$kc_release-$go_version-$hash"

built() { [ -x "$bin/source-controller" ] && [ -x "$bin/kustomize-controller" ] && [ -d "$bin/crds" ]; }
if built; then
  echo "$bin"
  exit 0
fi
[ -z "$cached_only" ] || exit 1
mkdir -p "$cache"
exec 9>"$cache/.build-flux.lock"
flock 9
if built; then  # another run built it while this one waited
  echo "$bin"
  exit 0
fi

export CGO_ENABLED=0 GOFLAGS="-modcacherw -mod=readonly -buildvcs=false"
work="$bin.partial"
rm -rf "$work"
mkdir -p "$work/crds"
started=$(date +%s)
for name in source-controller kustomize-controller; do
  echo "building $name $(release "$name") with $go_version (cold: source-controller ~17, kustomize-controller ~10 minutes)" >&2
  (cd "$here/flux/$name" && go build -trimpath -ldflags "-s -w" -o "$work/$name" "github.com/fluxcd/$name")
  source_dir=$(cd "$here/flux/$name" && go list -m -f '{{.Dir}}' "github.com/fluxcd/$name")
  cp "$source_dir"/config/crd/bases/*.yaml "$work/crds/"
done
chmod u+w "$work"/crds/*.yaml
rm -rf "$bin"
mv "$work" "$bin"
echo "built $(du -sh "$bin" | cut -f1) in $(( $(date +%s) - started )) s: $bin" >&2
echo "$bin"
