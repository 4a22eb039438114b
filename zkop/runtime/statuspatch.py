"""The one merge patch of a custom object's ``/status`` subresource, for the writers of the kinds that report
through it alone (ZooKeeperMirror, ZooKeeperConfigTree)."""

from __future__ import annotations

from typing import Any, Protocol

import urllib3

from zkop.kube.client import JSON, MERGE_PATCH, ApiException, resource_path
from zkop.runtime.controller import RetryableError

__all__ = ["StatusRequests", "patch_status"]


class StatusRequests(Protocol):
    """What :func:`patch_status` needs of :class:`~zkop.kube.client.KubeClient`."""

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str | None = None, timeout: Any = None) -> JSON: ...


def patch_status(client: StatusRequests, group: str, version: str, plural: str, obj: JSON, status: JSON) -> None:
    """Merge-patch ``obj``'s ``/status`` (``group/version``, resource ``plural``) with ``status``; an object deleted
    meanwhile (404) is ignored.

    Raises:
        RetryableError: the API server refused or could not answer (the key goes back to the rate limiter).
    """
    meta = obj["metadata"]
    try:
        client.request("PATCH", resource_path(group, version, plural, meta["namespace"], meta["name"], "status"),
                       body={"status": status}, content_type=MERGE_PATCH)
    except ApiException as err:
        if err.status != 404:
            raise RetryableError(f"status of {meta['namespace']}/{meta['name']}: {err.status}") from err
    except (OSError, urllib3.exceptions.HTTPError) as err:
        raise RetryableError(f"status of {meta['namespace']}/{meta['name']}: {err}") from err
