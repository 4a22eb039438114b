#!/usr/bin/env bash
# Build zkop's image without a Docker engine and run it the way the Deployment runs it.
#
#   hack/image-smoke.sh                          stand-in base (mmdebstrap) → buildah bud → run → clean up
#   hack/image-smoke.sh --python-image REF       build FROM REF instead (e.g. docker.io/library/python:3.11.11-slim-bookworm)
#   hack/image-smoke.sh --image REF              skip the build: smoke-test REF (containers-storage name,
#                                                docker-daemon:zkop:ci, docker://…, oci-archive:…)
#   hack/image-smoke.sh --keep-base              keep the stand-in base image for the next run (saves ~75 s)
#
# The run (hack/image_smoke.py): the image's root filesystem, mounted with `buildah mount`, runs
# under bubblewrap as uid/gid 65532 with a read-only root, a tmpfs /tmp (the Deployment's only
# writable mount) and the ZooKeeper credentials and kubeconfig mounted read-only; it must pass
# /readyz and converge a ZooKeeperConfig against a real ZooKeeper and the in-memory API server,
# both on loopback. Podman is not used: crun cannot set rlimits on these machines.
#
# Needs root, buildah, bwrap (bubblewrap), mmdebstrap (unless --python-image or --image),
# Debian's zookeeper package and .venv (hack/setup-venv.sh). Everything it creates (images,
# containers, mounts, temporary files) is removed on exit, also on failure or Ctrl-C; leftovers
# of an interrupted earlier run are removed first. Exit 0: pass; 1: a check failed; 2: usage;
# 3: a tool is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=localhost/zkop-image-smoke-base:bookworm
IMAGE=localhost/zkop-image-smoke:latest
CONTAINER=zkop-image-smoke
python_image=""
image=""
keep_base=0

say() { printf 'image-smoke: %s\n' "$*"; }
die() { printf 'image-smoke: FAIL: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --python-image) [ $# -ge 2 ] || usage; python_image=$2; shift 2 ;;
    --image) [ $# -ge 2 ] || usage; image=$2; shift 2 ;;
    --keep-base) keep_base=1; shift ;;
    -h|--help) usage ;;
    *) say "unknown argument: $1"; usage ;;
  esac
done

need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    printf 'image-smoke: %s not found: %s\n' "$1" "$2" >&2
    exit 3
  fi
}
[ "$(id -u)" = 0 ] || { echo "image-smoke: run as root (buildah and the mount namespace need it)" >&2; exit 3; }
need buildah "apt-get install -y buildah"
need bwrap "apt-get install -y bubblewrap"
need setpriv "apt-get install -y util-linux"
if [ -z "$image" ] && [ -z "$python_image" ]; then
  need mmdebstrap "apt-get install -y mmdebstrap"
fi
[ -x .venv/bin/python ] || { echo "image-smoke: .venv missing: run hack/setup-venv.sh" >&2; exit 3; }

workdir=$(mktemp -d /tmp/zkop-image-smoke-sh.XXXXXX)
use_standin=0
[ -n "$image" ] || [ -n "$python_image" ] || use_standin=1
pulled_id=""

