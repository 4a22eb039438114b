#!/usr/bin/env bash
# mypy --strict over the tests, one directory at a time: each test directory is its own
# pytest rootdir-relative import space (conftest.py and support modules are not packages);
# the test doubles (tests/support/zkop_testing) are importable from every one of them.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
while IFS= read -r dir; do
  # A directory with __init__.py is a package below its parent; others import siblings by name.
  if [ -f "$dir/__init__.py" ]; then path=$(dirname "$dir"); else path="$dir"; fi
  MYPYPATH="$path:tests/support" .venv/bin/mypy --strict --explicit-package-bases --no-error-summary "$dir" || status=1
done < <(find tests -name 'test_*.py' -not -path 'tests/support/*' -printf '%h\n' | sort -u)
exit $status
