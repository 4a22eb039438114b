"""Lazy package attributes: a direction's builder is imported on first use, not with its options."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(module: str, names: Sequence[str], package: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``module`` on first use of one of ``names``.

    A process that only needs a direction's options (``zkop run`` without that feature) then does
    not import the informer and controller machinery behind its builder.

    Raises (from the returned function):
        AttributeError: any other name.
    """
    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(module), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
