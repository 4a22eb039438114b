"""Seed the in-memory API server like a real cluster: what zkop's informers would meet there.

A fresh double holds four namespaces and the ``kubernetes`` Service. A real cluster also holds
(kube-apiserver 1.29 … 1.32, Helm 3):

* a ``kube-root-ca.crt`` ConfigMap in **every** namespace (``pkg/controller/certificates/rootcacertpublisher``,
  key ``ca.crt``, a PEM certificate of about 1.1 KB);
* Helm release Secrets: ``sh.helm.release.v1.<release>.v<revision>``, ``type: helm.sh/release.v1``,
  labels ``name``/``owner: helm``/``status``/``version``, the release in ``data.release`` as
  base64 (Secret encoding) of base64 of gzip (Helm's ``storage/driver/util.go`` ``encodeRelease``):
  tens to hundreds of KB each, several revisions per release (``--history-max`` 10 by default);
* ``metadata.managedFields`` on every object (``fieldmanager.UpdateNoErrors`` records one entry per
  manager and operation on every write): the seeded objects are created with three managers' entries
  (an ``Apply`` by a GitOps tool, an ``Update`` by ``kubectl``, and an ``Update`` of the ``status``
  subresource or by a controller), FieldsV1 sets naming the object's own fields, which the double's
  field manager merges with its own entry. Every later write (by zkop, the tests, the benchmark)
  gets its entries from the double itself, as on a real server.

:func:`seed` creates those objects straight in the store (no HTTP; not in the request log).
"""

from __future__ import annotations

import base64
import random
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_errors import ApiError
from zkop_testing.apiserver_store import Store

__all__ = [
    "HELM_RELEASE_TYPE",
    "ROOT_CA_CONFIGMAP",
    "SeedReport",
    "fields_v1",
    "helm_release_secrets",
    "managed_fields_for",
    "seed",
]

JSON = dict[str, Any]

ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
HELM_RELEASE_TYPE = "helm.sh/release.v1"
#: The managers of the three ``managedFields`` entries (``Apply``, ``Update``, ``Update``).
MANAGERS = ("kustomize-controller", "kubectl-edit", "kube-controller-manager")
_NOT_FIELDS = ("apiVersion", "kind", "metadata", "status")


@dataclass
class SeedReport:
    """What :func:`seed` created: counts and the JSON size of the Secrets' ``data`` (bytes)."""

    namespaces: list[str]
    configmaps: int = 0
    secrets: int = 0
    secret_bytes: int = 0


def fields_v1(value: Any, depth: int = 4) -> JSON:
    """A FieldsV1 set for ``value`` as structured-merge-diff writes it: ``f:<field>`` per map key,
    ``{".": {}}`` marking a map that is itself owned, lists of maps keyed ``k:{...}`` when they
    carry a ``name`` or ``type``, other lists as a whole."""
    if not isinstance(value, Mapping) or depth == 0:
        return {}
    out: JSON = {}
    for key, child in value.items():
        if isinstance(child, Mapping) and child:
            out[f"f:{key}"] = {".": {}, **fields_v1(child, depth - 1)}
        elif isinstance(child, list) and child and all(isinstance(c, Mapping) for c in child):
            entries: JSON = {}
            for item in child:
                ident = next(((k, item[k]) for k in ("name", "type", "port") if k in item), None)
                if ident is None:
                    entries = {}
                    break
                entries[f'k:{{"{ident[0]}":{_json_scalar(ident[1])}}}'] = {".": {}, **fields_v1(item, depth - 2)}
            out[f"f:{key}"] = entries
        else:
            out[f"f:{key}"] = {}
    return out


