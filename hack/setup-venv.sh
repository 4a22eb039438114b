#!/usr/bin/env bash
# Create .venv and install zkop with its test and bench extras (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
log=$(mktemp)
if ! .venv/bin/pip install -c constraints.txt -e '.[test,bench]' >"$log" 2>&1; then
  cat "$log"; echo "pip install failed" >&2; exit 1
fi
rm -f "$log"
# The test doubles (tests/support/zkop_testing) are not part of the zkop distribution: the tests, the demo
# and the benchmark import them from this checkout.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$(pwd)/tests/support" >"$site/zkop_testing.pth"
.venv/bin/python -c "import zkop, zkop_testing, kazoo, kubernetes"
