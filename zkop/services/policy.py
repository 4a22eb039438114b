"""Planned changes and the policies that filter them (external-dns ``plan/plan.go``, ``plan/policy.go``).

A planner classifies what it would do into a :class:`Changes` value — creates, updates, deletes —
and the configured policy filters it, exactly as external-dns's ``Policy.Apply(*Changes)``:

==================  ===================================================
policy              keeps
==================  ===================================================
``sync``            creates, updates and deletes (``SyncPolicy``)
``upsert-only``     creates and updates (``UpsertOnlyPolicy``)
``create-only``     creates (``CreateOnlyPolicy``)
==================  ===================================================

What a policy drops is reported (``suppressed``), never silently lost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

__all__ = ["POLICIES", "Changes", "Kind", "Policy", "apply_policy"]

A = TypeVar("A")

Policy = Literal["sync", "upsert-only", "create-only"]
#: The kind of a planned change.
Kind = Literal["create", "update", "delete"]


@dataclass(frozen=True)
class Changes(Generic[A]):
    """What a planner would do, by kind; each tuple in planning order."""

    creates: tuple[A, ...] = ()
    updates: tuple[A, ...] = ()
    deletes: tuple[A, ...] = ()
    #: ``(kind, action)`` in planning order (creates and updates of one plan interleave).
    order: tuple[tuple[Kind, A], ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def of(cls, planned: Iterable[tuple[Kind, A]]) -> Changes[A]:
        """Classify ``(kind, action)`` pairs, keeping their order for :meth:`ordered`."""
        order = tuple(planned)
        return cls(tuple(a for k, a in order if k == "create"), tuple(a for k, a in order if k == "update"),
                   tuple(a for k, a in order if k == "delete"), order)

    def ordered(self) -> tuple[A, ...]:
        """The kept actions in planning order."""
        kept = {"create": {id(a) for a in self.creates}, "update": {id(a) for a in self.updates},
                "delete": {id(a) for a in self.deletes}}
        return tuple(a for kind, a in self.order if id(a) in kept[kind])


def _sync(changes: Changes[A]) -> Changes[A]:
    return changes


def _upsert_only(changes: Changes[A]) -> Changes[A]:
    return Changes(changes.creates, changes.updates, (), changes.order)


def _create_only(changes: Changes[A]) -> Changes[A]:
    return Changes(changes.creates, (), (), changes.order)


#: Each policy as a filter over :class:`Changes`.
POLICIES: dict[str, Callable[[Changes[Any]], Changes[Any]]] = {
    "sync": _sync, "upsert-only": _upsert_only, "create-only": _create_only,
}


def apply_policy(policy: Policy, changes: Changes[A]) -> tuple[Changes[A], Changes[A]]:
    """``(kept, suppressed)``: the changes ``policy`` allows, and the ones it drops.

    Raises:
        KeyError: unknown policy.
    """
    kept = POLICIES[policy](changes)
    keep = {id(a) for a in (*kept.creates, *kept.updates, *kept.deletes)}
    dropped = Changes.of((k, a) for k, a in changes.order if id(a) not in keep)
    return kept, dropped
