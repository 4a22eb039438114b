#!/usr/bin/env bash
# One command from a fresh machine to zkop running locally:
# installs Debian's ZooKeeper if missing, creates .venv, then runs hack/demo.py
# (a ZooKeeper server, the in-memory API server, `zkop run`, examples/ applied).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! { command -v java >/dev/null && [ -f /usr/share/java/zookeeper.jar ] && command -v krb5-config >/dev/null; }; then
  echo ">> installing Debian's zookeeper package (and libkrb5-dev, to build the kerberos test dependency)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq zookeeper libkrb5-dev >/dev/null
fi
echo ">> preparing .venv"
hack/setup-venv.sh
exec .venv/bin/python hack/demo.py "$@"
