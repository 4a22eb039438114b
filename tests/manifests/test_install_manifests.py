"""The install under ``manifests/``: it renders, every object is valid Kubernetes, RBAC is least privilege.

Rendering uses :func:`zkop_testing.kustomize.render`; where ``kubectl`` is installed its
``kubectl kustomize`` output must be identical, so the renderer cannot drift from kustomize.
Schemas are Kubernetes' own OpenAPI schemas as shipped by ``kubernetes-validate`` (strict: an
unknown field fails), for the oldest and newest Kubernetes versions zkop supports.
"""

from __future__ import annotations

import base64
import copy
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
from kubernetes_validate.utils import SchemaNotFoundError  # type: ignore[import-untyped]
from kubernetes_validate.utils import ValidationError as SchemaValidationError
from zkop_testing.kustomize import (
    REPO,
    Obj,
    containers,
    find,
    kubectl_kustomize,
    object_id,
    pod_spec,
    rbac_rules,
    render,
)

from zkop.cmd.main import build_parser

#: Oldest and newest Kubernetes minor versions the manifests must validate against.
KUBERNETES_VERSIONS = ("1.29", "1.37")
NAMESPACE = "zkop-system"
DEPLOYMENT = "zkop-controller-manager"
#: Kinds whose schemas are not Kubernetes built-ins (checked elsewhere).
CUSTOM_KINDS = {"ServiceMonitor", "PrometheusRule"}

#: What zkop's ZooKeeperConfig controller, events, dataFrom and leader election need.
EXPECTED_CORE_RULES = {
    *(("platform.example.com", "zookeeperconfigs", v) for v in ("list", "watch", "patch")),
    ("platform.example.com", "zookeeperconfigs/status", "patch"),
    ("platform.example.com", "zookeeperconfigs/finalizers", "update"),
    # ZooKeeperConfigTrees (--config-trees, on in the base): the same requests.
    *(("platform.example.com", "zookeeperconfigtrees", v) for v in ("list", "watch", "patch")),
    ("platform.example.com", "zookeeperconfigtrees/status", "patch"),
    ("platform.example.com", "zookeeperconfigtrees/finalizers", "update"),
    *(("", r, v) for r in ("configmaps", "secrets") for v in ("get", "watch")),  # never list: only named ones
    ("", "events", "create"),
    ("", "events", "patch"),
    *(("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")),
    # --metrics-secure: TokenReview and SubjectAccessReview for each /metrics client.
    ("authentication.k8s.io", "tokenreviews", "create"),
    ("authorization.k8s.io", "subjectaccessreviews", "create"),
}
#: What the service bridge adds.
EXPECTED_BRIDGE_RULES = {
    *(("", "services", v) for v in ("list", "watch")),
    *(("discovery.k8s.io", "endpointslices", v) for v in ("list", "watch")),
}


def deployment(rendered: list[Obj]) -> Obj:
    """The zkop Deployment in ``rendered``."""
    (dep,) = find(rendered, "Deployment", DEPLOYMENT)
    return dep


def manager(rendered: list[Obj]) -> Obj:
    """The ``manager`` container of the zkop Deployment."""
    (container,) = [c for c in containers(deployment(rendered)) if c["name"] == "manager"]
    return container


def args_of(rendered: list[Obj]) -> list[str]:
    """The manager container's args."""
    args: list[str] = manager(rendered)["args"]
    return args


# --------------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------------


def test_default_install_contains_the_whole_operator(rendered_default: list[Obj]) -> None:
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in rendered_default)
    assert kinds == [
        ("ClusterRole", "zkop-edit"),
        ("ClusterRole", "zkop-manager-role"),
        ("ClusterRole", "zkop-metrics-auth-role"),
        ("ClusterRole", "zkop-metrics-reader"),
        ("ClusterRole", "zkop-view"),
        ("ClusterRoleBinding", "zkop-manager-rolebinding"),
        ("ClusterRoleBinding", "zkop-metrics-auth-rolebinding"),
        ("ConfigMap", "zkop-config"),
        ("CustomResourceDefinition", "zookeeperconfigs.platform.example.com"),
        ("CustomResourceDefinition", "zookeeperconfigtrees.platform.example.com"),
        ("CustomResourceDefinition", "zookeeperensembles.platform.example.com"),
        ("CustomResourceDefinition", "zookeepermirrors.platform.example.com"),
        ("CustomResourceDefinition", "zookeeperserviceimports.platform.example.com"),
        ("Deployment", DEPLOYMENT),
        ("Namespace", NAMESPACE),
        ("PodDisruptionBudget", DEPLOYMENT),
        ("Role", "zkop-leader-election-role"),
        ("RoleBinding", "zkop-leader-election-rolebinding"),
        ("ServiceAccount", "zkop"),
    ]
    for obj in rendered_default:
        if obj["kind"] not in ("Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"):
            assert obj["metadata"]["namespace"] == NAMESPACE, object_id(obj)
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "zkop", object_id(obj)


