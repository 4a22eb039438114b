"""The one ``JSON`` alias: a Kubernetes object or any JSON object, as decoded."""

from __future__ import annotations

from typing import Any

__all__ = ["JSON"]

#: A decoded JSON object (an API object, a patch, a status).
JSON = dict[str, Any]
