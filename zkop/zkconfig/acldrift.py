"""Pure rules of the periodic ACL check (:mod:`zkop.zkconfig.aclcheck`): which znodes declare an ACL, which drifted.

ZooKeeper fires no watch on ``setACL`` (``DataTree.setACL`` triggers none), so a hand ``setAcl``
is found only by reading the ACLs; these functions decide what to read and what to reconcile.
"""

from __future__ import annotations

from collections.abc import Mapping

from zkop.kube.client import JSON
from zkop.ownership.oldest import object_age, oldest
from zkop.runtime.cache.indexer import meta_namespace_key
from zkop.zkconfig.spec import acl_from_spec, parse_data_ref
from zkop.zookeeper.acls import AclId, authenticated, expand_auth
from zkop.zookeeper.actions import CREATOR_ALL_ACL, AclEntry, acl_matches
from zkop.zookeeper.adapter import AclRead, ZooKeeperError
from zkop.zookeeper.paths import validate_path

__all__ = ["decide_acl_drift", "declared_acls"]

def declared_acls(objects: list[JSON], ids: frozenset[AclId] = frozenset()
                  ) -> dict[str, tuple[str, tuple[AclEntry, ...]]]:
    """Managed znodes whose cluster owner declares ``spec.acl``, or takes its value from a Secret: path →
    (owner key, its ACL).

    ``ids`` are zkop's identities: ``auth`` entries are expanded to them, as the server stores
    them (:func:`zkop.zookeeper.acls.expand_auth`). A Secret's value without ``spec.acl`` has
    :data:`~zkop.zookeeper.actions.CREATOR_ALL_ACL` (:func:`zkop.zkconfig.spec.parse_spec`), checked only while
    ``ids`` hold an authenticated identity (otherwise its pass reports ``SecretNeedsAcl`` and writes nothing).

    The owner of a path is :func:`~zkop.ownership.oldest.oldest` of the live objects declaring it; objects being
    deleted, with an invalid path or ACL, or with the open ACL are left out (their passes
    report or need nothing).
    """
    by_path: dict[str, list[JSON]] = {}
    for obj in objects:
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            continue
        path = (obj.get("spec") or {}).get("path")
        if isinstance(path, str):
            by_path.setdefault(path, []).append(obj)
    declared: dict[str, tuple[str, tuple[AclEntry, ...]]] = {}
    for path, candidates in by_path.items():
        owner = oldest(candidates, object_age)
        assert owner is not None  # one candidate at least
        spec = owner.get("spec") or {}
        entries = spec.get("acl")
        try:
            if isinstance(entries, list):
                acl = acl_from_spec(entries)
            elif spec.get("dataFrom") is not None and parse_data_ref(spec["dataFrom"]).secret and authenticated(ids):
                acl = CREATOR_ALL_ACL
            else:
                continue
            declared[validate_path(path)] = (meta_namespace_key(owner), expand_auth(acl, ids))
        except ValueError:  # InvalidSpec included
            continue
    return declared


def decide_acl_drift(declared: dict[str, tuple[str, tuple[AclEntry, ...]]],
                     read: Mapping[str, AclRead | ZooKeeperError | None]) -> list[tuple[str, str]]:
    """The ``(path, key)`` pairs to reconcile after a periodic ACL check.

    Args:
        declared: from :func:`declared_acls`.
        read: path → the ACL read (``getACL``), ``None`` if the znode is absent (its watch
            covers that), or the error met (``NoAuth``: zkop lost READ and ADMIN on it).

    Returns:
        One pair per znode whose ACL differs from the declared one, is redacted (zkop lost
        ADMIN: :func:`zkop.zookeeper.actions.acl_matches` never matches it), or could not be
        read — in path order.
    """
    drifted = []
    for path in sorted(declared):
        seen = read.get(path)
        if seen is None:
            continue
        key, acl = declared[path]
        if isinstance(seen, ZooKeeperError) or not acl_matches(seen.acl, acl):
            drifted.append((path, key))
    return drifted
