#!/usr/bin/env bash
# mypy --strict over the tests, one directory at a time: each test directory is its own
# pytest rootdir-relative import space (conftest.py and support modules are not packages).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for dir in tests/*/; do
  # A directory with __init__.py is a package below the repository root; others import siblings by name.
  if [ -f "$dir/__init__.py" ]; then path=.; else path="$dir"; fi
  MYPYPATH="$path" .venv/bin/mypy --strict --explicit-package-bases --no-error-summary "$dir" || status=1
done
exit $status