def test_crd_in_the_install_is_the_crd_file(rendered_default: list[Obj]) -> None:
    installed = {c["metadata"]["name"]: c["spec"] for c in find(rendered_default, "CustomResourceDefinition")}
    assert installed == {c["metadata"]["name"]: c["spec"] for c in render(REPO / "manifests" / "crd")}
    assert set(installed) == {"zookeeperconfigs.platform.example.com", "zookeeperensembles.platform.example.com",
                              "zookeepermirrors.platform.example.com", "zookeeperconfigtrees.platform.example.com",
                              "zookeeperserviceimports.platform.example.com"}


def test_components_add_only_what_they_promise(rendered_default: list[Obj], rendered_full: list[Obj]) -> None:
    added = {object_id(o) for o in rendered_full} - {object_id(o) for o in rendered_default}
    assert {(kind, name) for _, kind, _, name in added} == {
        ("ClusterRole", "zkop-service-bridge-role"),
        ("ClusterRoleBinding", "zkop-service-bridge-rolebinding"),
        ("Service", "zkop-controller-manager-metrics"),
        ("ServiceMonitor", "zkop-controller-manager"),
        ("PrometheusRule", "zkop"),
    }
    assert args_of(rendered_full) == [*args_of(rendered_default), "--service-bridge"]


@pytest.mark.parametrize("path", ["manifests/default", "manifests/crd", "tests/e2e/overlay", "FULL"])
def test_renderer_matches_kubectl_kustomize(path: str, full_overlay: Path) -> None:
    directory = full_overlay if path == "FULL" else REPO / path
    expected = kubectl_kustomize(directory)
    if expected is None:
        pytest.skip("kubectl is not installed; the renderer is not cross-checked here")
    ours = {object_id(o): o for o in render(directory)}
    theirs = {object_id(o): o for o in expected}
    assert sorted(ours) == sorted(theirs)
    for oid, obj in ours.items():
        assert obj == theirs[oid], oid


# --------------------------------------------------------------------------------------------
# schemas
# --------------------------------------------------------------------------------------------


def _validate(obj: Obj, version: str) -> None:
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except SchemaValidationError as err:
        where = ".".join(str(p) for p in err.path)
        pytest.fail(f"{object_id(obj)} invalid for Kubernetes {version} at {where}: {err.message}")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_matches_kubernetes_openapi_schema(rendered_full: list[Obj], version: str) -> None:
    checked = 0
    for obj in rendered_full:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        _validate(obj, version)
        checked += 1
    assert checked == len(rendered_full) - len(CUSTOM_KINDS)


def test_schema_validation_is_strict(rendered_default: list[Obj]) -> None:
    broken = copy.deepcopy(deployment(rendered_default))
    pod_spec(broken)["containers"][0]["securityContex"] = {}  # type: ignore[index]
    with pytest.raises(SchemaValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[0], strict=True)
    with pytest.raises(SchemaNotFoundError):
        kubernetes_validate.validate({"apiVersion": "example.com/v1", "kind": "Nope", "metadata": {}},
                                     KUBERNETES_VERSIONS[0], strict=True)


# --------------------------------------------------------------------------------------------
# RBAC
# --------------------------------------------------------------------------------------------


def _rbac_objects(rendered: list[Obj]) -> list[Obj]:
    return [o for o in rendered if o["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")]


