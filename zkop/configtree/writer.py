"""A ZooKeeperConfigTree's writes — ZooKeeper ``multi`` requests, its finalizer, status and Events — the dry-run seam.

The reconciler is built with one of two writers, chosen once by :func:`zkop.configtree.builder.setup`:
:class:`ApiWriter` writes; :class:`DryRunWriter` (``zkop run --dry-run``) writes nothing to ZooKeeper and adds no
finalizer (each planned change logged and counted, :func:`zkop.runtime.dryrun.planned`), sends no Normal Event,
and reports the pass as docs/operations.md's dry-run rule says (``Ready=False``, reason ``DryRun``). The reconciler
never branches on the dry run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

import urllib3.exceptions

from zkop.configtree.spec import FINALIZER, GROUP, PLURAL, VERSION
from zkop.kube.client import JSON, MERGE_PATCH, ApiException, KubeClient, resource_path
from zkop.kube.events import EventRecorder
from zkop.runtime import dryrun
from zkop.runtime.cache.keys import meta_namespace_key
from zkop.runtime.controller import RetryableError
from zkop.runtime.ownwrites import OwnWrites
from zkop.zookeeper.actions import Action, CheckVersion, describe, operation
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["CONTROLLER", "DRY_RUN_REASON", "ApiWriter", "DryRunWriter"]

log = logging.getLogger(__name__)

CONTROLLER = "zookeeper-config-tree"
#: ``Ready`` reason of a tree whose writes a dry run planned.
DRY_RUN_REASON = "DryRun"


class ApiWriter:
    """Writes ZooKeeper, the finalizer, status and Events of ZooKeeperConfigTrees (the writer of a real run).

    Args:
        client: JSON client.
        recorder: Kubernetes Events.
        zookeeper: the adapter that executes the plans.
        own_writes: where the finalizer and status writes are announced (shared with the controller's update filter
            and read by the reconciler: :class:`~zkop.runtime.ownwrites.OwnWrites`, as for ZooKeeperConfigs, so a
            pass that reads a cache behind its own write never writes the same status twice); ``None``: one of its own.
    """

    #: Whether this writer makes the changes (False: it only plans them).
    writes = True

    def __init__(self, client: KubeClient, recorder: EventRecorder, zookeeper: ZooKeeperAdapter,
                 own_writes: OwnWrites | None = None) -> None:
        self.client, self.recorder, self.zookeeper = client, recorder, zookeeper
        self.own_writes = own_writes if own_writes is not None else OwnWrites(CONTROLLER)

    def execute(self, key: str, actions: Sequence[Action], *, atomic: bool,
                require: Sequence[CheckVersion] = (), zookeeper: ZooKeeperAdapter | None = None) -> None:
        """Execute one batch (one ``multi`` when ``atomic``) on ``zookeeper`` (the tree's ensemble's adapter;
        ``None``: the flags'), arming a data watch on every node created.

        Raises:
            ConcurrentModification, ZooKeeperUnavailable, ZooKeeperNoAuth: as :meth:`ZooKeeperAdapter.execute`.
        """
        (zookeeper or self.zookeeper).execute(actions, atomic=atomic, arm_watches=True, require=require)

    def set_finalizers(self, obj: JSON, finalizers: list[str]) -> JSON | None:
        """Merge-patch ``metadata.finalizers`` at the object's ``resourceVersion``; ``None`` if it is gone.

        Raises:
            RetryableError: a conflict (409) or the API server could not answer.
        """
        meta = obj["metadata"]
        body = {"metadata": {"finalizers": finalizers or None, "resourceVersion": meta["resourceVersion"]}}
        try:
            with self.own_writes.writing(meta_namespace_key(obj), obj) as respond:
                updated: JSON = self.client.request("PATCH", resource_path(GROUP, VERSION, PLURAL, meta["namespace"],
                                                                          meta["name"]),
                                                    body=body, content_type=MERGE_PATCH)
                respond(updated)
        except ApiException as err:
            if err.status == 404:
                return None
            raise RetryableError(f"finalizer of {meta['namespace']}/{meta['name']}: {err.status} {err.reason}") from err
        except (OSError, urllib3.exceptions.HTTPError) as err:
            raise RetryableError(f"finalizer of {meta['namespace']}/{meta['name']}: {err}") from err
        return updated

    def add_finalizer(self, obj: JSON) -> JSON | None:
        """Add this kind's finalizer (before anything is written to ZooKeeper); the updated object."""
        return self.set_finalizers(obj, [*(obj["metadata"].get("finalizers") or []), FINALIZER])

    def remove_finalizer(self, obj: JSON) -> None:
        """Remove this kind's finalizer (also in a dry run: the object is going away)."""
        self.set_finalizers(obj, [f for f in obj["metadata"].get("finalizers") or [] if f != FINALIZER])

    def patch_status(self, obj: JSON, status: JSON) -> None:
        """Merge-patch the tree's ``/status`` (deleted meanwhile: ignored), announced in :attr:`own_writes`.

        Raises:
            RetryableError: the API server refused or could not answer.
        """
        meta = obj["metadata"]
        try:
            with self.own_writes.writing(meta_namespace_key(obj), obj) as respond:
                respond(self.client.request(
                    "PATCH", resource_path(GROUP, VERSION, PLURAL, meta["namespace"], meta["name"], "status"),
                    body={"status": status}, content_type=MERGE_PATCH))
        except ApiException as err:
            if err.status != 404:
                raise RetryableError(f"status of {meta['namespace']}/{meta['name']}: {err.status}") from err
        except (OSError, urllib3.exceptions.HTTPError) as err:
            raise RetryableError(f"status of {meta['namespace']}/{meta['name']}: {err}") from err

    def event(self, obj: JSON, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        """One Event about the tree (queued; the recorder aggregates and rate-limits)."""
        self.recorder.event(obj, type_, reason, message)


class DryRunWriter(ApiWriter):
    """The writer of ``zkop run --dry-run`` (see the module docstring)."""

    writes = False

    def execute(self, key: str, actions: Sequence[Action], *, atomic: bool,
                require: Sequence[CheckVersion] = (), zookeeper: ZooKeeperAdapter | None = None) -> None:
        """Log and count each write; nothing is sent."""
        for action in actions:
            dryrun.planned(log, CONTROLLER, key, operation(action), describe(action))

    def add_finalizer(self, obj: JSON) -> JSON | None:
        """No finalizer: a dry run leaves nothing to clean up."""
        return obj

    def event(self, obj: JSON, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        """A Warning about what the pass found; a Normal Event (a change announced) is not sent."""
        if type_ == "Warning":
            super().event(obj, type_, reason, message)