def _json_scalar(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else f'"{value}"'


def managed_fields_for(obj: Mapping[str, Any], when: str | None = None) -> list[JSON]:
    """Three realistic ``managedFields`` entries for ``obj`` (see the module docstring)."""
    when = when or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = obj.get("metadata") or {}
    api_version = str(obj.get("apiVersion") or "v1")
    body = {k: v for k, v in obj.items() if k not in _NOT_FIELDS}
    applied: JSON = {"f:metadata": {"f:labels": {".": {}, **fields_v1(meta.get("labels") or {})}}, **fields_v1(body)}
    edited: JSON = {"f:metadata": {"f:annotations": {
        ".": {}, **fields_v1(meta.get("annotations") or {}),
        "f:kubectl.kubernetes.io/last-applied-configuration": {}}}}
    third: JSON = {"manager": MANAGERS[2], "operation": "Update", "apiVersion": api_version, "time": when,
                   "fieldsType": "FieldsV1"}
    if isinstance(obj.get("status"), Mapping):
        third.update(subresource="status", fieldsV1={"f:status": {".": {}, **fields_v1(obj["status"])}})
    else:
        third["fieldsV1"] = {"f:metadata": {"f:finalizers": {".": {}}, "f:ownerReferences": {".": {}}}}
    return [
        {"manager": MANAGERS[0], "operation": "Apply", "apiVersion": api_version, "time": when,
         "fieldsType": "FieldsV1", "fieldsV1": applied},
        {"manager": MANAGERS[1], "operation": "Update", "apiVersion": api_version, "time": when,
         "fieldsType": "FieldsV1", "fieldsV1": edited},
        third,
    ]


def _pem(rng: random.Random) -> str:
    der = base64.b64encode(rng.randbytes(820)).decode()
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(textwrap.wrap(der, 64)) + "\n-----END CERTIFICATE-----\n"


def _helm_payload(rng: random.Random, size: int) -> str:
    """``data.release`` as the API server stores it: base64(base64(gzip)) of about ``size`` bytes.

    Random bytes behind a gzip header stand in for the compressed release (gzip output does not
    compress further, and neither do these)."""
    gzip_size = max(16, size * 3 // 4 * 3 // 4)
    gzipped = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + rng.randbytes(gzip_size - 10)
    return base64.b64encode(base64.b64encode(gzipped)).decode()


def _create(store: Store, group: str, plural: str, namespace: str | None, body: JSON,
            managed_fields: bool = True) -> bool:
    rt = store.resolve(group, "v1", plural)
    assert rt is not None
    if managed_fields:
        body["metadata"]["managedFields"] = managed_fields_for(body)
    try:
        store.create(rt, namespace, body, {})
    except ApiError as err:
        if err.code == 409:
            return False
        raise
    return True


def seed(server: ApiServer, *, namespaces: Sequence[str] | int = 10, helm_secrets: int = 20, secret_kb: int = 50,
         helm_revisions: int = 3, managed_fields: bool = True, seed: int = 0) -> SeedReport:
    """Make ``server`` look like a real cluster (see the module docstring).

    Args:
        server: the in-memory API server.
        namespaces: names, or how many ``app-<i>`` namespaces to create (the built-in four are always seeded).
        helm_secrets: Helm release Secrets in all, spread over the namespaces (``helm_revisions`` per release).
        secret_kb: size of each one's ``data.release`` in KB (1024 bytes).
        helm_revisions: revisions per release (Helm keeps up to 10).
        managed_fields: create the seeded objects with three managers' ``managedFields`` (off: only the
            entry the double records for the create itself).
        seed: for the pseudo-random payloads.

    Returns:
        What was created.
    """
    store = server.store
    rng = random.Random(seed)
    names = [f"app-{i}" for i in range(namespaces)] if isinstance(namespaces, int) else list(namespaces)
    for name in names:
        _create(store, "", "namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": name, "labels": {"kubernetes.io/metadata.name": name}}}, managed_fields)
    everything = ["default", "kube-system", "kube-public", "kube-node-lease", *[n for n in names if n not in (
        "default", "kube-system", "kube-public", "kube-node-lease")]]
    report = SeedReport(everything)
    pem = _pem(rng)
    for name in everything:
        report.configmaps += _create(store, "", "configmaps", name, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": name,
                         "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to "
                                         "verify the kube-apiserver when using internal endpoints such as the "
                                         "internal service IP or kubernetes.default.svc. No other usage is "
                                         "guaranteed across distributions of Kubernetes clusters."}},
            "data": {"ca.crt": pem}}, managed_fields)
    for body in helm_release_secrets(names, helm_secrets, secret_kb, helm_revisions, rng):
        if _create(store, "", "secrets", body["metadata"]["namespace"], body, managed_fields):
            report.secrets += 1
            report.secret_bytes += len(body["data"]["release"])
    return report


def helm_release_secrets(namespaces: Sequence[str], count: int, secret_kb: int, revisions: int,
                         rng: random.Random) -> Iterator[JSON]:
    """``count`` Helm release Secrets (``revisions`` per release, the last one ``deployed``), spread over
    ``namespaces`` (``default`` if empty), each with a ``data.release`` of about ``secret_kb`` KB
    (Helm 3's ``storage/driver/secrets.go`` ``newSecretsObject``: name, type and labels)."""
    targets = list(namespaces) or ["default"]
    for i in range(count):
        release, revision = f"release-{i // revisions}", i % revisions + 1
        namespace = targets[(i // revisions) % len(targets)]
        yield {
            "apiVersion": "v1", "kind": "Secret", "type": HELM_RELEASE_TYPE,
            "metadata": {"name": f"sh.helm.release.v1.{release}.v{revision}", "namespace": namespace,
                         "labels": {"name": release, "owner": "helm", "version": str(revision),
                                    "status": "deployed" if revision == revisions else "superseded"}},
            "data": {"release": _helm_payload(rng, secret_kb * 1024)}}
