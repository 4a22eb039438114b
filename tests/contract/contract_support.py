"""Support code of the contract suite (kept out of conftest.py so test modules can import it).

The suite's custom resources are zkop's ZooKeeperConfig schema served under a group of their own,
``contract.zkop.example.com`` (:func:`contract_crd`): on a cluster where zkop runs (the kind job of
``.github/workflows/e2e.yaml``), zkop watches ``platform.example.com`` only, so it never adds
finalizers or status to the suite's objects or writes in its scratch namespace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.apiserver_fixtures import wait_for, zookeeperconfig_crd

from zkop.kube.client import ApiException, KubeClient, resource_path

CRDS = resource_path("apiextensions.k8s.io", "v1", "customresourcedefinitions")
#: The group of the suite's copy of the ZooKeeperConfig CRD (zkop does not reconcile it).
GROUP = "contract.zkop.example.com"
VERSION = "v1alpha1"
PLURAL = "zookeeperconfigs"


def contract_crd() -> dict[str, Any]:
    """zkop's ZooKeeperConfig CRD (``manifests/crd/``), same schema and subresources, in :data:`GROUP`."""
    crd = zookeeperconfig_crd()
    crd["metadata"] = {"name": f"{PLURAL}.{GROUP}", "labels": {"app.kubernetes.io/part-of": "zkop-contract-suite"}}
    crd["spec"]["group"] = GROUP
    crd["spec"]["names"].pop("shortNames", None)
    crd["spec"]["names"].pop("categories", None)
    return crd


@dataclass
class Cluster:
    """What a contract test talks to.

    Attributes:
        kube: zkop's JSON client.
        namespace: a namespace the test may write to.
        server: the in-memory server, or ``None`` on a real cluster.
    """

    kube: KubeClient
    namespace: str
    server: ApiServer | None

    @property
    def real(self) -> bool:
        """True against a real cluster."""
        return self.server is None

    def hooks(self) -> ApiServer:
        """The in-memory server for fault-injection tests; skips the test on a real cluster."""
        if self.server is None:
            pytest.skip("needs the fault-injection hooks of zkop_testing.apiserver")
        return self.server


def install_crd(kube: KubeClient) -> bool:
    """Create the CRD if missing and wait until it is established; True if it was created here."""
    name = contract_crd()["metadata"]["name"]
    created = False
    try:
        kube.request("GET", f"{CRDS}/{name}")
    except ApiException as exc:
        if exc.status != 404:
            raise
        kube.request("POST", CRDS, body=contract_crd())
        created = True

    def established() -> bool:
        crd = kube.request("GET", f"{CRDS}/{name}")
        # kube-apiserver answers ``conditions: null`` until the CRD's names are accepted.
        return any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    wait_for(established, timeout=60, message="CRD established")
    return created
