"""TokenReview, SubjectAccessReview and RBAC kinds in the in-memory API server, through the real clients."""

from __future__ import annotations

from typing import Any

import kubernetes.client as k8s
import pytest
import yaml
from kubernetes.client.exceptions import ApiException
from zkop_testing.apiserver import TOKEN, ApiServer
from zkop_testing.kustomize import REPO

from zkop.kube.client import KubeClient

JSON = dict[str, Any]
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def token_review(kube: KubeClient, token: str, audiences: list[str] | None = None) -> JSON:
    spec: JSON = {"token": token}
    if audiences is not None:
        spec["audiences"] = audiences
    return kube.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec})


def sar(kube: KubeClient, user: str, groups: list[str] | None = None, **attributes: Any) -> JSON:
    spec: JSON = {"user": user, "groups": groups or ["system:authenticated"], **attributes}
    status: JSON = kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})["status"]
    return status


def non_resource(path: str, verb: str = "get") -> JSON:
    return {"nonResourceAttributes": {"path": path, "verb": verb}}


def resource(verb: str, resource: str, namespace: str = "", group: str = "", subresource: str = "",
             name: str = "") -> JSON:
    return {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace, "group": group,
                                   "subresource": subresource, "name": name}}


def create(kube: KubeClient, plural: str, obj: JSON, namespace: str | None = None) -> JSON:
    path = f"{RBAC}/namespaces/{namespace}/{plural}" if namespace else f"{RBAC}/{plural}"
    return kube.request("POST", path, body={"apiVersion": "rbac.authorization.k8s.io/v1", **obj})


def role(name: str, rules: list[JSON], kind: str = "ClusterRole") -> JSON:
    return {"kind": kind, "metadata": {"name": name}, "rules": rules}


def binding(name: str, role_kind: str, role_name: str, subjects: list[JSON], kind: str = "ClusterRoleBinding") -> JSON:
    return {"kind": kind, "metadata": {"name": name}, "subjects": subjects,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name}}


