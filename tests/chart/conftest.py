"""The chart tests need Helm (``hack/build-helm.sh``): built before the first test runs, outside any test's timeout."""

from __future__ import annotations

import pytest
from zkop_testing.helm import build_before_tests


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build (or find) Helm once collection is done, before the first chart test."""
    if not session.config.option.collectonly:
        build_before_tests(session.items, ("test_chart_matches_kustomize.py",))