remove_leftovers() {
  # Our containers (unmounted, removed) and our image tag; never anything else in the store.
  local name
  for name in "$CONTAINER" "$CONTAINER-base"; do
    if buildah containers --format '{{.ContainerName}}' 2>/dev/null | grep -qx "$name"; then
      buildah umount "$name" >/dev/null 2>&1 || true
      buildah rm "$name" >/dev/null 2>&1 || true
    fi
  done
  buildah rmi -f "$IMAGE" >/dev/null 2>&1 || true
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  remove_leftovers
  if [ "$use_standin" = 1 ] && [ "$keep_base" = 0 ]; then
    buildah rmi -f "$BASE_IMAGE" >/dev/null 2>&1 || true
  fi
  if [ -n "$pulled_id" ]; then
    buildah rmi -f "$pulled_id" >/dev/null 2>&1 || true
  fi
  rm -rf "$workdir"
  if [ "$rc" = 0 ]; then say "cleaned up"; else say "cleaned up (exit $rc)"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start=$(date +%s)
remove_leftovers

if [ -z "$image" ]; then
  if [ -z "$python_image" ]; then
    if [ "$keep_base" = 1 ] && buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
      say "reusing the stand-in base $BASE_IMAGE (--keep-base)"
    else
      # python:3.11-slim-bookworm's stand-in: Debian bookworm's own Python 3.11 and pip, with
      # `python`/`pip` on PATH and pip allowed to install system-wide (as in the official image).
      say "making the stand-in base for python:3.11-slim-bookworm with mmdebstrap (about a minute)"
      buildah rmi -f "$BASE_IMAGE" >/dev/null 2>&1 || true
      # shellcheck disable=SC2016 # the hooks get $1 (the root) from mmdebstrap
      if ! mmdebstrap --variant=minbase \
          --include=python3,python3-pip,python3-setuptools,python3-wheel,ca-certificates \
          --customize-hook='rm -f "$1"/usr/lib/python3.*/EXTERNALLY-MANAGED' \
          --customize-hook='ln -sf python3 "$1"/usr/bin/python; ln -sf pip3 "$1"/usr/bin/pip' \
          --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
          bookworm "$workdir/base.tar" "deb http://deb.debian.org/debian bookworm main" \
          </dev/null >"$workdir/mmdebstrap.log" 2>&1; then
        tail -30 "$workdir/mmdebstrap.log" >&2
        die "mmdebstrap failed"
      fi
      base=$(buildah from --name "$CONTAINER-base" scratch)
      buildah add "$base" "$workdir/base.tar" / >/dev/null
      rm -f "$workdir/base.tar"
      buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --env LANG=C.UTF-8 --cmd python3 "$base"
      buildah commit -q --rm "$base" "$BASE_IMAGE" >/dev/null
    fi
    python_image=$BASE_IMAGE
  fi

  say "building ./Dockerfile FROM $python_image (buildah bud --isolation chroot)"
  build_args=(--isolation chroot --layers=false --pull=missing
              --build-arg "PYTHON_IMAGE=$python_image"
              --build-arg "REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
              --build-arg "CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
              -t "$IMAGE")
  # pip in the build stage must trust what this machine trusts (a TLS-inspecting proxy, say):
  # the host's CA bundle is bind-mounted for the RUN steps only, never copied into the image.
  if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    build_args+=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
  fi
  if ! buildah bud "${build_args[@]}" . >"$workdir/build.log" 2>&1; then
    tail -40 "$workdir/build.log" >&2
    die "buildah bud failed"
  fi
  # shellcheck disable=SC2016
  grep -E '^zkop [0-9]' "$workdir/build.log" | sed 's/^/image-smoke: the build ran `zkop --version`: /' || true
  image=$IMAGE
else
  say "smoke-testing $image (no build)"
  # An image this script pulls into the store is removed again; one that was there is left alone.
  buildah inspect --type image "$image" >/dev/null 2>&1 || pulled=1
fi

buildah from -q --pull=missing --name "$CONTAINER" "$image" >/dev/null
if [ "${pulled:-0}" = 1 ]; then
  pulled_id=$(buildah inspect --type container --format '{{.FromImageID}}' "$CONTAINER")
fi
rootfs=$(buildah mount "$CONTAINER")
buildah inspect --type container "$CONTAINER" >"$workdir/config.json"
size=$(du -sh --apparent-size "$rootfs" 2>/dev/null | cut -f1)
say "image root filesystem mounted at $rootfs ($size)"

# No test doubles in the image: neither the test-support package nor anything from tests/.
doubles=$(find "$rootfs" -xdev \( -name zkop_testing -o -path '*/site-packages/zkop/testing' \
  -o -path '*/dist-packages/zkop/testing' -o -path '*/site-packages/tests' -o -path '*/dist-packages/tests' \
  -o -name 'zkop_testing.pth' \) -print 2>/dev/null | sed "s|^$rootfs||")
[ -z "$doubles" ] || die "test doubles in the image: $doubles"
say "no test doubles in the image (zkop_testing, zkop/testing, tests/)"

.venv/bin/python hack/image_smoke.py --rootfs "$rootfs" --image-config "$workdir/config.json" \
  || die "the image did not pass (see above)"

say "PASS in $(( $(date +%s) - start )) s"
