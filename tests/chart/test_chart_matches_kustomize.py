"""The Helm chart (``charts/zkop``) and the kustomize install (``manifests/``) are one install.

Each case renders the chart with the real ``helm template`` (built by ``hack/build-helm.sh``) and the matching
kustomization with the real ``kubectl kustomize``, and compares the objects one by one: equal but for the labels
only Helm writes (:data:`zkop_testing.helm.HELM_ONLY_LABELS`) and the CRD's ``helm.sh/resource-policy: keep``.
The one object only kustomize renders is the Namespace (Helm's release namespace exists before the release;
``helm install --create-namespace``). The CRD and the alerts are ``manifests/``'s own files (symlinks), packaged
as their contents. The values users set change what they say, and ``values.schema.json`` refuses what is wrong.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from zkop_testing.helm import CHART, HelmError, comparable, helm, helm_binary, kustomize_overlay, template
from zkop_testing.kustomize import REPO, Obj, containers, find, object_id

#: (chart values, the manifests/components that say the same).
CASES = {
    "default": ((), ()),
    "bridge-and-importer": (("serviceBridge.enabled=true", "serviceImport.enabled=true"),
                            ("service-bridge", "service-import")),
    "prometheus": (("metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true"), ("prometheus",)),
    "mirrors": (("zookeeperMirrors.enabled=true",), ("zookeeper-mirror",)),
    "ensembles": (("zookeeperEnsembles.enabled=true",), ("zookeeper-ensembles",)),
    "service-imports": (("serviceImports.enabled=true",), ("service-imports",)),
    "everything": (("serviceBridge.enabled=true", "serviceImport.enabled=true", "zookeeperMirrors.enabled=true",
                    "zookeeperEnsembles.enabled=true", "serviceImports.enabled=true",
                    "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true"),
                   ("service-bridge", "service-import", "zookeeper-mirror", "service-imports", "zookeeper-ensembles",
                    "prometheus")),
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Helm's cache/config/data directories for this module."""
    yield tmp_path_factory.mktemp("helm-home")


def by_id(objects: list[Obj]) -> dict[tuple[str, str, str, str], Obj]:
    """The objects keyed by ``(group, kind, namespace, name)``; no key twice."""
    keyed = {object_id(o): o for o in objects}
    assert len(keyed) == len(objects), "two objects with one id"
    return keyed


@pytest.mark.parametrize("case", CASES)
def test_helm_template_renders_what_kubectl_kustomize_renders(case: str, home: Path, tmp_path: Path) -> None:
    values, components = CASES[case]
    kustomized = by_id(kustomize_overlay(tmp_path / "overlay", components))
    charted = by_id(template(home, *values))
    namespace = kustomized.pop(("", "Namespace", "", "zkop-system"))
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert sorted(charted) == sorted(kustomized)
    for key, expected in kustomized.items():
        assert comparable(charted[key]) == expected, f"{key} differs between charts/zkop and manifests/"


def test_helm_labels_are_the_only_additions(home: Path) -> None:
    for obj in template(home, *CASES["everything"][0]):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/instance"] == "zkop"
        assert labels["helm.sh/chart"].startswith("zkop-")
    flux = {"kustomize.toolkit.fluxcd.io/prune": "disabled"}  # the CRD files' own
    crds = find(template(home), "CustomResourceDefinition")
    assert sorted(crd["metadata"]["name"] for crd in crds) == [
        "zookeeperconfigs.platform.example.com", "zookeeperconfigtrees.platform.example.com",
        "zookeeperensembles.platform.example.com", "zookeepermirrors.platform.example.com",
        "zookeeperserviceimports.platform.example.com"]
    for crd in crds:
        assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep", **flux}
    for crd in find(template(home, "crds.keep=false"), "CustomResourceDefinition"):
        assert crd["metadata"]["annotations"] == flux
    assert not find(template(home, "crds.install=false"), "CustomResourceDefinition")


def test_helm_lint_strict_passes() -> None:
    out = helm(CHART.parent, "lint", "--strict", str(CHART))
    assert "1 chart(s) linted, 0 chart(s) failed" in out


def test_chart_version_is_the_release_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    assert (chart["version"], chart["appVersion"]) == (project, project)


