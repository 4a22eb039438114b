"""Requests read back from kube-apiserver's audit log: what the in-memory double's request log gave the tests.

:class:`~zkop_testing.controlplane.ControlPlane` logs every request at ``Metadata`` level (verb, user, the object's
resource, namespace, name and subresource); an event is written once the response is complete
(``ResponseComplete``), so a request the test has seen answered may take a moment to appear: :func:`settled`
waits for a request of its own, made after the ones the test counts.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass

from zkop.kube.client import ApiException, resource_path
from zkop_testing.controlplane import ControlPlane
from zkop_testing.waiting import wait_for

__all__ = ["WRITES", "Request", "requests", "settled"]

#: The verbs that change an object.
WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True)
class Request:
    """One completed request of the audit log."""

    verb: str
    user: str
    resource: str
    namespace: str
    name: str
    subresource: str


def requests(plane: ControlPlane, *, namespace: str, resource: str | None = None,
             verbs: Collection[str] | None = None, user: str | None = None) -> list[Request]:
    """The completed requests (``ResponseComplete``) on objects of ``namespace`` (``""``: cluster-scoped ones, such
    as TokenReviews) so far, in log order, optionally
    only those on ``resource``, with a verb of ``verbs``, by ``user`` (e.g.
    ``system:serviceaccount:zkop-system:zkop``)."""
    found = []
    for event in plane.audit_events():
        ref = event.get("objectRef") or {}
        if event.get("stage") != "ResponseComplete" or ref.get("namespace", "") != namespace:
            continue
        request = Request(verb=str(event.get("verb", "")), user=str((event.get("user") or {}).get("username", "")),
                          resource=str(ref.get("resource", "")), namespace=namespace, name=str(ref.get("name", "")),
                          subresource=str(ref.get("subresource", "")))
        if ((resource is None or request.resource == resource) and (verbs is None or request.verb in verbs)
                and (user is None or request.user == user)):
            found.append(request)
    return found


def settled(plane: ControlPlane, namespace: str) -> None:
    """Return once a marker request (a GET of a ConfigMap of a random name in ``namespace``, answered 404) is in the
    audit log: the requests completed before this call are logged by then (the log backend writes each event as
    its request completes).

    Raises:
        TimeoutError: the marker did not appear within :data:`~zkop_testing.waiting.EVENTUALLY`.
    """
    name = f"audit-marker-{uuid.uuid4().hex[:10]}"
    with plane.admin() as admin:
        try:
            admin.request("GET", resource_path("", "v1", "configmaps", namespace, name))
        except ApiException as err:
            if err.status != 404:
                raise
    wait_for(lambda: any(r.name == name for r in requests(plane, namespace=namespace, resource="configmaps")),
             interval=0.1, message="the audit log caught up")
