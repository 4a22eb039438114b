"""A scraper allowed to read zkop's secure ``/metrics``: the shipped reader ClusterRole, bound, and a token.

``manifests/rbac/metrics_reader_role.yaml`` is applied as it ships (so a change to it that
breaks scraping fails the tests), bound with a ClusterRoleBinding to a ServiceAccount, and the
in-memory API server issues that ServiceAccount a token its TokenReview knows (:func:`reader_token`), or a real
kube-apiserver does, through the TokenRequest API (:func:`service_account_token`).
"""

from __future__ import annotations

import yaml
from kubernetes.client.exceptions import ApiException

from zkop.kube.client import KubeClient
from zkop_testing.apiserver import ApiServer
from zkop_testing.kustomize import REPO

__all__ = ["READER_ROLE", "bind_shipped_reader_role", "reader_binding", "reader_token", "service_account_token"]

RBAC = "/apis/rbac.authorization.k8s.io/v1"
READER_ROLE = REPO / "manifests/rbac/metrics_reader_role.yaml"


def bind_shipped_reader_role(kube: KubeClient, namespace: str, name: str) -> None:
    """Create the reader ClusterRole (once) and bind it to the ServiceAccount ``namespace/name``."""
    reader = yaml.safe_load(READER_ROLE.read_text())
    try:
        kube.request("POST", f"{RBAC}/clusterroles", body=reader)
    except ApiException as err:
        if err.status != 409:
            raise
    kube.request("POST", f"{RBAC}/clusterrolebindings", body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": reader_binding(namespace, name)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader["metadata"]["name"]},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})


def reader_token(apiserver: ApiServer, kube: KubeClient, namespace: str = "monitoring",
                 name: str = "prometheus") -> str:
    """A token of ``namespace/name``, bound to the shipped reader role (Prometheus' view)."""
    bind_shipped_reader_role(kube, namespace, name)
    return apiserver.auth.service_account_token(namespace, name)


def reader_binding(namespace: str, name: str) -> str:
    """The name of the ClusterRoleBinding :func:`bind_shipped_reader_role` makes for ``namespace/name`` (cluster
    scoped: a test on a shared control plane deletes it afterwards)."""
    reader = yaml.safe_load(READER_ROLE.read_text())
    return f"{reader['metadata']['name']}-{namespace}-{name}"


def service_account_token(kube: KubeClient, namespace: str, name: str) -> str:
    """Create the ServiceAccount ``namespace/name`` on a real kube-apiserver and return a token of it from the
    TokenRequest API (an hour), as the kubelet mounts one (kube-apiserver's TokenReview knows it)."""
    kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body={"metadata": {"name": name}})
    answer = kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                          body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": 3600}})
    return str(answer["status"]["token"])
