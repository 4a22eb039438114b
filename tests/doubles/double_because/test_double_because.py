"""The collection-time rule of tests/integration (``zkop_testing.double_because``): the in-memory API server only with
a stated reason. Each case collects a small test directory whose conftest applies the rule, as
``tests/integration/conftest.py`` does."""

from __future__ import annotations

import pytest

CONFTEST = """
import pytest
from zkop_testing import double_because

def pytest_collection_modifyitems(items):
    double_because.check(items)

def pytest_collection_finish(session):
    for item in session.items:
        print("REAL" if item.get_closest_marker("real_control_plane") else "NOT", item.name)

@pytest.fixture
def apiserver():
    return "the double"

@pytest.fixture
def kube():
    return "a client"
"""
INI = "[pytest]\nmarkers =\n    double_because(reason): why\n    real_control_plane: real\n"


def collect(pytester: pytest.Pytester, **modules: str) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    pytester.makepyfile(**modules)
    return pytester.runpytest_inprocess("--collect-only", "-q", "-s", "-p", "no:cacheprovider")


def test_the_double_without_a_reason_stops_the_collection(pytester: pytest.Pytester) -> None:
    result = collect(
        pytester,
        test_fixture="def test_uses_it(apiserver):\n    pass\n",
        test_named="from zkop_testing.apiserver import ApiServer\n\n"
                   "def test_builds_one():\n    with ApiServer():\n        pass\n\n"
                   "def test_does_not():\n    pass\n",
        test_empty="import pytest\n\n@pytest.mark.double_because('  ')\ndef test_blank(apiserver):\n    pass\n",
        test_stale="import pytest\n\npytestmark = pytest.mark.double_because('once needed')\n\n"
                   "def test_pure():\n    pass\n",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines_random([
        "*test_fixture.py::test_uses_it: uses the in-memory API server without a reason*",
        "*test_named.py::test_builds_one: uses the in-memory API server without a reason*",
        "*test_empty.py::test_blank: uses the in-memory API server without a reason*",
        "*test_stale.py: marked double_because, but none of its marked tests uses Kubernetes*",
    ])
    assert "test_does_not" not in result.stderr.str()


def test_a_stated_reason_is_accepted_and_kubernetes_without_one_is_the_real_control_plane(
        pytester: pytest.Pytester) -> None:
    result = collect(
        pytester,
        test_double="import pytest\n\n"
                    "pytestmark = pytest.mark.double_because('drops a chosen watch: kube-apiserver has no such hook')"
                    "\n\ndef test_on_the_double(apiserver, kube):\n    pass\n",
        test_real="def test_kube(kube):\n    pass\n\ndef test_pure():\n    pass\n",
    )
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    result.stdout.fnmatch_lines_random(["NOT test_on_the_double", "REAL test_kube", "NOT test_pure"])