def test_rbac_has_no_wildcards(rendered_full: list[Obj]) -> None:
    roles = [o for o in _rbac_objects(rendered_full) if o["kind"] in ("Role", "ClusterRole")]
    assert len(roles) == 7
    for role in roles:
        assert "aggregationRule" not in role
        for rule in role["rules"]:
            # Only the scrapers' role names a URL (kubebuilder's metrics-reader), and only /metrics.
            if role["metadata"]["name"] == "zkop-metrics-reader":
                assert rule == {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
            else:
                assert "nonResourceURLs" not in rule
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert all("*" not in value for value in rule.get(key, [])), (role["metadata"]["name"], rule)


def test_tenant_roles_aggregate_configs_and_mirrors_never_ensembles(rendered_default: list[Obj]) -> None:
    roles = {o["metadata"]["name"]: o for o in rendered_default if o["kind"] == "ClusterRole"}
    aggregate = "rbac.authorization.k8s.io/aggregate-to-"
    labels = {name: sorted(k for k, v in roles[name]["metadata"]["labels"].items() if k.startswith(aggregate)
                           and v == "true") for name in ("zkop-edit", "zkop-view")}
    assert labels == {"zkop-edit": [aggregate + "admin", aggregate + "edit"], "zkop-view": [aggregate + "view"]}
    for name, verbs in (("zkop-edit", ["create", "update", "patch", "delete", "get", "list", "watch"]),
                        ("zkop-view", ["get", "list", "watch"])):
        assert roles[name]["rules"] == [
            {"apiGroups": ["platform.example.com"], "resources": ["zookeeperconfigs", "zookeepermirrors",
                                                                   "zookeeperconfigtrees", "zookeeperserviceimports"],
             "verbs": verbs},
            {"apiGroups": ["platform.example.com"], "resources": ["zookeeperconfigs/status", "zookeepermirrors/status",
                                                                   "zookeeperconfigtrees/status",
                                                                   "zookeeperserviceimports/status"],
             "verbs": ["get"]}]


def test_rbac_grants_exactly_what_zkop_uses(rendered_default: list[Obj], rendered_full: list[Obj]) -> None:
    assert rbac_rules(rendered_default) == EXPECTED_CORE_RULES
    assert rbac_rules(rendered_full) == EXPECTED_CORE_RULES | EXPECTED_BRIDGE_RULES


def test_rbac_never_grants_destructive_verbs(rendered_full: list[Obj]) -> None:
    verbs = {verb for _, _, verb in rbac_rules(rendered_full)}
    assert verbs.isdisjoint({"delete", "deletecollection", "escalate", "bind", "impersonate", "*"})
    assert {(g, r) for g, r, v in rbac_rules(rendered_full) if v == "create"} == {
        ("", "events"), ("coordination.k8s.io", "leases"), ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews")}


def test_leases_are_granted_in_zkops_namespace_only(rendered_full: list[Obj]) -> None:
    for role in find(rendered_full, "ClusterRole"):
        assert all("leases" not in rule.get("resources", []) for rule in role["rules"])
    (role,) = find(rendered_full, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    (binding,) = find(rendered_full, "RoleBinding")
    assert binding["metadata"]["namespace"] == NAMESPACE
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": role["metadata"]["name"]}


def test_every_binding_is_for_zkops_service_account(rendered_full: list[Obj]) -> None:
    (sa,) = find(rendered_full, "ServiceAccount")
    assert (sa["metadata"]["namespace"], sa["metadata"]["name"]) == (NAMESPACE, "zkop")
    assert pod_spec(deployment(rendered_full))["serviceAccountName"] == "zkop"  # type: ignore[index]
    bindings = [o for o in _rbac_objects(rendered_full) if o["kind"].endswith("Binding")]
    assert len(bindings) == 4
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "zkop", "namespace": NAMESPACE}]


def test_rbac_rules_helper_follows_bindings() -> None:
    objs: list[Obj] = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "a"},
         "rules": [{"apiGroups": ["", "apps"], "resources": ["pods", "deployments"], "verbs": ["get"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "unbound"},
         "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "a"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "a"},
         "subjects": [{"kind": "ServiceAccount", "name": "zkop", "namespace": NAMESPACE}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "b"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "unbound"},
         "subjects": [{"kind": "ServiceAccount", "name": "zkop", "namespace": "elsewhere"}]},
    ]
    assert rbac_rules(objs) == {(g, r, "get") for g in ("", "apps") for r in ("pods", "deployments")}
    with pytest.raises(ValueError, match="missing"):
        rbac_rules(objs[2:3])


