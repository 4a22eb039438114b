"""Where a mirror reads: the flags' ensemble, or the ZooKeeperEnsemble its ``spec.ensembleRef`` names.

Each ensemble has its own :class:`MirrorSource`: its admission gate (its own tenancy rules), a watched
:class:`~zkop.mirror.tree.TreeReader` on its adapter and the roots kept watched there. The flags' source is made
at start-up; a ZooKeeperEnsemble's on first use, from the :class:`~zkop.feature.ensemble_lookup.EnsembleLookup` the
ZooKeeperEnsemble feature provides, and anew when that ensemble's session is made anew (a new adapter).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from zkop.feature.ensemble_lookup import EnsembleAccess, EnsembleLookup, EnsembleMissing, ensembles_off
from zkop.feature.ensemble_ref import DEFAULT_ENSEMBLE
from zkop.feature.gate import Gate
from zkop.mirror.tree import TreeReader

__all__ = ["MirrorSource", "MirrorSources"]


@dataclass
class MirrorSource:
    """One ensemble's read side for the mirrors naming it.

    Attributes:
        gate: the admission gate its mirrors pass (its tenancy rules).
        reader: watched, read-only reads on its adapter.
        watch_roots: ``f(roots)`` keeps persistent recursive watches on its mirrors' roots.
        adapter: the adapter ``reader`` reads (``None``: the flags'); another one means a new source.
        roots: the roots last handed to ``watch_roots``.
    """

    gate: Gate
    reader: TreeReader
    watch_roots: Callable[[list[str]], None]
    adapter: object | None = None
    roots: frozenset[str] = frozenset()


class MirrorSources:
    """The source of each ensemble a mirror may name; thread-safe.

    Args:
        default: the flags' ensemble's source.
        lookup: the running ZooKeeperEnsembles (``None``: ``--zookeeper-ensembles`` off, so every mirror naming
            one is told ``EnsembleNotFound``).
        make: ``(name, access)`` → a new source on that ensemble's adapter and gate.
    """

    def __init__(self, default: MirrorSource, lookup: EnsembleLookup | None = None,
                 make: Callable[[str, EnsembleAccess], MirrorSource] | None = None) -> None:
        self.default, self.lookup, self.make = default, lookup, make
        self._lock = threading.Lock()
        self._sources: dict[str, MirrorSource] = {}

    def get(self, name: str) -> MirrorSource | EnsembleMissing:
        """The source of ensemble ``name`` (``""``: the flags'), made or made anew as needed, or why that ensemble
        cannot be read; reads only memory."""
        if name == DEFAULT_ENSEMBLE:
            return self.default
        if self.lookup is None or self.make is None:
            return ensembles_off(name)
        found = self.lookup.find(name)
        with self._lock:
            if isinstance(found, EnsembleMissing):
                self._sources.pop(name, None)  # its adapter is closed: nothing more is watched on it
                return found
            source = self._sources.get(name)
            if source is None or source.adapter is not found.adapter:
                source = self._sources[name] = self.make(name, found)
            return source

    def known(self) -> list[tuple[str, MirrorSource]]:
        """``(name, source)`` of the flags' ensemble and of every ZooKeeperEnsemble read so far and still running."""
        with self._lock:
            return [(DEFAULT_ENSEMBLE, self.default), *sorted(self._sources.items())]
