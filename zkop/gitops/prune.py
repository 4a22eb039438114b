"""Which znodes ``sync --prune`` deletes (and ``diff --prune`` shows as deletions).

Given the prune roots (``--prune-root``, required) and the set ``D`` of paths the valid input
manifests declare, a znode ``n`` is deleted only if all hold:

1. ``n`` is strictly below a prune root;
2. ``n`` is neither in ``D`` nor an ancestor of a path in ``D``;
3. ``n`` is persistent and not sequential (10-digit suffix): those belong to running clients;
4. ``n`` is not under ``/zookeeper``, the ownership registry or an ``--exclude`` glob (not even read);
5. every child of ``n`` is deleted by this rule: deletion is never recursive.

Deletions run after all creates and updates, leaves first, each conditional on the version just
read. Refused outright, nothing written: a prune root that is not a manageable path, lies in a
reserved subtree, or has no declared path below it (an empty or wrong input must not empty a subtree).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from zkop.gitops.tree import PathFilter, Tree, ZNode, child_path, is_sequential_name
from zkop.zookeeper.paths import InvalidPath, is_within, parent_paths, validate_path

__all__ = ["PruneRefused", "check_prune_roots", "plan_prune"]


class PruneRefused(ValueError):
    """A prune root is unsafe or unjustified; the message says which rule."""


def check_prune_roots(roots: Sequence[str], declared: Iterable[str], path_filter: PathFilter) -> None:
    """Refuse prune roots that break the rules in the module docstring.

    Raises:
        PruneRefused: naming the root and the rule.
    """
    declared = list(declared)
    for root in roots:
        try:
            validate_path(root)
        except InvalidPath as err:
            raise PruneRefused(f"--prune-root {root}: {err}") from None
        if path_filter.reserved_path(root):
            raise PruneRefused(f"--prune-root {root}: lies in a reserved subtree ({', '.join(path_filter.reserved)})")
        if not any(is_within(path, root) for path in declared):
            raise PruneRefused(f"--prune-root {root}: no manifest declares a path under it; refusing to delete "
                               "everything below it")


def plan_prune(tree: Tree, declared: Iterable[str]) -> list[ZNode]:
    """The znodes of ``tree`` (walked from one prune root) to delete, leaves first.

    ``tree`` must come from :func:`zkop.gitops.tree.walk` with the reserved and
    excluded subtrees skipped; a node missing from it (skipped, unreadable)
    keeps its ancestors.
    """
    keep = set()
    for path in declared:
        keep.add(path)
        keep.update(parent_paths(path))
    prunable: dict[str, bool] = {}
    for node in reversed(tree.nodes.values()):  # children before parents
        prunable[node.path] = (
            node.path != tree.root
            and node.path not in keep
            and not node.ephemeral_owner
            and not is_sequential_name(node.name)
            and all(prunable.get(child_path(node.path, c), False) for c in node.children)
        )
    return [n for n in reversed(tree.nodes.values()) if prunable[n.path]]
