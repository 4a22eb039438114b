"""The one admission gate every namespaced kind passes before zkop reads, watches or writes a znode for it.

zkop acts with its own ZooKeeper identity on behalf of every namespace, a deputy that can read and write far
more than any namespace could itself. The gate is what the deputy checks first, the same way for every kind
(ZooKeeperConfig writes, ZooKeeperMirror reads, any kind added later), and it is pure: no I/O, the namespace's
labels come from a cache.

The rules, in order (``docs/security.md``):

1. **Reserved roots** (:class:`ReservedRoot`): zkop's own bookkeeping (the ownership registry, the start-up
   probe's scratch znodes), another controller's output (the service bridge's records, the importer's registration
   root) and ZooKeeper's ``/zookeeper`` are never written for an object; the ones whose contents would leak
   (the ownership registry, ``/zookeeper``) are never read either. They hold with or without a tenancy policy.
   A read of a whole subtree that contains a reserved root is admitted, and that root is left out of the read
   (:meth:`Gate.excluded`).
2. **Tenancy** (:class:`~zkop.feature.tenancy.TenancyPolicy`, the object's ensemble's): the namespace must be
   admitted, by name or label selector, and the path must lie under one of that rule's prefixes by whole segments;
   reads are held to the same rules as writes.

A refused object reads, watches and writes nothing; its status says why (``Stalled``, the refusal's reason) and a
Warning Event repeats it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from zkop.feature.tenancy import ADMIT_ALL, Refusal, TenancyPolicy
from zkop.kube.client import JSON
from zkop.zookeeper.paths import RESERVED_ROOT, is_within

__all__ = ["Access", "Gate", "ReservedRoot", "probe_root", "reserved_roots"]

#: What an object asks zkop to do with a path: ``write`` (create, update, delete) or ``read`` (read and watch).
Access = Literal["read", "write"]


@dataclass(frozen=True)
class ReservedRoot:
    """A subtree no object may have zkop write, and, unless ``readable``, read.

    Attributes:
        path: the subtree's root (relative to the session's chroot, like every object's path).
        holder: what keeps it, for the refusal's message (``zkop's ownership registry``).
        readable: an object may have zkop read it (a mirror of published service records); False where the
            contents would leak (ownership records name every tenant's objects).
    """

    path: str
    holder: str
    readable: bool = False


def probe_root(registry_root: str) -> str:
    """Where the start-up probe writes its scratch znodes: ``probe`` beside the ownership registry's root
    (``/zkop/owners`` → ``/zkop/probe``)."""
    return f"{registry_root.rsplit('/', 1)[0] or '/zkop'}/probe"


def reserved_roots(*, registry_root: str, probe_root: str | None = None, bridge_root: str | None = None,
                   import_root: str | None = None) -> tuple[ReservedRoot, ...]:
    """zkop's reserved roots for one run: ``/zookeeper`` and the ownership registry always; the start-up probe's
    root, the service bridge's root and the importer's root when given (those features enabled)."""
    roots = [ReservedRoot(RESERVED_ROOT, "the ZooKeeper server"),
             ReservedRoot(registry_root, "zkop's ownership registry")]
    if probe_root:
        roots.append(ReservedRoot(probe_root, "zkop's start-up probe", readable=True))
    if bridge_root:
        roots.append(ReservedRoot(bridge_root, "zkop's service bridge (its published records)", readable=True))
    if import_root:
        roots.append(ReservedRoot(import_root, "zkop's service importer (the registrations it turns into Services)",
                                  readable=True))
    return tuple(roots)


class Gate:
    """Decides whether an object in a namespace may have zkop read or write a path (the module docstring's rules).

    Args:
        reserved: the reserved roots (:func:`reserved_roots`).
        policy_for: the tenancy policy an object is held to (its ensemble's); reads only memory.
        namespace_labels: a namespace's labels from a cache (``None``: not known, treated as none); ``None``: no
            namespace has labels (no policy selects by label).
    """

    def __init__(self, reserved: Iterable[ReservedRoot] = (),
                 policy_for: Callable[[JSON], TenancyPolicy] = lambda obj: ADMIT_ALL,
                 namespace_labels: Callable[[str], Mapping[str, str] | None] | None = None) -> None:
        self.reserved = tuple(reserved)
        self.policy_for = policy_for
        self.namespace_labels = namespace_labels

    def reserved_refusal(self, path: str, access: Access) -> Refusal | None:
        """Why ``path`` may not be read or written for any object (a reserved root covers it), or ``None``."""
        for root in self.reserved:
            if is_within(path, root.path) and (access == "write" or not root.readable):
                verb = "written" if access == "write" else "read"
                return Refusal("ReservedPath", f"path {path} is under {root.path}, reserved for {root.holder}: "
                                               f"it is never {verb} for a namespaced object")
        return None

    def admit(self, obj: JSON, path: str, access: Access) -> Refusal | None:
        """``None`` if zkop may ``access`` ``path`` (and, for a read, the subtree below it but :meth:`excluded`) on
        behalf of ``obj``, else why not: a reserved root (``ReservedPath``), then its tenancy policy
        (``NamespaceNotAllowed``, ``PathNotAllowed``)."""
        refusal = self.reserved_refusal(path, access)
        if refusal is not None:
            return refusal
        policy = self.policy_for(obj)
        if policy.rules is None:  # no tenancy: the common case reads no labels
            return None
        namespace = str((obj.get("metadata") or {}).get("namespace"))
        labels = self.namespace_labels(namespace) if self.namespace_labels is not None else None
        return policy.admit(namespace, labels, path)

    def excluded(self, root: str) -> tuple[str, ...]:
        """The reserved roots strictly below ``root`` that a read of its whole subtree leaves out (never read)."""
        return tuple(r.path for r in self.reserved
                     if not r.readable and r.path != root and is_within(r.path, root))
