"""A ZooKeeperEnsemble read once at start-up, for a feature that runs on it (``--service-bridge-ensemble``,
``--import-ensemble``): its spec and Secrets are read once (a change takes a restart) and its session is
opened by a :class:`~zkop.feature.session.ZooKeeperStartup` of its own, supervised by the Manager.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from zkop.ensembles.spec import GROUP, PLURAL, VERSION, InvalidEnsemble, SecretMissing, read_ensemble
from zkop.feature.context import DRY_RUN
from zkop.feature.session import ZooKeeperStartup
from zkop.kube.client import JSON, ApiException, KubeClient, resource_path
from zkop.runtime.manager import Manager
from zkop.zookeeper.adapter import ZooKeeperAdapter
from zkop.zookeeper.connection import ConnectionOptions

__all__ = ["EnsembleUnusable", "open_ensemble"]


class EnsembleUnusable(Exception):
    """A ZooKeeperEnsemble named by a flag cannot be used: absent, a Secret or key it names missing, or an
    invalid spec (the message names it and why)."""


def open_ensemble(name: str, *, client: KubeClient, base: ConnectionOptions, secret_namespace: str, dry_run: bool,
                  manager: Manager) -> ZooKeeperAdapter:
    """An adapter on ZooKeeperEnsemble ``name``, whose session a :class:`ZooKeeperStartup` added to ``manager``
    opens (no probe) and closes, removing the ensemble's private TLS/SASL files.

    Args:
        base: the flags' connection options each ensemble's start from.
        secret_namespace: the one namespace the ensemble's Secrets are read from.
        dry_run: the adapter refuses every write (the net under the dry-run writers).

    Raises:
        EnsembleUnusable: no such ensemble, a Secret or key it names missing, or an invalid spec.
        ApiException: the API server failed the read (other than 404).
    """

    def get(path: str) -> JSON | None:
        try:
            found: JSON = client.request("GET", path)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return found

    def get_ensemble(ensemble: str) -> JSON | None:
        # A LIST narrowed to the one name, not a GET: the zookeeper-ensembles component grants list and
        # watch on the kind (its informer's verbs), not get (kube-apiserver answers a GET 403).
        found: JSON = client.request("GET", resource_path(GROUP, VERSION, PLURAL),
                                     query={"fieldSelector": f"metadata.name={ensemble}"})
        items: list[JSON] = list(found.get("items") or [])
        return items[0] if items else None

    directory = Path(tempfile.mkdtemp(prefix=f"zkop-ensemble-{name}-"))
    try:
        connection = read_ensemble(get_ensemble, lambda n: get(resource_path("", "v1", "secrets", secret_namespace, n)),
                                   name, base, directory)
    except (SecretMissing, InvalidEnsemble, ApiException) as err:
        shutil.rmtree(directory, ignore_errors=True)
        raise EnsembleUnusable(f"ZooKeeperEnsemble {name}: {err}") from None
    adapter = ZooKeeperAdapter(connection, refuse_writes=DRY_RUN if dry_run else None)
    manager.add(ZooKeeperStartup(adapter, "", probe=False, on_fatal=manager.fail, directory=directory,
                                 name=f"zookeeper-{name}"), needs_leader=False)
    return adapter