def test_the_crd_and_the_alerts_are_the_manifests_files(home: Path, tmp_path: Path) -> None:
    """The chart's files/ are symlinks to manifests/, and ``helm package`` packs their contents."""
    links = {"zookeeperconfigs.yaml": REPO / "manifests/crd/zookeeperconfigs.yaml",
             "zookeepermirrors.yaml": REPO / "manifests/crd/zookeepermirrors.yaml",
             "zookeeperconfigtrees.yaml": REPO / "manifests/crd/zookeeperconfigtrees.yaml",
             "zookeeperensembles.yaml": REPO / "manifests/crd/zookeeperensembles.yaml",
             "prometheusrule.yaml": REPO / "manifests/components/prometheus/prometheusrule.yaml"}
    for name, target in links.items():
        assert (CHART / "files" / name).is_symlink() and (CHART / "files" / name).resolve() == target
    helm(home, "package", str(CHART), "--destination", str(tmp_path))
    (package,) = tmp_path.glob("zkop-*.tgz")
    with tarfile.open(package) as tar:
        for name, target in links.items():
            member = tar.getmember(f"zkop/files/{name}")
            assert member.isfile()
            extracted = tar.extractfile(member)
            assert extracted is not None and extracted.read() == target.read_bytes()


def test_values_users_set(home: Path) -> None:
    objects = template(home, "image.repository=registry.example/zkop", "image.tag=9.9.9",
                       "image.digest=sha256:" + "a" * 64, "zookeeper.hosts=zk-0:2181\\,zk-1:2181/apps",
                       "zookeeper.clusterId=prod-eu", "zookeeper.auth.credentials=zkop:s3cret", "replicas=3",
                       "resources.limits.memory=1Gi", "extraArgs={--workers=8}",
                       "serviceBridge.enabled=true", "serviceBridge.args={--service-bridge-layout=nested}")
    (deployment,) = find(objects, "Deployment")
    (manager,) = containers(deployment)
    assert manager["image"] == "registry.example/zkop:9.9.9@sha256:" + "a" * 64
    assert deployment["spec"]["replicas"] == 3
    assert manager["resources"]["limits"]["memory"] == "1Gi"
    assert manager["args"][-3:] == ["--service-bridge", "--service-bridge-layout=nested", "--workers=8"]
    (config,) = find(objects, "ConfigMap")
    assert config["data"] == {"ZOOKEEPER_HOSTS": "zk-0:2181,zk-1:2181/apps", "ZKOP_CLUSTER_ID": "prod-eu"}
    (secret,) = find(objects, "Secret", "zkop-zookeeper-auth")
    assert secret["stringData"] == {"credentials": "zkop:s3cret"}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["zookeeper-auth"]["secret"]["secretName"] == "zkop-zookeeper-auth"

    existing = template(home, "zookeeper.auth.existingSecret=from-vault")
    assert not find(existing, "Secret")
    (deployment,) = find(existing, "Deployment")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["zookeeper-auth"]["secret"]["secretName"] == "from-vault"

    single = template(home, "replicas=1", "leaderElection.enabled=false", "metrics.secure=false")
    (deployment,) = find(single, "Deployment")
    (manager,) = containers(deployment)
    args = manager["args"]
    assert "--leader-elect" not in args and "--metrics-secure=false" in args
    assert not find(single, "Role") and not find(single, "RoleBinding")
    assert not find(single, "ClusterRole", "zkop-metrics-auth-role")

    other = template(home, release="ops", namespace="platform")
    (deployment,) = find(other, "Deployment")
    assert deployment["metadata"]["name"] == "ops-zkop-controller-manager"
    bindings = find(other, "ClusterRoleBinding")
    assert {s["namespace"] for b in bindings for s in b["subjects"]} == {"platform"}
    assert {s["name"] for b in bindings for s in b["subjects"]} == {"ops-zkop"}


