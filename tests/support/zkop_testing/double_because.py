"""The rule that keeps tests/integration on the real control plane: the in-memory double only with a stated reason.

Issue 22 ("Real Kubernetes in every test run", item 3): a test that runs ``zkop run`` against Kubernetes does so on
the real kube-apiserver, etcd and kube-controller-manager (:mod:`zkop_testing.controlplane`); the in-memory API
server (:mod:`zkop_testing.apiserver`) stays only where the test says why -- fault injection the real server cannot
be made to do on demand, a request log the audit log does not give, the demo's fast start. The reason is a marker::

    pytestmark = pytest.mark.double_because("drops the watch of a chosen request: kube-apiserver has no such hook")

on the module (or ``@pytest.mark.double_because(...)`` on one test). :func:`check` runs at collection time
(``tests/integration/conftest.py``) and stops the run with a usage error naming each test that uses the double
without a reason, and each module whose marked tests use no Kubernetes at all (a stale reason). The fixtures
``kube`` and ``kubeconfig`` of tests/integration follow the marker: the double where it is given, the real control
plane otherwise.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import pytest

__all__ = ["MARKER", "REAL_MARKER", "check", "double_names", "uses_double"]

#: The marker that states why a test runs on the in-memory double; its one argument is the reason.
MARKER = "double_because"
#: Added by :func:`check` to a test that talks to the real control plane (the root conftest builds its binaries
#: before the first test runs, as for a test that asks for ``control_plane`` directly).
REAL_MARKER = "real_control_plane"
#: Fixtures that give the double itself.
_DOUBLE_FIXTURES = frozenset({"apiserver"})
#: Fixtures that give Kubernetes: the double or the real control plane, as the marker says.
_KUBE_FIXTURES = frozenset({"kube", "kubeconfig"})


def double_names(module: object) -> set[str]:
    """The names in ``module``'s namespace bound to something of :mod:`zkop_testing.apiserver` (or its
    ``apiserver_*`` siblings): a class or function the test can build the double with."""
    names = set()
    for name, value in vars(module).items():
        origin = getattr(value, "__module__", None) or ""
        if origin == "zkop_testing.apiserver" or origin.startswith("zkop_testing.apiserver_"):
            names.add(name)
    return names


def uses_double(item: pytest.Item) -> bool:
    """Whether ``item`` uses the in-memory API server: asks for the ``apiserver`` fixture (itself or through a
    fixture of its module), or names something of :mod:`zkop_testing.apiserver` in its own source."""
    if _DOUBLE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    function = getattr(item, "function", None)
    module = getattr(item, "module", None)
    if function is None or module is None:
        return False
    names = double_names(module)
    if not names:
        return False
    try:
        source = inspect.getsource(function)
    except (OSError, TypeError):
        return True  # cannot tell: the module imports the double, so a reason is asked for
    return any(name in source for name in names)


def _reason(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    return str(marker.args[0]).strip() if marker.args else ""


def check(items: Sequence[pytest.Item]) -> None:
    """Mark each test that talks to the real control plane (:data:`REAL_MARKER`); fail the collection on a test
    that uses the double without a reason, or a module that states one and uses no Kubernetes.

    Raises:
        pytest.UsageError: naming every offending test, with what to do.
    """
    problems: list[str] = []
    marked_modules: dict[str, bool] = {}  # module -> whether one of its marked tests uses Kubernetes
    for item in items:
        reason, kube = _reason(item), bool(_KUBE_FIXTURES & set(getattr(item, "fixturenames", ())))
        double = uses_double(item)
        if double and not reason:
            problems.append(f"{item.nodeid}: uses the in-memory API server without a reason; run it on the real "
                            f"control plane, or say why it cannot: pytest.mark.{MARKER}(\"...\")")
        if reason is not None:
            module = item.nodeid.split("::")[0]
            marked_modules[module] = marked_modules.get(module, False) or double or kube
        elif kube:
            item.add_marker(getattr(pytest.mark, REAL_MARKER))
    problems += [f"{module}: marked {MARKER}, but none of its marked tests uses Kubernetes; drop the marker"
                 for module, used in marked_modules.items() if not used]
    if problems:
        raise pytest.UsageError("tests/integration runs on the real control plane (issue 22):\n  "
                                + "\n  ".join(problems))