# --------------------------------------------------------------------------------------------
# the Deployment
# --------------------------------------------------------------------------------------------


def test_deployment_is_highly_available(rendered_default: list[Obj]) -> None:
    dep = deployment(rendered_default)
    assert dep["spec"]["replicas"] == 2
    assert "--leader-elect" in args_of(rendered_default)
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    spec = pod_spec(dep)
    assert spec is not None
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    spreads = spec["topologySpreadConstraints"]
    assert any(s["topologyKey"] == "kubernetes.io/hostname" for s in spreads)
    for s in spreads:
        assert s["labelSelector"]["matchLabels"].items() <= pod_labels.items()
    (term,) = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= pod_labels.items()
    (pdb,) = find(rendered_default, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


def test_deployment_security_context(rendered_default: list[Obj]) -> None:
    dep = deployment(rendered_default)
    spec = pod_spec(dep)
    assert spec is not None
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
    for container in containers(dep):
        effective: dict[str, Any] = {**spec["securityContext"], **container["securityContext"]}
        assert effective["runAsNonRoot"] is True
        assert effective["runAsUser"] == 65532
        assert effective["readOnlyRootFilesystem"] is True
        assert effective["allowPrivilegeEscalation"] is False
        assert effective.get("privileged", False) is False
        assert effective["capabilities"] == {"drop": ["ALL"]}
        assert effective["seccompProfile"] == {"type": "RuntimeDefault"}
    ns = find(rendered_default, "Namespace")[0]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_images_are_pinned_to_the_release(rendered_full: list[Obj]) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    images = [c["image"] for o in rendered_full for c in containers(o)]
    assert images == [f"ghcr.io/example/zkop:{version}"]
    for image in images:
        tag = image.rpartition(":")[2]
        assert "/" not in tag and tag not in ("", "latest"), image
    assert manager(rendered_full)["imagePullPolicy"] == "IfNotPresent"


def test_probes_ports_and_resources(rendered_default: list[Obj]) -> None:
    container = manager(rendered_default)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": 8443, "health": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    args = args_of(rendered_default)
    assert "--metrics-bind-address=:8443" in args
    assert "--health-probe-bind-address=:8081" in args
    resources = container["resources"]
    assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}
    assert resources["requests"] == {"cpu": "100m", "memory": "128Mi"}
    assert resources["limits"] == {"cpu": "500m", "memory": "256Mi"}


def test_graceful_shutdown_fits_in_the_termination_grace_period(rendered_default: list[Obj]) -> None:
    spec = pod_spec(deployment(rendered_default))
    assert spec is not None
    parsed = build_parser().parse_args(args_of(rendered_default))
    assert spec["terminationGracePeriodSeconds"] == 40
    assert parsed.graceful_shutdown_timeout == 30
    assert spec["terminationGracePeriodSeconds"] > parsed.graceful_shutdown_timeout


def test_args_are_accepted_by_zkop_run(rendered_full: list[Obj]) -> None:
    parsed, unknown = build_parser().parse_known_args(args_of(rendered_full))
    # Until zkop run knows the service-bridge flags they are left over; nothing else may be.
    assert all(arg.startswith("--service-bridge") for arg in unknown), unknown
    assert parsed.command == "run"
    assert parsed.leader_elect is True
    assert parsed.zk_auth_file == "/etc/zkop/zookeeper-auth/credentials"
    assert parsed.log_format == "json"
    assert args_of(rendered_full)[0] == "run"


