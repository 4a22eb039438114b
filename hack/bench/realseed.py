"""Seed a real control plane like a real cluster (``--scenario realistic``, ``--realistic-cluster``, ``--scale``).

What :func:`zkop_testing.apiserver_realistic.seed` puts straight into the in-memory API server's store, written
here through kube-apiserver the way the tools of a real cluster write it, so that every ``managedFields``
entry is the one the real field manager records:

* the namespaces, the ZooKeeperConfigs, the Services and the ConfigMaps/Secrets some ZooKeeperConfigs read
  are **server-side applied** (``PATCH`` ``application/apply-patch+yaml``, ``force=true``) with field manager
  :data:`GITOPS_MANAGER`, as Flux's kustomize-controller applies a Kustomization;
* the Helm release Secrets (:func:`zkop_testing.apiserver_realistic.helm_release_secrets`) are **created**
  with field manager :data:`HELM_MANAGER`, as Helm 3's Secret storage driver creates them
  (``storage/driver/secrets.go``: ``Create``, not an apply);
* the ``kube-root-ca.crt`` ConfigMap of every namespace is the plane's own: kube-controller-manager's
  ``root-ca-certificate-publisher-controller`` creates it, and :func:`seed_real` waits for it.

With ``managed_fields=False`` (the control run, ``--realistic-no-managed-fields``) every object is a plain
``POST`` instead (kube-apiserver still records its one ``Update`` entry, as the double does then).

Requests go out from :attr:`RealApi.store`'s threads (:data:`SEED_THREADS` connections) as the bench's own
identity (``system:masters``: API Priority and Fairness exempts it, so ``--max-requests-inflight`` (400) is
never reached by eight clients and the plane runs with its defaults); nothing of it is counted.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Sequence

from zkop_testing.apiserver_realistic import ROOT_CA_CONFIGMAP, SeedReport, helm_release_secrets
from zkop_testing.waiting import wait_for

from zkop.kube.client import ApiException, resource_path

from .params import JSON
from .realplane import RealApi, Resource

__all__ = ["BUILTIN_NAMESPACES", "GITOPS_MANAGER", "HELM_MANAGER", "REAL_SEEDING", "put_many", "seed_real"]

log = logging.getLogger("bench")

#: Field manager of the applied objects: Flux's kustomize-controller (its ``--kube-api-...`` client's manager).
GITOPS_MANAGER = "kustomize-controller"
#: Field manager of the Helm release Secrets: client-go's default, the name of the program (``helm``).
HELM_MANAGER = "helm"
#: How :func:`seed_real` and :func:`put_many` wrote the objects (``params.cluster.how`` of a report).
REAL_SEEDING = (f"server-side apply by field manager {GITOPS_MANAGER!r}; Helm release Secrets created by "
                f"{HELM_MANAGER!r}; kube-root-ca.crt by kube-controller-manager")
#: The namespaces every cluster has.
BUILTIN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def put_many(api: RealApi, rt: Resource, namespace: str | None, bodies: Iterable[JSON], *,
             managed_fields: bool = True, manager: str = GITOPS_MANAGER) -> int:
    """Write ``bodies`` of resource ``rt``: server-side applied by ``manager``, or with ``managed_fields``
    False plain ``POST``s; returns how many were written.

    Raises:
        zkop.kube.client.ApiException: the API server refused one.
    """
    if managed_fields:
        return api.store.apply_many(rt, namespace, bodies, manager)
    return api.store.create_many(rt, namespace, iter(bodies))


def seed_real(api: RealApi, *, namespaces: int, helm_secrets: int, secret_kb: int, helm_revisions: int = 3,
              managed_fields: bool = True, seed: int = 0, timeout: float = 120.0) -> SeedReport:
    """Make the plane behind ``api`` look like a real cluster (module docstring): ``namespaces`` namespaces
    ``app-<i>`` applied, ``helm_secrets`` Helm release Secrets of ``secret_kb`` KB created by :data:`HELM_MANAGER`,
    and the plane's ``kube-root-ca.crt`` in every namespace waited for.

    Raises:
        zkop.kube.client.ApiException: the API server refused an object.
        TimeoutError: a ``kube-root-ca.crt`` did not appear within ``timeout`` seconds.
    """
    names = [f"app-{i}" for i in range(namespaces)]
    put_many(api, api.store.resolve("", "v1", "namespaces"), None, (
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in names),
        managed_fields=managed_fields)
    everything = [*BUILTIN_NAMESPACES, *names]
    report = SeedReport(everything)
    wait_for(lambda: _root_cas(api, everything) == len(everything), timeout=timeout,
             message=f"{ROOT_CA_CONFIGMAP} in {len(everything)} namespaces (kube-controller-manager)")
    report.configmaps = len(everything)
    secrets = list(helm_release_secrets(names, helm_secrets, secret_kb, helm_revisions, random.Random(seed)))
    rt = api.store.resolve("", "v1", "secrets")
    api.store.create_many(rt, None, iter(secrets), field_manager=HELM_MANAGER)
    report.secrets = len(secrets)
    report.secret_bytes = sum(len(body["data"]["release"]) for body in secrets)
    return report


def _root_cas(api: RealApi, namespaces: Sequence[str]) -> int:
    found = 0
    for namespace in namespaces:
        try:
            api.kube.request("GET", resource_path("", "v1", "configmaps", namespace, ROOT_CA_CONFIGMAP))
        except ApiException as err:
            if err.status != 404:
                raise
        else:
            found += 1
    return found
