"""``manifests/components/tenancy`` and ``tenancy-namespace-selector``, rendered by the real ``kubectl kustomize``
as the overlay docs/operations.md shows ("Tenancy and adoption"), and the policy they mount read by zkop."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml
from zkop_testing.kubectl import venv_kubectl
from zkop_testing.kustomize import REPO, Obj, rbac_rules

from zkop.cmd.main import build_parser, read_tenancy_policy

POLICY = """\
tenancy:
  rules:
    - namespaces: [team-a]
      pathPrefixes: [/config/team-a]
    - namespaceSelector:
        matchLabels: {zkop.example.com/tenant: payments}
      pathPrefixes: [/config/payments]
adoption: IfRequested
"""


def _render(directory: Path, components: list[str]) -> list[Obj]:
    def rel(path: str) -> str:
        return os.path.relpath(REPO / path, directory)

    (directory / "policy.yaml").write_text(POLICY)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [rel("manifests/default")],
        "components": [rel(f"manifests/components/{c}") for c in components],
        "configMapGenerator": [{"name": "zkop-tenancy-policy", "namespace": "zkop-system", "files": ["policy.yaml"]}],
    }))
    out = subprocess.run([venv_kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_the_policy_is_mounted_from_the_generated_config_map_and_read_by_zkop(tmp_path: Path) -> None:
    objects = _render(tmp_path, ["tenancy"])
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith(
        "zkop-tenancy-policy")]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "--tenancy-policy-file=/etc/zkop/tenancy/policy.yaml" in container["args"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "tenancy-policy"]
    # kustomize points the volume at the generated (hashed) name: a new policy rolls the Pods.
    assert volume["configMap"]["name"] == config_map["metadata"]["name"] != "zkop-tenancy-policy"
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "tenancy-policy"]
    assert mount["mountPath"] == "/etc/zkop/tenancy"
    # What the kubelet would mount is what zkop reads.
    mounted = tmp_path / "mounted.yaml"
    mounted.write_text(config_map["data"][volume["configMap"]["items"][0]["key"]])
    policy = read_tenancy_policy(build_parser().parse_args(["run", "--tenancy-policy-file", str(mounted)])
                                 .tenancy_policy_file)
    assert policy is not None and policy.adoption == "IfRequested" and policy.needs_namespace_labels
    # The tenancy component grants nothing: names need no RBAC.
    (tmp_path / "plain").mkdir()
    assert rbac_rules(objects) == rbac_rules(_render(tmp_path / "plain", []))


def test_namespace_selectors_add_list_and_watch_of_namespaces_only(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "selector").mkdir()
    plain = rbac_rules(_render(tmp_path / "plain", ["tenancy"]))
    with_selector = rbac_rules(_render(tmp_path / "selector", ["tenancy", "tenancy-namespace-selector"]))
    assert with_selector - plain == {("", "namespaces", "list"), ("", "namespaces", "watch")}
    assert plain <= with_selector
