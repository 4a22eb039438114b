"""The tenant roles ``zkop-edit`` and ``zkop-view`` on a real control plane: aggregated into admin, edit and view.

kube-controller-manager's clusterrole-aggregation controller copies their rules into the built-in ``admin``,
``edit`` and ``view`` ClusterRoles; a user bound to one of those by a RoleBinding (impersonated by the admin)
may then do with ZooKeeperConfigs and ZooKeeperMirrors what the role says, in that namespace only, and never
create a ZooKeeperEnsemble.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from zkop_testing.controlplane import ControlPlane
from zkop_testing.kustomize import Obj
from zkop_testing.resources import ZKC, zkc
from zkop_testing.waiting import wait_for

from zkop.kube.client import ApiException, KubeClient, resource_path

GROUP, VERSION = "platform.example.com", "v1alpha1"
MIRRORS = (GROUP, VERSION, "zookeepermirrors")
ENSEMBLES = (GROUP, VERSION, "zookeeperensembles")


@pytest.fixture
def as_user(plane: ControlPlane) -> Iterator[Callable[[str], KubeClient]]:
    """``as_user(name)``: a client of the admin impersonating user ``name`` (closed at the end)."""
    clients: list[KubeClient] = []

    def make(user: str) -> KubeClient:
        api = plane.api_client()
        api.set_default_header("Impersonate-User", user)
        clients.append(KubeClient(api, default_timeout=30))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def _bind(kube: KubeClient, namespace: str, user: str, cluster_role: str) -> None:
    kube.request("POST", resource_path("rbac.authorization.k8s.io", "v1", "rolebindings", namespace), body={
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": f"{user}-{cluster_role}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})


def _aggregated(kube: KubeClient, cluster_role: str, verb: str) -> bool:
    role = kube.request("GET", resource_path("rbac.authorization.k8s.io", "v1", "clusterroles", None, cluster_role))
    return any(GROUP in (r.get("apiGroups") or []) and "zookeeperconfigs" in (r.get("resources") or [])
               and "zookeepermirrors" in (r.get("resources") or []) and verb in (r.get("verbs") or [])
               for r in role.get("rules") or [])


def _mirror(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ZooKeeperMirror", "metadata": {"name": name},
            "spec": {"path": "/app"}}


def _status(client: KubeClient, method: str, path: str, body: dict[str, Any] | None = None) -> int:
    """200 if ``client`` may send the request, else the API server's status code."""
    try:
        client.request(method, path, body=body)
    except ApiException as err:
        return int(err.status or 0)
    return 200


def test_namespace_admins_and_viewers_reach_configs_and_mirrors_but_no_ensemble(
        installed: list[Obj], kube: KubeClient, namespace: str, new_namespace: Callable[[], str],
        as_user: Callable[[str], KubeClient]) -> None:
    ns, other = namespace, new_namespace()
    for cluster_role, verb in (("admin", "create"), ("edit", "create"), ("view", "list")):
        wait_for(lambda r=cluster_role, v=verb: _aggregated(kube, r, v),  # type: ignore[misc]
                 message=f"zkop's tenant role aggregated into {cluster_role}")
    assert not _aggregated(kube, "view", "create")
    _bind(kube, ns, "alice", "admin")
    _bind(kube, ns, "erin", "edit")
    _bind(kube, ns, "victor", "view")

    for user in ("alice", "erin"):
        client = as_user(user)
        config = zkc(f"{user}-flag", f"/app/{user}", b"on", namespace=ns)
        assert _status(client, "POST", resource_path(*ZKC, ns), config) == 200, user
        assert _status(client, "POST", resource_path(*MIRRORS, ns), _mirror(user)) == 200, user
        assert _status(client, "GET", resource_path(*ZKC, ns, f"{user}-flag", "status")) == 200
        assert _status(client, "DELETE", resource_path(*MIRRORS, ns, user)) == 200, user
        # Not in another namespace, and no ensemble at all.
        elsewhere = zkc(f"{user}-flag", f"/app/{user}", b"on", namespace=other)
        assert _status(client, "POST", resource_path(*ZKC, other), elsewhere) == 403, user
        assert _status(client, "POST", resource_path(*MIRRORS, other), _mirror(user)) == 403
        ensemble = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ZooKeeperEnsemble", "metadata": {"name": user},
                    "spec": {"connectString": "zk:2181"}}
        assert _status(client, "POST", resource_path(*ENSEMBLES), ensemble) == 403, user

    viewer = as_user("victor")
    assert _status(viewer, "GET", resource_path(*ZKC, ns)) == 200
    assert _status(viewer, "GET", resource_path(*ZKC, ns, "alice-flag")) == 200
    assert _status(viewer, "GET", resource_path(*ZKC, ns, "alice-flag", "status")) == 200
    assert _status(viewer, "GET", resource_path(*MIRRORS, ns)) == 200
    assert _status(viewer, "POST", resource_path(*ZKC, ns), zkc("viewer-flag", "/app/v", b"x", namespace=ns)) == 403
    assert _status(viewer, "POST", resource_path(*MIRRORS, ns), _mirror("viewer")) == 403
    assert _status(viewer, "GET", resource_path(*ZKC, other)) == 403
