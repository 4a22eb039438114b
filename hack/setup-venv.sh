#!/usr/bin/env bash
# Create .venv and install zkop with its test extra (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/pip install -q -c constraints.txt -e '.[test]' 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import zkop, kazoo, kubernetes" 
