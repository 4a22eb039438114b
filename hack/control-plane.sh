#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for zkop: etcd, kube-apiserver and kube-controller-manager
# built from source (hack/control-plane/build.sh; the first build of a minor takes about 15 minutes).
#
#   hack/control-plane.sh up [--version MINOR]   # start it with zkop's CRD installed; last line: export KUBECONFIG=…
#   hack/control-plane.sh down                   # stop it and remove what it wrote
#   hack/control-plane.sh build [--version MINOR]
#
# MINOR is 1.37 (default) or 1.35. The plane's files live in $ZKOP_CONTROL_PLANE_DIR
# (default /tmp/zkop-control-plane-<uid>) until `down`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import zkop_testing' 2>/dev/null; then
  hack/setup-venv.sh >&2
fi
exec .venv/bin/python -m zkop_testing.controlplane "$@"