def test_zookeeper_configuration_comes_from_configmap_and_secret(rendered_default: list[Obj]) -> None:
    container = manager(rendered_default)
    env = {e["name"]: e for e in container["env"]}
    assert env["ZOOKEEPER_HOSTS"]["valueFrom"]["configMapKeyRef"] == {"name": "zkop-config",
                                                                       "key": "ZOOKEEPER_HOSTS"}
    assert env["ZKOP_CLUSTER_ID"]["valueFrom"]["configMapKeyRef"]["key"] == "ZKOP_CLUSTER_ID"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    (config,) = find(rendered_default, "ConfigMap", "zkop-config")
    assert config["data"]["ZOOKEEPER_HOSTS"]
    assert config["data"]["ZKOP_CLUSTER_ID"] == "default"
    # Each variable is the fallback of a zkop run flag: check zkop reads it.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZOOKEEPER_HOSTS", "zk-a:2181,zk-b:2181/chroot")
        mp.setenv("ZKOP_CLUSTER_ID", "eu-1")
        parsed = build_parser().parse_args(["run"])
    assert (parsed.zk_hosts, parsed.cluster_id) == ("zk-a:2181,zk-b:2181/chroot", "eu-1")
    spec = pod_spec(deployment(rendered_default))
    assert spec is not None
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    secret = volumes["zookeeper-auth"]["secret"]
    assert secret["secretName"] == "zkop-zookeeper-auth"
    assert secret["optional"] is True
    assert mounts["zookeeper-auth"]["mountPath"] == "/etc/zkop/zookeeper-auth"
    assert mounts["zookeeper-auth"]["readOnly"] is True
    assert [i["path"] for i in secret.get("items", [])] in ([], ["credentials"])
    assert "--zk-auth-file=/etc/zkop/zookeeper-auth/credentials" in args_of(rendered_default)
    assert mounts["tmp"]["mountPath"] == "/tmp" and "emptyDir" in volumes["tmp"]
    assert set(mounts) == set(volumes)
    # The Secret is the user's: never shipped (Flux would overwrite it).
    assert not find(rendered_default, "Secret")


def test_metrics_service_selects_the_manager_pods(rendered_full: list[Obj]) -> None:
    (service,) = find(rendered_full, "Service")
    pod_labels = deployment(rendered_full)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port == {"name": "https", "port": 8443, "targetPort": "https", "protocol": "TCP"}
    (monitor,) = find(rendered_full, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["https"]
    assert "jobLabel" not in monitor["spec"]  # job = the Service's name, which the alerts select on


def test_metrics_are_secure_by_default(rendered_full: list[Obj]) -> None:
    """kubebuilder's layout: HTTPS on 8443 behind TokenReview/SubjectAccessReview, scraped with a token."""
    parsed = build_parser().parse_args(args_of(rendered_full))
    assert parsed.metrics_secure is True and parsed.metrics_bind_address == ":8443"
    assert parsed.metrics_cert_dir is None  # self-signed unless an overlay mounts a certificate
    (endpoint,) = find(rendered_full, "ServiceMonitor")[0]["spec"]["endpoints"]
    assert endpoint["scheme"] == "https" and endpoint["path"] == "/metrics"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}  # the documented default for a self-signed cert


def test_metrics_rbac(rendered_default: list[Obj]) -> None:
    """zkop may create the two reviews; the reader role grants exactly get on /metrics and is bound to no one."""
    granted = rbac_rules(rendered_default)
    assert {("authentication.k8s.io", "tokenreviews", "create"),
            ("authorization.k8s.io", "subjectaccessreviews", "create")} <= granted
    (reader,) = find(rendered_default, "ClusterRole", "zkop-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    bound = {b["roleRef"]["name"] for b in rendered_default if b["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    assert "zkop-metrics-reader" not in bound  # Prometheus' ServiceAccount is the user's to bind


def test_e2e_overlay(rendered_default: list[Obj]) -> None:
    """What the kind suite installs: valid, the locally built image, credentials matching examples/acl.yaml."""
    rendered = render(REPO / "tests" / "e2e" / "overlay")
    for obj in rendered:
        _validate(obj, KUBERNETES_VERSIONS[0])
    container = manager(rendered)
    assert container["image"] == "ghcr.io/example/zkop:e2e"
    assert container["imagePullPolicy"] == "Never"
    assert args_of(rendered) == [*args_of(rendered_default), "--service-bridge", "--sync-period=10"]
    (secret,) = find(rendered, "Secret", "zkop-zookeeper-auth")
    assert secret["metadata"]["namespace"] == NAMESPACE
    assert base64.b64decode(secret["data"]["credentials"]) == b"ops:ops-password"
