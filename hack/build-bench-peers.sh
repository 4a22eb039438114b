#!/usr/bin/env bash
# Build (or reuse) the benchmark's Go peer of zkop (hack/bench/peers: a controller-runtime operator doing zkop's core
# job, issue 42), for `python -m hack.bench --scenario peers` and tests/bench/test_bench_peers.py.
# Benchmark tooling only: nothing here is part of what zkop ships.
#
#   hack/build-bench-peers.sh [--cached]
#
# Prints, as its last line, the directory holding the `zkop-go-peer` binary.
# --cached builds nothing: it prints the directory if the build is there, else exits 1 silently.
# Concurrent runs take turns on a lock file beside the cache. It builds into
#   ${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/bench-peers/<go>-<hash>/
# where <hash> covers hack/bench/peers/go.mod, go.sum, its Go sources and this script, with the Go module proxy's
# modules at the versions go.sum pins (controller-runtime v0.25.3, client-go v0.37.2, go-zookeeper v1.0.4),
# CGO_ENABLED=0, stripped (-s -w). The Go on PATH builds it (GOTOOLCHAIN=local). On two busy cores with Go's module
# cache holding the control plane's modules: about 2.5 minutes cold (33 MB); a cache hit returns at once.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src="$here/bench/peers"
cached_only=
case "${1:-}" in
  "") ;;
  --cached) cached_only=1 ;;
  -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "build-bench-peers.sh: unknown argument: $1" >&2; exit 2 ;;
esac
command -v go >/dev/null || { echo "build-bench-peers.sh: go is not on PATH (Go 1.26 builds the peer)" >&2; exit 1; }
export GOTOOLCHAIN=local

go_version=$(go env GOVERSION)
hash=$(cat "$src"/go.mod "$src"/go.sum "$src"/*.go "$0" | sha256sum | cut -c1-12)
cache=${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/bench-peers
dir="$cache/$go_version-$hash"

built() { [ -x "$dir/zkop-go-peer" ]; }
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
echo "building the Go peer (hack/bench/peers) with $go_version" >&2
(cd "$src" && go build -trimpath -ldflags "-s -w" -o "$work/zkop-go-peer" .)
rm -rf "$dir"
mv "$work" "$dir"
echo "built $(du -sh "$dir" | cut -f1) in $(( $(date +%s) - started )) s: $dir" >&2
echo "$dir"