def test_token_review_knows_issued_tokens(server: ApiServer, kube: KubeClient) -> None:
    token = server.auth.service_account_token("monitoring", "prometheus")
    review = token_review(kube, token)
    assert review["kind"] == "TokenReview" and review["apiVersion"] == "authentication.k8s.io/v1"
    status = review["status"]
    assert status["authenticated"] is True
    assert status["user"]["username"] == "system:serviceaccount:monitoring:prometheus"
    assert status["user"]["groups"] == ["system:serviceaccounts", "system:serviceaccounts:monitoring",
                                        "system:authenticated"]
    assert status["user"]["uid"]
    assert status["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    admin = token_review(kube, TOKEN)["status"]
    assert admin["authenticated"] is True and "system:masters" in admin["user"]["groups"]


def test_token_review_of_unknown_revoked_or_foreign_tokens(server: ApiServer, kube: KubeClient) -> None:
    status = token_review(kube, "made-up")["status"]
    assert "authenticated" not in status and status["error"] == "invalid bearer token" and status["user"] == {}
    token = server.auth.service_account_token("default", "x")
    server.auth.revoke(token)
    assert "authenticated" not in token_review(kube, token)["status"]
    vault = server.auth.service_account_token("default", "y", audiences=["vault"])
    assert "authenticated" not in token_review(kube, vault)["status"]
    assert token_review(kube, vault, ["vault", "other"])["status"]["audiences"] == ["vault"]
    with pytest.raises(ApiException) as err:
        token_review(kube, "")
    assert err.value.status == 400 and "token is required" in str(err.value.body)


def test_typed_clients_and_discovery(api: Any) -> None:
    review = k8s.AuthenticationV1Api(api).create_token_review(
        k8s.V1TokenReview(spec=k8s.V1TokenReviewSpec(token=TOKEN)))
    assert review.status is not None and review.status.authenticated is True
    access = k8s.AuthorizationV1Api(api).create_subject_access_review(k8s.V1SubjectAccessReview(
        spec=k8s.V1SubjectAccessReviewSpec(user="nobody", non_resource_attributes=k8s.V1NonResourceAttributes(
            path="/metrics", verb="get"))))
    assert access.status is not None and access.status.allowed is False
    groups = {g.name for g in k8s.ApisApi(api).get_api_versions().groups}
    assert {"authentication.k8s.io", "authorization.k8s.io", "rbac.authorization.k8s.io"} <= groups
    names = {r.name: r.verbs for r in k8s.AuthenticationV1Api(api).get_api_resources().resources}
    assert names == {"tokenreviews": ["create"]}
    roles = k8s.RbacAuthorizationV1Api(api).list_cluster_role()
    assert roles.items == []


def test_review_endpoints_only_create(kube: KubeClient) -> None:
    with pytest.raises(ApiException) as err:
        kube.request("GET", "/apis/authentication.k8s.io/v1/tokenreviews")
    assert err.value.status == 405


def test_sar_from_cluster_role_bindings_with_non_resource_urls(kube: KubeClient) -> None:
    sa = "system:serviceaccount:monitoring:prometheus"
    assert sar(kube, sa, **non_resource("/metrics")) == {"allowed": False}
    create(kube, "clusterroles", role("reader", [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]))
    create(kube, "clusterrolebindings", binding("reader", "ClusterRole", "reader",
                                                [{"kind": "ServiceAccount", "name": "prometheus",
                                                  "namespace": "monitoring"}]))
    status = sar(kube, sa, **non_resource("/metrics"))
    assert status == {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "reader" of ClusterRole '
                                                 '"reader" to ServiceAccount "prometheus"'}
    assert sar(kube, sa, **non_resource("/metrics", "post"))["allowed"] is False
    assert sar(kube, sa, **non_resource("/metrics/extra"))["allowed"] is False
    assert sar(kube, "system:serviceaccount:other:prometheus", **non_resource("/metrics"))["allowed"] is False
    # Prefix and wildcard URLs; Group and User subjects.
    create(kube, "clusterroles", role("debug", [{"nonResourceURLs": ["/debug/*"], "verbs": ["*"]}]))
    create(kube, "clusterrolebindings", binding("debug", "ClusterRole", "debug",
                                                [{"kind": "Group", "name": "ops"}, {"kind": "User", "name": "ann"}]))
    assert sar(kube, "bob", ["ops"], **non_resource("/debug/pprof", "get"))["allowed"] is True
    assert sar(kube, "ann", **non_resource("/debug/x", "delete"))["allowed"] is True
    assert sar(kube, "bob", **non_resource("/debug/x"))["allowed"] is False
    # A binding to a role that does not exist grants nothing.
    create(kube, "clusterrolebindings", binding("dangling", "ClusterRole", "absent", [{"kind": "User", "name": "cy"}]))
    assert sar(kube, "cy", **non_resource("/metrics"))["allowed"] is False


def test_sar_system_masters_is_always_allowed(kube: KubeClient) -> None:
    assert sar(kube, "admin", ["system:masters"], **resource("delete", "secrets", "kube-system"))["allowed"] is True


def test_sar_resource_rules_and_role_bindings(kube: KubeClient, ns: str) -> None:
    create(kube, "roles", role("cm", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"],
                                       "resourceNames": []},
                                      {"apiGroups": ["platform.example.com"], "resources": ["*/status"],
                                       "verbs": ["patch"]},
                                      {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"],
                                       "resourceNames": ["web"]}], kind="Role"), ns)
    create(kube, "rolebindings", binding("cm", "Role", "cm", [{"kind": "ServiceAccount", "name": "app"}],
                                         kind="RoleBinding"), ns)
    sa = f"system:serviceaccount:{ns}:app"
    allowed = sar(kube, sa, **resource("get", "configmaps", ns))
    assert allowed["allowed"] is True and f'RoleBinding "cm" in namespace "{ns}" of Role "cm"' in allowed["reason"]
    assert sar(kube, sa, **resource("get", "configmaps", "default"))["allowed"] is False  # other namespace
    assert sar(kube, sa, **resource("get", "configmaps"))["allowed"] is False  # cluster-wide
    assert sar(kube, sa, **resource("delete", "configmaps", ns))["allowed"] is False
    assert sar(kube, sa, **resource("patch", "zookeeperconfigs", ns, "platform.example.com", "status"))["allowed"]
    assert not sar(kube, sa, **resource("patch", "zookeeperconfigs", ns, "platform.example.com"))["allowed"]
    assert sar(kube, sa, **resource("get", "deployments", ns, "apps", name="web"))["allowed"] is True
    assert sar(kube, sa, **resource("get", "deployments", ns, "apps", name="db"))["allowed"] is False
    # A RoleBinding never grants non-resource URLs, even to a ClusterRole that has them.
    create(kube, "clusterroles", role("metrics", [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]))
    create(kube, "rolebindings", binding("metrics", "ClusterRole", "metrics", [{"kind": "ServiceAccount",
                                                                                "name": "app"}],
                                         kind="RoleBinding"), ns)
    assert sar(kube, sa, **non_resource("/metrics"))["allowed"] is False


def test_sar_validation(kube: KubeClient) -> None:
    for spec in ({"user": "a"}, {"user": "a", **non_resource("/x"), **resource("get", "pods")},
                 {**non_resource("/metrics")}):
        with pytest.raises(ApiException) as err:
            kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body={
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        assert err.value.status == 422, spec


def test_the_shipped_reader_role_allows_scraping(server: ApiServer, kube: KubeClient) -> None:
    """manifests/rbac/metrics_reader_role.yaml, applied as is, is what the SubjectAccessReview needs."""
    reader = yaml.safe_load((REPO / "manifests/rbac/metrics_reader_role.yaml").read_text())
    create(kube, "clusterroles", reader)
    create(kube, "clusterrolebindings", binding("prometheus", "ClusterRole", reader["metadata"]["name"],
                                                [{"kind": "ServiceAccount", "name": "prometheus-k8s",
                                                  "namespace": "monitoring"}]))
    token = server.auth.service_account_token("monitoring", "prometheus-k8s")
    user = token_review(kube, token)["status"]["user"]
    assert sar(kube, user["username"], user["groups"], **non_resource("/metrics"))["allowed"] is True