def test_ensembles_secret_namespace_moves_the_secrets_role_and_sets_the_flag(home: Path) -> None:
    """``zookeeperEnsembles.secretNamespace``: ``--ensemble-secret-namespace`` and the Secrets' Role and RoleBinding
    in that namespace (for zkop's ServiceAccount in the release's); the rest as the component renders it. Off, no
    flag and none of the component's objects."""
    objects = template(home, "zookeeperEnsembles.enabled=true", "zookeeperEnsembles.secretNamespace=cert-manager")
    (manager,) = containers(find(objects, "Deployment")[0])
    assert manager["args"][-2:] == ["--zookeeper-ensembles", "--ensemble-secret-namespace=cert-manager"]
    (role,) = find(objects, "Role", "zkop-ensemble-secrets-role")
    (binding,) = find(objects, "RoleBinding", "zkop-ensemble-secrets-rolebinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "cert-manager"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "watch"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "zkop", "namespace": "zkop-system"}]
    moved = {object_id(o) for o in (role, binding)}
    component = [o for o in objects if o["metadata"].get("labels", {}).get("app.kubernetes.io/component")
                 == "zookeeper-ensembles" and object_id(o) not in moved]
    assert sorted(o["kind"] for o in component) == ["ClusterRole", "ClusterRoleBinding"]

    enabled = template(home, "zookeeperEnsembles.enabled=true")
    (manager,) = containers(find(enabled, "Deployment")[0])
    assert "--zookeeper-ensembles" in manager["args"]
    assert not any(a.startswith("--ensemble-secret-namespace") for a in manager["args"])
    off = template(home)
    (manager,) = containers(find(off, "Deployment")[0])
    assert not any("ensemble" in a for a in manager["args"])
    assert not [o for o in off if o["metadata"].get("labels", {}).get("app.kubernetes.io/component")
                == "zookeeper-ensembles"]


#: A policy file as docs/operations.md's "Tenancy and adoption" shows one: a rule by name, one by label.
POLICY = {"tenancy": {"rules": [{"namespaces": ["checkout"], "pathPrefixes": ["/config/checkout"]},
                                {"namespaceSelector": {"matchLabels": {"zkop.example.com/tenant": "payments"}},
                                 "pathPrefixes": ["/config/payments"]}]},
          "adoption": "IfRequested"}


def without_policy_checksum(objects: list[Obj]) -> list[Obj]:
    """``objects`` with the Deployment's ``checksum/tenancy-policy`` annotation dropped (Helm's way of rolling the
    Pods on a changed policy, where kustomize changes the ConfigMap's hashed name), after checking it is there."""
    for deployment in find(objects, "Deployment"):
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert len(annotations.pop("checksum/tenancy-policy")) == 64
    return objects


def test_tenancy_policy_renders_what_the_tenancy_components_render(home: Path, tmp_path: Path) -> None:
    """``tenancy.policy`` is manifests/components/tenancy with the documented ``configMapGenerator`` (and
    tenancy-namespace-selector, because a rule selects by label): the same objects, but for the ConfigMap's name
    (kustomize's hash suffix) and Helm's checksum annotation; the file holds the policy."""
    kustomized = by_id(kustomize_overlay(
        tmp_path / "overlay", ("tenancy", "tenancy-namespace-selector"), files={"policy.yaml": yaml.safe_dump(POLICY)},
        extra={"configMapGenerator": [{"name": "zkop-tenancy-policy", "namespace": "zkop-system",
                                       "files": ["policy.yaml"]}]}))
    kustomized.pop(("", "Namespace", "", "zkop-system"))
    (hashed,) = [key for key in kustomized if key[1] == "ConfigMap" and key[3].startswith("zkop-tenancy-policy-")]
    generated = kustomized.pop(hashed)
    charted = by_id(without_policy_checksum(template(home, set_json=[f"tenancy.policy={json.dumps(POLICY)}"])))
    policy = charted.pop(("", "ConfigMap", "zkop-system", "zkop-tenancy-policy"))
    assert yaml.safe_load(policy["data"]["policy.yaml"]) == yaml.safe_load(generated["data"]["policy.yaml"]) == POLICY
    for volume in kustomized[("apps", "Deployment", "zkop-system", "zkop-controller-manager")]["spec"]["template"][
            "spec"]["volumes"]:
        if volume["name"] == "tenancy-policy":
            assert volume["configMap"]["name"] == hashed[3]
            volume["configMap"]["name"] = "zkop-tenancy-policy"
    assert sorted(charted) == sorted(kustomized)
    for key, expected in kustomized.items():
        assert comparable(charted[key]) == expected, f"{key} differs between charts/zkop and manifests/"


def test_tenancy_policy_without_selectors_needs_no_namespaces_and_a_new_policy_rolls_the_pods(home: Path) -> None:
    by_name = {"tenancy": {"rules": [{"namespaces": ["checkout"], "pathPrefixes": ["/config/checkout"]}]}}
    objects = template(home, set_json=[f"tenancy.policy={json.dumps(by_name)}"])
    assert not [o for o in objects if "namespaces" in str(o.get("rules"))]
    never = template(home, "tenancy.policy.adoption=Never")
    checksums = {json.dumps(p): find(o, "Deployment")[0]["spec"]["template"]["metadata"]["annotations"][
        "checksum/tenancy-policy"] for p, o in ((by_name, objects), ({"adoption": "Never"}, never))}
    assert len(set(checksums.values())) == 2
    (config,) = find(never, "ConfigMap", "zkop-tenancy-policy")
    assert yaml.safe_load(config["data"]["policy.yaml"]) == {"adoption": "Never"}
    default = template(home)
    assert not find(default, "ConfigMap", "zkop-tenancy-policy")
    (manager,) = containers(find(default, "Deployment")[0])
    assert not any("tenancy" in a for a in manager["args"])


@pytest.mark.parametrize(("values", "refused"), [
    (("replicas=two",), "at '/replicas': got string, want integer"),
    (("image.digest=latest",), "/image/digest"),
    (("zookeeper.hosts=",), "/zookeeper/hosts"),
    (("logFormat=xml",), "/logFormat"),
    (("extraArgs={workers=8}",), "/extraArgs/0"),
    (("zookeeper.auth.credentials=nocolon",), "/zookeeper/auth/credentials"),
    (("serviceBridge.enable=true",), "additional properties 'enable' not allowed"),
    (("zookeeperEnsembles.secretNamespace=Not_A_Namespace",), "/zookeeperEnsembles/secretNamespace"),
    (("tenancy.policy.adoption=Sometimes",), "/tenancy/policy/adoption"),
    (("tenancy.policy.rules[0].namespaces[0]=checkout",), "additional properties 'rules' not allowed"),
    (("replicas=2", "leaderElection.enabled=false"), "replicas > 1 needs leaderElection.enabled"),
])
def test_bad_values_are_refused(values: tuple[str, ...], refused: str, home: Path) -> None:
    with pytest.raises(HelmError) as err:
        template(home, *values)
    assert refused in str(err.value)


def test_release_workflow_packages_the_chart_with_the_published_image(tmp_path: Path, home: Path) -> None:
    """The release's chart job, run as written (GitHub's expressions filled in) on a copy of the chart."""
    workflow = yaml.safe_load((REPO / ".github/workflows/release.yaml").read_text(encoding="utf-8"))
    job = workflow["jobs"]["chart"]
    assert set(job["needs"]) == {"version", "publish"} and job["permissions"]["packages"] == "write"
    (package,) = [s for s in job["steps"] if str(s.get("name", "")).startswith("Package charts/zkop")]
    assert any("helm push" in s.get("run", "") or '"$HELM" push' in s.get("run", "") for s in job["steps"])
    version = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    image, digest = "ghcr.io/acme/zkop", "sha256:" + "b" * 64
    script = (package["run"].replace("${{ needs.version.outputs.version }}", version)
              .replace("${{ needs.version.outputs.image }}", image)
              .replace("${{ needs.publish.outputs.digest }}", digest))
    assert "${{" not in script
    shutil.copytree(CHART, tmp_path / "charts" / "zkop", symlinks=False)  # files/ as their contents
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HELM": str(helm_binary()), "HELM_CACHE_HOME": str(home / "cache"),
                               "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data")})
    assert done.returncode == 0, done.stderr
    packaged = tmp_path / "dist" / f"zkop-{version}.tgz"
    (deployment,) = find(template(home, chart=packaged), "Deployment")
    (manager,) = containers(deployment)
    assert manager["image"] == f"{image}:{version}@{digest}"
