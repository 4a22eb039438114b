"""Kubernetes names for imported services, and who wins when two ZooKeeper services want one name.

Rules follow "Object Names and IDs" (kubernetes.io/docs/concepts/overview/working-with-objects/names;
the validators are :mod:`zkop.kube.validation`, port names :func:`zkop.services.naming.port_name`):

* a Service name is an RFC 1035 label (``validation.IsDNS1035Label``): at most 63 characters,
  lower-case alphanumerics or ``-``, starting with a letter and ending with an alphanumeric;
* Service and EndpointSlice port names are RFC 1123 labels (may start with a digit);
* EndpointSlice names are DNS subdomains (at most 253 characters).

:func:`service_name` maps a ZooKeeper service name (a Curator name, a Dubbo interface such as
``org.apache.dubbo.demo.DemoService``, a bridge record key) to a Service name: ``--import-prefix``
prepended, lower-cased, every other character replaced by ``-``, runs of ``-`` collapsed, ``-``
trimmed at both ends, ``svc-`` prepended if it would start with a digit, and, if still longer than
63 characters, cut to 54 and suffixed with ``-`` and 8 hex digits of the SHA-256 of the original
(so long names stay distinct). The mapping is many-to-one (``Orders`` and ``orders``, ``a.b``
and ``a-b``): :func:`winner` decides.

Collision rule (:func:`winner`): among the ZooKeeper service nodes mapping to one Service name,
the one created first (lowest ``czxid``, the zxid of the transaction that created it) is imported;
ties cannot happen (zxids are unique) but would fall back to the path. It depends only on what
ZooKeeper holds, so every reconcile and every replica picks the same winner and a newcomer never
takes a name over from an established service (the forward bridge's "oldest wins" rule,
:func:`zkop.ownership.oldest.oldest`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Protocol, TypeVar

from zkop.kube.validation import DNS1035_LABEL_MAX
from zkop.ownership.oldest import oldest
from zkop.services.naming import port_name, squash

__all__ = [
    "MAX_LABEL",
    "port_name",
    "service_name",
    "winner",
]

#: Longest Service name (an RFC 1035 label), characters.
MAX_LABEL = DNS1035_LABEL_MAX


def service_name(source: str, prefix: str = "") -> str | None:
    """The Service name for ZooKeeper service ``source`` (see the module docstring).

    Returns:
        A valid DNS-1035 label, or ``None`` when nothing usable is left (e.g. ``"___"``).
    """
    name = squash(prefix + source)
    if not name:
        return None
    if not name[0].isalpha():
        name = f"svc-{name}"
    if len(name) > MAX_LABEL:
        digest = hashlib.sha256((prefix + source).encode("utf-8")).hexdigest()[:8]
        name = f"{name[:MAX_LABEL - 9].rstrip('-')}-{digest}"
    return name


class _Candidate(Protocol):
    @property
    def path(self) -> str: ...

    @property
    def created_zxid(self) -> int: ...


C = TypeVar("C", bound=_Candidate)


def winner(candidates: Iterable[C]) -> C | None:
    """The candidate that keeps a contested Service name: lowest ``created_zxid``, then path.

    Returns ``None`` for no candidates.
    """
    return oldest(candidates, lambda c: (c.created_zxid, c.path))
