"""The ZooKeeperEnsemble controller's writes to the API server — its finalizer and its status — and its dry-run seam.

The reconciler makes every change through the :class:`EnsembleWriter` it was built with, chosen once by
:func:`zkop.ensembles.controller.setup`: :class:`ApiWriter` writes; :class:`DryRunWriter` (``zkop run
--dry-run``) adds no finalizer, so the reconciler never branches on the dry run. Both are the ZooKeeperConfig's
dry-run rules (docs/operations.md, "Dry run"): the status is still reported (it is the object's own report, and
an ensemble's session only reads in a dry run), and a finalizer left by an earlier real run is still removed
once no ZooKeeperConfig needs the ensemble, so a deletion never blocks on a dry run.

The finalizer patch is a JSON merge patch carrying ``metadata.resourceVersion`` (a stale object is refused
with 409 Conflict and the reconcile retried); the status patch goes to the ``/status`` subresource.
"""

from __future__ import annotations

from typing import Any, Protocol

from zkop.ensembles.spec import FINALIZER, GROUP, PLURAL, VERSION
from zkop.kube.client import JSON, MERGE_PATCH, ApiException, resource_path
from zkop.zkconfig.objects import finalizers

__all__ = ["ApiWriter", "DryRunWriter", "EnsembleWriter", "KubeRequests"]


class KubeRequests(Protocol):
    """What the writer needs from :class:`~zkop.kube.client.KubeClient`."""

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str | None = None, timeout: Any = None) -> JSON: ...


class EnsembleWriter(Protocol):
    """Every change the ZooKeeperEnsemble reconciler makes to the API server."""

    def add_finalizer(self, obj: JSON) -> JSON | None:
        """Make sure ``obj`` carries zkop's finalizer before its session is opened; the object to go on with, or
        ``None`` if it is gone."""
        ...

    def remove_finalizer(self, obj: JSON) -> None:
        """Remove zkop's finalizer from ``obj`` being deleted (its runtime is closed); gone already is fine."""
        ...

    def patch_status(self, obj: JSON, status: JSON) -> None:
        """Merge ``status`` into ``obj``'s ``/status``; gone already is fine."""
        ...


class ApiWriter:
    """The writer of a real run: every change is a request to the API server.

    Args:
        client: JSON client.
    """

    def __init__(self, client: KubeRequests) -> None:
        self.client = client

    def add_finalizer(self, obj: JSON) -> JSON | None:
        """Add zkop's finalizer; the updated object, or ``None`` if it is gone.

        Raises:
            ApiException: the PATCH failed (409 for a stale ``obj``); 404 excepted.
        """
        return self._set_finalizers(obj, [*finalizers(obj), FINALIZER])

    def remove_finalizer(self, obj: JSON) -> None:
        """Remove zkop's finalizer (the other finalizers stay).

        Raises:
            ApiException: the PATCH failed (409 for a stale ``obj``); 404 excepted.
        """
        self._set_finalizers(obj, [f for f in finalizers(obj) if f != FINALIZER])

    def patch_status(self, obj: JSON, status: JSON) -> None:
        """Merge-patch ``obj``'s ``/status`` with ``status``.

        Raises:
            ApiException: the PATCH failed; 404 excepted (deleted meanwhile, nothing to report on).
        """
        try:
            self.client.request("PATCH", resource_path(GROUP, VERSION, PLURAL, None, obj["metadata"]["name"], "status"),
                                body={"status": status}, content_type=MERGE_PATCH)
        except ApiException as err:
            if err.status != 404:
                raise

    def _set_finalizers(self, obj: JSON, values: list[str]) -> JSON | None:
        meta = obj["metadata"]
        body = {"metadata": {"finalizers": values or None, "resourceVersion": meta["resourceVersion"]}}
        try:
            updated: JSON = self.client.request("PATCH", resource_path(GROUP, VERSION, PLURAL, None, meta["name"]),
                                                body=body, content_type=MERGE_PATCH)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return updated


class DryRunWriter(ApiWriter):
    """The writer of ``zkop run --dry-run``: no finalizer is added (nothing is written to ZooKeeper, so there is
    nothing to clean up); status and the removal of a finalizer an earlier real run left go to the API server."""

    def add_finalizer(self, obj: JSON) -> JSON | None:
        """``obj`` unchanged: no finalizer is added in a dry run."""
        return obj
