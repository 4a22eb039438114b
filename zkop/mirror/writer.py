"""The mirror's writes to the API server: its ConfigMap, its status, its Events — the dry-run seam.

The reconciler is built with one of two writers, chosen once by :func:`zkop.mirror.builder.build_mirrors`:
:class:`ApiWriter` writes; :class:`DryRunWriter` (``zkop run --dry-run``) writes no ConfigMap (it logs and counts
it, :func:`zkop.runtime.dryrun.planned`), sends no Normal Event, and reports the pass in the mirror's status as
docs/operations.md's dry-run rule says (``Ready=False``, reason ``DryRun``, the planned change named); Warnings
about what it found still go out. The reconciler never branches on the dry run.
Updates are JSON merge patches carrying the ``resourceVersion`` they were planned from, so a
concurrent change is a 409 and a new pass instead of a lost update.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Literal, Protocol

import urllib3.exceptions

from zkop.kube.client import JSON, MERGE_PATCH, ApiException, resource_path
from zkop.kube.events import EventRecorder
from zkop.mirror.decide import Decision
from zkop.runtime import dryrun
from zkop.runtime.controller import RetryableError, TerminalError
from zkop.runtime.statuspatch import patch_status

__all__ = ["DRY_RUN_REASON", "GROUP", "PLURAL", "VERSION", "AlreadyExists", "ApiWriter", "DryRunWriter"]

log = logging.getLogger(__name__)

CONTROLLER = "zookeeper-mirror"
GROUP, VERSION, PLURAL = "platform.example.com", "v1alpha1", "zookeepermirrors"
#: ``Ready`` condition reason of a mirror whose ConfigMap write a dry run planned (as a ZooKeeperConfig's).
DRY_RUN_REASON = "DryRun"


class KubeRequests(Protocol):
    """What the writer needs from :class:`~zkop.kube.client.KubeClient`."""

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str | None = None, timeout: Any = None) -> JSON: ...


class AlreadyExists(Exception):
    """The create answered 409: a ConfigMap of that name exists that the mirror's cache does not hold."""


class ApiWriter:
    """Writes ConfigMaps, mirror status and Events (the writer of a real run).

    Args:
        client: JSON client.
        recorder: Kubernetes Events.
    """

    def __init__(self, client: KubeRequests, recorder: EventRecorder) -> None:
        self.client = client
        self.recorder = recorder

    def get_config_map(self, namespace: str, name: str) -> JSON | None:
        """The ConfigMap ``namespace/name`` as the API server holds it, or ``None`` (a read: also in a dry run).

        Raises:
            RetryableError: the API server could not answer.
        """
        try:
            return self.client.request("GET", resource_path("", "v1", "configmaps", namespace, name))
        except ApiException as err:
            if err.status == 404:
                return None
            raise RetryableError(f"GET ConfigMap {namespace}/{name}: {err.status} {err.reason}") from err
        except (OSError, urllib3.exceptions.HTTPError) as err:
            raise RetryableError(f"GET ConfigMap {namespace}/{name}: {err}") from err

    def write_config_map(self, namespace: str, name: str, write: tuple[Literal["create", "patch"], JSON]) -> None:
        """Create or merge-patch the ConfigMap.

        Raises:
            AlreadyExists: the create met an existing ConfigMap.
            RetryableError: 409 on a patch, 404, 429, 5xx, transport errors.
            TerminalError: 400/422 (the API server refuses the object).
        """
        verb, body = write
        try:
            if verb == "create":
                self.client.request("POST", resource_path("", "v1", "configmaps", namespace), body=body)
            else:
                self.client.request("PATCH", resource_path("", "v1", "configmaps", namespace, name), body=body,
                                    content_type=MERGE_PATCH)
        except ApiException as err:
            if err.status == 409 and verb == "create":
                raise AlreadyExists(name) from err
            if err.status in (400, 422):
                raise TerminalError(f"{verb} ConfigMap {namespace}/{name} rejected: {err.status} {err.body}") from err
            raise RetryableError(f"{verb} ConfigMap {namespace}/{name}: {err.status} {err.reason}") from err
        except (OSError, urllib3.exceptions.HTTPError) as err:
            raise RetryableError(f"{verb} ConfigMap {namespace}/{name}: {err}") from err

    def patch_status(self, mirror: JSON, status: JSON) -> None:
        """Merge-patch the mirror's ``/status`` (deleted meanwhile: ignored;
        :func:`zkop.runtime.statuspatch.patch_status`).

        Raises:
            RetryableError: the API server refused or could not answer.
        """
        patch_status(self.client, GROUP, VERSION, PLURAL, mirror, status)

    def event(self, mirror: JSON, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        """An Event about the mirror (queued; the recorder deduplicates and rate-limits)."""
        self.recorder.event(mirror, type_, reason, message)

    def applied(self, decision: Decision, config_map: str) -> Decision:
        """The decision as this writer applied it, for the status: ``decision`` itself (its write was made)."""
        return decision


class DryRunWriter(ApiWriter):
    """The writer of ``zkop run --dry-run``: no ConfigMap write and no Normal Event; the status and Warnings
    still go to the API server (see the module docstring)."""

    def write_config_map(self, namespace: str, name: str, write: tuple[Literal["create", "patch"], JSON]) -> None:
        """Log and count the write (:func:`zkop.runtime.dryrun.planned`); nothing is sent."""
        verb = write[0]
        dryrun.planned(log, CONTROLLER, f"{namespace}/{name}", verb, f"{verb} ConfigMap {namespace}/{name}")

    def event(self, mirror: JSON, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        """A Warning about what the pass found; a Normal Event (a change announced) is not sent: none was made."""
        if type_ == "Warning":
            super().event(mirror, type_, reason, message)

    def applied(self, decision: Decision, config_map: str) -> Decision:
        """A decision that planned a ConfigMap write becomes ``Ready=False``, reason ``DryRun``, naming the write;
        one with nothing to write reports as in a real run."""
        if decision.write is None:
            return decision
        message = f"dry run, nothing written: would {decision.write[0]} ConfigMap {config_map}"
        return replace(decision, write=None, ready=False, reason=DRY_RUN_REASON, message=message, stalled=False,
                       changed=False)
