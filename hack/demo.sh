#!/usr/bin/env bash
# One command from a fresh machine to zkop running locally:
# installs Java and Maven if missing, resolves the test suite's default ZooKeeper (the newest line, from Maven
# Central: hack/zookeeper-lines.sh; ZKOP_ZOOKEEPER_DEFAULT=debian: Debian's package, installed if missing),
# creates or updates .venv (hack/setup-venv.sh), then runs
# hack/demo.py (a ZooKeeper server, the in-memory API server, `zkop run`, examples/ applied, and
# what converged: kubectl get zkc, znode values and ACLs, Events, ownership records).
# Every step prints a line with the elapsed seconds; a long step prints a heartbeat every 10 s.
# Nothing is left behind: the setup's scratch directory goes on exit (also on Ctrl-C/SIGTERM),
# and demo.py stops what it starts and removes its own temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
ZKOP_DEMO_START=$(date +%s)
export ZKOP_DEMO_START
say() { printf '>> [%3ds] %s\n' "$(($(date +%s) - ZKOP_DEMO_START))" "$*"; }

job=""
scratch=$(mktemp -d "${TMPDIR:-/tmp}/zkop-demo-setup.XXXXXX")
cleanup() {
  if [ -n "$job" ]; then kill -- "-$job" 2>/dev/null || true; wait "$job" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# run_step DESCRIPTION COMMAND...: say what it does, run it in its own session (so clean-up can stop
# all of it), print a heartbeat every 10 s, fail with its exit code. Temp files it makes go to $scratch.
run_step() {
  local what=$1 n=0 rc=0; shift
  say "$what"
  TMPDIR=$scratch setsid "$@" &
  job=$!
  while kill -0 "$job" 2>/dev/null; do
    sleep 1; n=$((n + 1))
    if [ $((n % 10)) -eq 0 ]; then say "... still ${what%% (*}"; fi
  done
  wait "$job" || rc=$?
  job=""
  if [ "$rc" -ne 0 ]; then say "failed: $what (exit $rc)"; exit "$rc"; fi
}

# The ZooKeeper server demo.py starts is the test harness's default (zkop_testing.zookeeper.find_zookeeper).
zk_default=${ZKOP_ZOOKEEPER_DEFAULT:-}
if [ "$zk_default" = debian ] || { [ -z "$zk_default" ] && [ -n "${ZKOP_ZOOKEEPER_JAR:-}" ]; }; then
  zk_package=zookeeper; zk_ready() { [ -f "${ZKOP_ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}" ]; }
else
  zk_package=maven; zk_ready() { command -v mvn >/dev/null; }
fi
if ! { command -v java >/dev/null && zk_ready && command -v krb5-config >/dev/null; }; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  run_step "installing Debian's $zk_package package (and Java), and libkrb5-dev to build the kerberos test dependency (apt-get; a minute or two)" \
    sh -c "$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $zk_package libkrb5-dev >/dev/null"
fi
if [ "$zk_package" = zookeeper ]; then
  say "ZooKeeper is installed ($(readlink -f "${ZKOP_ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}"))"
else
  zk_line=$zk_default  # a line (3.9) or a release (3.9.5); unset: the newest line the tests pin
  if [ -z "$zk_line" ] || [ "$zk_line" = default ]; then
    zk_line=$(awk '!/^#/ && NF == 2 {line = $1} END {print line}' tests/support/zookeeper-lines/versions)
  fi
  run_step "ZooKeeper $zk_line from Maven Central into ~/.cache/zkop/zookeeper (hack/zookeeper-lines.sh; under a minute the first time, instant afterwards)" \
    sh -c "hack/zookeeper-lines.sh '$zk_line' >/dev/null"
fi

# setup-venv.sh runs pip every time (~40 s even when nothing changed); skip it while .venv is newer
# than what it installs from. ZKOP_DEMO_SETUP=1 forces it.
stamp=""
if [ -x .venv/bin/python ]; then
  stamp="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)/zkop_testing.pth"
fi
if [ "${ZKOP_DEMO_SETUP:-}" != "1" ] && [ -n "$stamp" ] && [ "$stamp" -nt pyproject.toml ] \
   && [ "$stamp" -nt constraints.txt ] && .venv/bin/python -c 'import zkop, zkop_testing, kazoo, kubernetes' 2>/dev/null; then
  say ".venv is up to date (ZKOP_DEMO_SETUP=1 hack/demo.sh reinstalls)"
elif [ -x .venv/bin/python ]; then
  run_step "updating .venv with hack/setup-venv.sh (pip install -e '.[test]'; about a minute)" hack/setup-venv.sh
else
  run_step "creating .venv with hack/setup-venv.sh (pip install -e '.[test]'; a few minutes the first time)" \
    hack/setup-venv.sh
fi

trap - EXIT INT TERM HUP
cleanup
exec .venv/bin/python hack/demo.py "$@"
