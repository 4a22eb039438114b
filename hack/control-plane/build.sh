#!/usr/bin/env bash
# Build (or reuse) the real Kubernetes control plane zkop's tests run on: kube-apiserver and
# kube-controller-manager from k8s.io/kubernetes at the release pinned in kubernetes-<minor>/go.mod, and
# etcd from etcd/go.mod. Test and build tooling only: nothing here is part of what zkop ships.
#
#   hack/control-plane/build.sh [--version MINOR] [--cached]   # MINOR: 1.37 (default) or 1.35
#
# Prints the directory holding kube-apiserver, kube-controller-manager and etcd as its last line.
# --cached builds nothing: it prints the directory if the binaries are there, else exits 1 silently.
# Concurrent runs for one minor (two test sessions, CI's background build) take turns on a lock file
# beside the cache, so the second finds what the first built instead of clobbering its work.
# Binaries land in a version-keyed cache outside the repository,
#   ${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/control-plane/<minor>-<release>-<go>-<hash>/
# where <hash> covers the go.mod/go.sum files and this script, so a changed pin builds anew and an
# unchanged one is reused by every later run on the machine. Go's module and build caches are Go's own
# (GOMODCACHE, GOCACHE). A cold build of one minor takes about 15 minutes on two cores.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
minor=1.37
cached_only=
while [ $# -gt 0 ]; do
  case "$1" in
    --cached) cached_only=1; shift ;;
    --version) minor=${2:?--version needs a minor such as 1.37}; shift 2 ;;
    --version=*) minor=${1#--version=}; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
done
k8s_mod="$here/kubernetes-$minor"
if [ ! -f "$k8s_mod/go.mod" ]; then
  echo "build.sh: no Kubernetes $minor module (have: $(cd "$here" && ls -d kubernetes-* | sed 's/kubernetes-//' | tr '\n' ' '))" >&2
  exit 2
fi
command -v go >/dev/null || { echo "build.sh: go is not on PATH (Go 1.26 builds the control plane)" >&2; exit 1; }

release=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$k8s_mod/go.mod")
etcd_release=$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$here/etcd/go.mod")
go_version=$(go env GOVERSION)
hash=$(cat "$k8s_mod/go.mod" "$k8s_mod/go.sum" "$here/etcd/go.mod" "$here/etcd/go.sum" "$0" | sha256sum | cut -c1-12)
cache=${ZKOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/zkop}/control-plane
bin="$cache/$minor-$release-etcd$etcd_release-$go_version-$hash"
built() { [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] && [ -x "$bin/etcd" ]; }

if built; then
  echo "$bin"
  exit 0
fi
[ -z "$cached_only" ] || exit 1
mkdir -p "$cache"
exec 9>"$cache/.build-$minor.lock"
flock 9
if built; then  # another run built it while this one waited
  echo "$bin"
  exit 0
fi

export CGO_ENABLED=0 GOFLAGS="-modcacherw -mod=readonly -buildvcs=false"
work="$bin.partial"
rm -rf "$work"
mkdir -p "$work"
started=$(date +%s)
# The version k/k's hack/lib/version.sh stamps; without it /version says v0.0.0-master.
major=${release#v}; major=${major%%.*}
minor_num=${release#v*.}; minor_num=${minor_num%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$release -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor_num"
  ldflags="$ldflags -X $pkg.gitTreeState=clean"
done
echo "building kube-apiserver and kube-controller-manager $release with $go_version (cold: about 15 minutes)" >&2
(cd "$k8s_mod" && go build -trimpath -ldflags "$ldflags" -o "$work/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager)
echo "building etcd $etcd_release" >&2
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$work/etcd" go.etcd.io/etcd/server/v3)
rm -rf "$bin"
mv "$work" "$bin"
echo "built $(du -sh "$bin" | cut -f1) in $(( $(date +%s) - started )) s: $bin" >&2
echo "$bin"
