"""Which objects declare a path, across kinds: so that a ZooKeeperConfig and a ZooKeeperConfigTree see each other.

Each kind knows its own declarations (a ZooKeeperConfig's informer index by ``spec.path``; a tree's children once
its sources are expanded). :class:`DeclaredPaths` is the one shared index: a kind registers a *source* (``path`` →
the admitted objects of that kind declaring it) and asks for the oldest declarer of a path over every source, by
the one rule (:func:`zkop.ownership.oldest.oldest`; kind and ``namespace/name`` break a tie). The ZooKeeperConfig
feature, built first, creates it and provides it to later features (:meth:`zkop.feature.context.FeatureContext.part`).

Declarations are per ensemble: the same path on two ensembles is two znodes (docs/operations.md "Several
ensembles"), so a ZooKeeperConfig on one and a tree on another never conflict. :class:`EnsembleDeclarations` holds one
:class:`DeclaredPaths` per ensemble name (``""``: the flags'), made on first use; each ensemble's ZooKeeperConfig
controller and the trees naming that ensemble register there.

Listeners hear which paths changed declarers (a tree declared or dropped children) so the objects of the other
kinds declaring them are reconciled again. Reads only memory; thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from zkop.ownership.oldest import oldest

__all__ = ["DeclaredPaths", "Declarer", "EnsembleDeclarations"]


@dataclass(frozen=True)
class Declarer:
    """An object declaring a path: its creation time (Unix seconds; ``inf``: unknown, the newest), ``kind``
    (``ZooKeeperConfig``, ``ZooKeeperConfigTree``) and ``key`` (``namespace/name``)."""

    created: float
    kind: str
    key: str

    def describe(self) -> str:
        """``Kind namespace/name``."""
        return f"{self.kind} {self.key}"


class DeclaredPaths:
    """The objects of every kind declaring each path (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: list[Callable[[str], list[Declarer]]] = []
        self._listeners: list[Callable[[Iterable[str]], None]] = []

    def add_source(self, source: Callable[[str], list[Declarer]]) -> None:
        """Register a kind's declarations: ``source(path)`` lists its admitted objects declaring ``path`` (memory
        only)."""
        with self._lock:
            self._sources.append(source)

    def remove_source(self, source: Callable[[str], list[Declarer]]) -> None:
        """Unregister a source :meth:`add_source` registered (its controller is going away); unknown: ignored."""
        with self._lock:
            if source in self._sources:
                self._sources.remove(source)

    def remove_listener(self, listener: Callable[[Iterable[str]], None]) -> None:
        """Unregister a listener :meth:`add_listener` registered; unknown: ignored."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def add_listener(self, listener: Callable[[Iterable[str]], None]) -> None:
        """Call ``listener(paths)`` when a kind reports that ``paths`` gained or lost a declarer (it must only
        enqueue)."""
        with self._lock:
            self._listeners.append(listener)

    def changed(self, paths: Iterable[str]) -> None:
        """Report that ``paths`` gained or lost a declarer (every listener is told)."""
        paths = list(paths)
        if not paths:
            return
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(paths)

    def declarers(self, path: str) -> list[Declarer]:
        """Every registered kind's objects declaring ``path``."""
        with self._lock:
            sources = list(self._sources)
        found: list[Declarer] = []
        for source in sources:
            found.extend(source(path))
        return found

    def owner(self, path: str) -> Declarer | None:
        """The oldest object of any kind declaring ``path`` (``None``: none)."""
        return oldest(self.declarers(path), lambda d: ((d.created, d.kind), d.key))


class EnsembleDeclarations:
    """The :class:`DeclaredPaths` of each ensemble by name (``""``: the flags'), made on first use and kept while
    zkop runs (an ensemble's runtime made anew registers its sources again); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, DeclaredPaths] = {}

    def of(self, ensemble: str) -> DeclaredPaths:
        """The declarations on ensemble ``ensemble`` (``""``: the flags')."""
        with self._lock:
            found = self._by_name.get(ensemble)
            if found is None:
                found = self._by_name[ensemble] = DeclaredPaths()
            return found
