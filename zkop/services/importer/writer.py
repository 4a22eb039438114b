"""The importer's writes: Services and EndpointSlices through the API server, with preconditions.

Every update is a JSON merge patch carrying the ``resourceVersion`` it was planned from, every
delete ``preconditions`` on uid and ``resourceVersion`` (``DeleteOptions``), so a concurrent change
becomes a 409 and a re-plan instead of a lost update or the deletion of a re-created object.

A create of an EndpointSlice that answers 409 AlreadyExists names a slice the importer's label-selected
cache does not hold. That is someone else's slice, unless this writer created it moments ago and the
watch event has not reached the cache yet (kube-apiserver delivers it after the POST's answer; the
slice informer's event then enqueues the Service again, and that reconcile plans from the cache): the
writer remembers the slices it created, so only a foreign one is reported as such.

The reconciler is built with one of two writers, chosen once by
:func:`zkop.services.importer.builder.build_service_importer`: :class:`ApiWriter` sends; :class:`DryRunWriter`
(``zkop run --dry-run``) sends nothing and logs and counts each action (:func:`zkop.runtime.dryrun.planned`)
instead, so the reconciler never branches on the dry run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import urllib3.exceptions

from zkop.kube.client import JSON, MERGE_PATCH, ApiException, resource_path
from zkop.runtime import dryrun
from zkop.runtime.controller import RetryableError, TerminalError
from zkop.services.importer import metrics
from zkop.services.importer.objects import CreateObject, DeleteObject, KubeAction, PatchObject, describe

__all__ = ["ApiWriter", "DryRunWriter", "KubeWriter"]

log = logging.getLogger(__name__)

#: The ``controller`` label of dry-run planned changes (the controller's name, as in :mod:`.builder`).
CONTROLLER = "service-import"

#: How many created EndpointSlice names a writer remembers (oldest forgotten first), and for how long (seconds):
#: far longer than a watch event takes to follow its write, short enough that a later foreign slice of the
#: same name (after the Service and its slices were deleted) is reported as foreign.
CREATED_MEMORY, CREATED_WINDOW = 10_000, 300.0

_GROUPS = {"services": ("", "v1"), "endpointslices": ("discovery.k8s.io", "v1")}


class KubeWriter(Protocol):
    """What the reconciler needs from :class:`~zkop.kube.client.KubeClient`."""

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str | None = None, timeout: Any = None) -> JSON: ...


class ApiWriter:
    """Sends :data:`~zkop.services.importer.plan.KubeAction` values to the API server.

    Args:
        client: the JSON client (anything with ``request``).
        namespace: the import namespace every object lives in.
    """

    def __init__(self, client: KubeWriter, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self._created: OrderedDict[str, float] = OrderedDict()  # EndpointSlice name → monotonic time created
        self._created_lock = threading.Lock()

    def _remember_created(self, name: str, created: bool) -> None:
        with self._created_lock:
            if created:
                self._created[name] = time.monotonic()
                self._created.move_to_end(name)
                while len(self._created) > CREATED_MEMORY:
                    self._created.popitem(last=False)
            else:
                self._created.pop(name, None)

    def created_here(self, name: str) -> bool:
        """Whether this writer created EndpointSlice ``name`` in the last :data:`CREATED_WINDOW` seconds (and has
        not deleted it since)."""
        with self._created_lock:
            created = self._created.get(name)
        return created is not None and time.monotonic() - created < CREATED_WINDOW

    def path(self, resource: str, name: str | None = None) -> str:
        """The API path of ``resource`` (or of object ``name``) in the import namespace."""
        group, version = _GROUPS[resource]
        return resource_path(group, version, resource, self.namespace, name)

    def execute(self, actions: Iterable[KubeAction]) -> None:
        """Send ``actions`` in order (see :meth:`execute_one`)."""
        for action in actions:
            self.execute_one(action)

    def execute_each(self, actions: Sequence[KubeAction]) -> list[str]:
        """Send every action on its own: one refused EndpointSlice never keeps the others from being written.

        A slice the API server refuses (422, 409, 5xx …) is reported and the next action is sent
        anyway, as the EndpointSlice controller syncs a Service's slices
        (``pkg/controller/endpointslice`` reconciler: each slice is one API call and an error is
        aggregated, not fatal to the rest). Two orderings from :func:`~.slices.plan_slices` are kept:
        the create after a failed delete of the same name is not sent (the pair replaces a slice
        whose ``addressType`` changed), and deletes of slices no longer wanted are held back while
        any write failed (so a failed create never leaves the Service with fewer endpoints).

        Returns:
            One message per failed or held-back action (empty: all done). The caller retries.
        """
        failures: list[str] = []
        failed_deletes: set[str] = set()
        for index, action in enumerate(actions):
            if isinstance(action, DeleteObject):
                paired = any(isinstance(later, CreateObject) and later.name == action.name
                             for later in actions[index + 1:])
                if failures and not paired:
                    failures.append(f"{describe(action)} held back until the writes before it succeed")
                    continue
            elif isinstance(action, CreateObject) and action.name in failed_deletes:
                continue
            try:
                self.execute_one(action)
            except (RetryableError, TerminalError) as err:
                log.warning("service-import: %s", err)
                failures.append(str(err))
                if isinstance(action, DeleteObject):
                    failed_deletes.add(action.name)
        return failures

    def execute_one(self, action: KubeAction) -> JSON | None:
        """Send one action; returns the object the API server answered with (``None`` for deletes).

        Raises:
            RetryableError: 409 (changed meanwhile), 404 on an update, 429, 5xx, transport errors.
            TerminalError: 400/422 (the object is invalid; a later ZooKeeper change re-enqueues the name).
        """
        result: JSON | None = None
        try:
            if isinstance(action, CreateObject):
                result = self.client.request("POST", self.path(action.resource), body=action.body)
                metrics.WRITES.labels(action.resource, "create").inc()
                if action.resource == "endpointslices":
                    self._remember_created(action.name, True)
            elif isinstance(action, PatchObject):
                result = self.client.request("PATCH", self.path(action.resource, action.name), body=action.patch,
                                             content_type=MERGE_PATCH)
                metrics.WRITES.labels(action.resource, "update").inc()
            else:
                self._delete(action)
        except ApiException as err:
            if err.status in (400, 422):
                raise TerminalError(f"{describe(action)} rejected: {err.status} {err.reason}: {err.body}") from err
            if err.status == 409 and isinstance(action, CreateObject) and action.resource == "endpointslices":
                if self.created_here(action.name):
                    log.info("service-import: EndpointSlice %s/%s, created moments ago, is not in the cache yet; "
                             "its watch event brings the Service back", self.namespace, action.name)
                    return None
                # Not in the (label-selected) cache, so it does not carry zkop's label: someone else's.
                log.warning("service-import: EndpointSlice %s/%s exists and is not owned by this zkop; left unchanged",
                            self.namespace, action.name)
                return None
            raise RetryableError(f"{describe(action)} failed: {err.status} {err.reason}") from err
        except (OSError, urllib3.exceptions.HTTPError) as err:
            raise RetryableError(f"{describe(action)} failed: {err}") from err
        log.debug("service-import: %s", describe(action))
        return result

    def _delete(self, action: DeleteObject) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions",
                "preconditions": {"uid": action.uid, "resourceVersion": action.resource_version}}
        try:
            self.client.request("DELETE", self.path(action.resource, action.name), body=body)
        except ApiException as err:
            if err.status == 404:
                if action.resource == "endpointslices":
                    self._remember_created(action.name, False)
                return
            raise
        if action.resource == "endpointslices":
            self._remember_created(action.name, False)
        metrics.DELETES.labels(action.resource).inc()
        log.info("service-import: deleted %s/%s/%s", action.resource, self.namespace, action.name)


class DryRunWriter(ApiWriter):
    """The writer of ``zkop run --dry-run``: sends nothing; logs and counts each action
    (:func:`zkop.runtime.dryrun.planned`)."""

    def execute_one(self, action: KubeAction) -> JSON | None:
        """Plan ``action``; a create answers with the body it would have sent (no ``uid``: what depends on the
        object is planned too, and no Event goes to an object that does not exist), anything else with ``None``."""
        verb = describe(action).split(" ", 1)[0]
        dryrun.planned(log, CONTROLLER, f"{self.namespace}/{action.name}", verb, describe(action))
        return action.body if isinstance(action, CreateObject) else None
