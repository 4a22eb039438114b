"""The ZooKeeperEnsembles another feature may use, by name: the ZooKeeperEnsemble feature provides an
:class:`EnsembleLookup` (:meth:`zkop.feature.context.FeatureContext.built`) to the features built after it.

A feature asks :meth:`EnsembleLookup.find` on every pass (it reads only memory) and gets the ensemble's adapter
and admission gate (its own ``spec.tenancy``), or why the ensemble does not run (:class:`EnsembleMissing`, the
reasons a ZooKeeperConfig reports); :meth:`EnsembleLookup.on_change` tells it when to look again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from zkop.feature.gate import Gate
from zkop.zookeeper.adapter import ZooKeeperAdapter

__all__ = ["EnsembleAccess", "EnsembleHolds", "EnsembleLookup", "EnsembleMissing", "ensembles_off"]


@dataclass(frozen=True)
class EnsembleAccess:
    """A running ZooKeeperEnsemble: its adapter (a new one each time its session is made anew) and the gate its
    objects pass (its ``spec.tenancy``, followed while it runs)."""

    adapter: ZooKeeperAdapter
    gate: Gate


@dataclass(frozen=True)
class EnsembleMissing:
    """Why a ZooKeeperEnsemble cannot be used now.

    Attributes:
        reason: ``EnsembleNotFound`` (no such ZooKeeperEnsemble, or ``--zookeeper-ensembles`` off),
            ``EnsembleNotUsable`` (being deleted, an invalid spec, a Secret missing), or ``None`` while it exists
            and its runtime is merely being made (not reported; :meth:`EnsembleLookup.on_change` follows).
        message: a sentence naming the ensemble and why.
    """

    reason: Literal["EnsembleNotFound", "EnsembleNotUsable"] | None
    message: str


def ensembles_off(name: str) -> EnsembleMissing:
    """What an object naming ZooKeeperEnsemble ``name`` is told when ``--zookeeper-ensembles`` is off."""
    return EnsembleMissing("EnsembleNotFound", f"ZooKeeperEnsemble {name!r} not found: ZooKeeperEnsembles are not "
                                               "enabled (zkop run --zookeeper-ensembles)")


class EnsembleHolds:
    """Lets a kind built after the ZooKeeperEnsemble feature hold an ensemble's deletion while its objects still
    need it (as ZooKeeperConfigs do: docs/operations.md, "Deletion order").

    Args:
        add: registers ``needing(name)`` → the objects of that kind naming ensemble ``name`` that still hold zkop's
            finalizer (``Kind namespace/name``; memory only); a ZooKeeperEnsemble being deleted waits for them.
        recheck: enqueues ensemble ``name`` (one of its objects released its finalizer, or left it).
    """

    def __init__(self, add: Callable[[Callable[[str], list[str]]], None], recheck: Callable[[str], None]) -> None:
        self._add, self.recheck = add, recheck

    def add(self, needing: Callable[[str], list[str]]) -> None:
        """Hold each ensemble's deletion while ``needing(name)`` lists an object."""
        self._add(needing)


class EnsembleLookup:
    """The running ZooKeeperEnsembles by name, for a feature that reads or writes on them.

    Args:
        find: ``name`` → the ensemble's adapter and gate, or why it cannot be used; reads only memory.
        subscribe: registers a listener called with an ensemble's name whenever ``find`` may answer differently
            for it (its runtime made, made anew or closed, its tenancy changed).
    """

    def __init__(self, find: Callable[[str], EnsembleAccess | EnsembleMissing],
                 subscribe: Callable[[Callable[[str], None]], None]) -> None:
        self._find, self._subscribe = find, subscribe

    def find(self, name: str) -> EnsembleAccess | EnsembleMissing:
        """Ensemble ``name``'s adapter and gate, or why it cannot be used; reads only memory."""
        return self._find(name)

    def on_change(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(name)`` (it must only enqueue) whenever :meth:`find` may answer differently for ``name``."""
        self._subscribe(listener)
