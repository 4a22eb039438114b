"""The mirror's writes to the API server: its ConfigMap, its status, its Events — the dry-run seam.

Built with ``dry_run`` (``zkop run --dry-run``) it sends nothing and logs and counts each change
(:func:`zkop.runtime.dryrun.planned`) instead; the reconciler never branches on the dry run.
Updates are JSON merge patches carrying the ``resourceVersion`` they were planned from, so a
concurrent change is a 409 and a new pass instead of a lost update.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, Protocol

import urllib3.exceptions

from zkop.kube.client import JSON, MERGE_PATCH, ApiException, resource_path
from zkop.kube.events import EventRecorder
from zkop.runtime import dryrun
from zkop.runtime.controller import RetryableError, TerminalError

__all__ = ["GROUP", "PLURAL", "VERSION", "AlreadyExists", "ApiWriter"]

log = logging.getLogger(__name__)

CONTROLLER = "zookeeper-mirror"
GROUP, VERSION, PLURAL = "platform.example.com", "v1alpha1", "zookeepermirrors"


class KubeRequests(Protocol):
    """What the writer needs from :class:`~zkop.kube.client.KubeClient`."""

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str | None = None, timeout: Any = None) -> JSON: ...


class AlreadyExists(Exception):
    """The create answered 409: a ConfigMap of that name exists that the mirror's cache does not hold."""


class ApiWriter:
    """Writes ConfigMaps, mirror status and Events (or, with ``dry_run``, only plans them)."""

    def __init__(self, client: KubeRequests, recorder: EventRecorder, *, dry_run: bool = False) -> None:
        self.client = client
        self.recorder = recorder
        self.dry_run = dry_run

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
        if self.dry_run:
            dryrun.planned(log, CONTROLLER, f"{namespace}/{name}", verb, f"{verb} ConfigMap {namespace}/{name}")
            return
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
        """Merge-patch the mirror's ``/status`` (a mirror deleted meanwhile is ignored).

        Raises:
            RetryableError: the API server refused or could not answer.
        """
        meta = mirror["metadata"]
        if self.dry_run:
            dryrun.planned(log, CONTROLLER, f"{meta['namespace']}/{meta['name']}", "status", "patch status")
            return
        try:
            self.client.request("PATCH", resource_path(GROUP, VERSION, PLURAL, meta["namespace"], meta["name"],
                                                       "status"), body={"status": status}, content_type=MERGE_PATCH)
        except ApiException as err:
            if err.status != 404:
                raise RetryableError(f"status of {meta['namespace']}/{meta['name']}: {err.status}") from err
        except (OSError, urllib3.exceptions.HTTPError) as err:
            raise RetryableError(f"status of {meta['namespace']}/{meta['name']}: {err}") from err

    def event(self, mirror: JSON, type_: Literal["Normal", "Warning"], reason: str, message: str) -> None:
        """An Event about the mirror (none in a dry run)."""
        if not self.dry_run:
            self.recorder.event(mirror, type_, reason, message)
