"""``zkop run --import-services`` as users start it (its own process), and the kustomize component."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from zkop_testing.apiserver import ApiServer
from zkop_testing.crds import install_crds
from zkop_testing.metrics import Metrics
from zkop_testing.operator import OperatorProcess
from zkop_testing.services import IMPORT_NAMESPACE as NAMESPACE
from zkop_testing.services import endpoints, get_service, register, slices_of
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.cmd.main import build_parser
from zkop.kube.client import KubeClient

REPO = Path(__file__).resolve().parents[3]
COMPONENT = REPO / "manifests" / "components" / "service-import"


def test_zkop_run_with_import_services(apiserver: ApiServer, kube: KubeClient, zk_server: ZooKeeperServer,
                                       chrooted: KazooClient, zk_base: str, tmp_path: Path) -> None:
    install_crds(kube)
    kubeconfig = str(apiserver.write_kubeconfig(tmp_path / "kubeconfig"))
    register(chrooted, "payments", "i1", "10.3.0.1", ephemeral=False)
    args = ["--import-services", "--import-namespace", NAMESPACE, "--cluster-id", "prod", "--sync-period", "5"]
    with OperatorProcess(kubeconfig, f"{zk_server.hosts}{zk_base}", args) as proc:
        wait_for(lambda: endpoints(kube, "payments") == {"10.3.0.1": True}, message="imported")
        service = get_service(kube, "payments") or {}
        assert service["metadata"]["annotations"]["platform.example.com/imported-by"] == "zkop/prod"
        register(chrooted, "payments", "i2", "10.3.0.2")
        wait_for(lambda: endpoints(kube, "payments") == {"10.3.0.1": True, "10.3.0.2": True},
                 message="second instance")
        chrooted.delete("/services/payments", recursive=True)
        wait_for(lambda: get_service(kube, "payments") is None and not slices_of(kube, "payments"),
                 message="collected")
        # Imported, updated, collected: three successful reconciles (the series exists at 0 from start-up).
        wait_for(lambda: Metrics(proc.metrics()).reconciles("service-import") >= 3,
                 message="three successful service-import reconciles counted")
    assert proc.proc is not None and proc.proc.returncode == 0, proc.log_tail()


def test_the_service_import_component(tmp_path: Path) -> None:
    from zkop_testing import kustomize as tools

    overlay = tmp_path / "overlay"
    overlay.mkdir()
    rel = os.path.relpath  # kustomize wants relative paths
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
        f"  - {rel(REPO / 'manifests' / 'default', overlay)}\ncomponents:\n  - {rel(COMPONENT, overlay)}\n",
        encoding="utf-8")
    plain, rendered = tools.render(REPO / "manifests" / "default"), tools.render(overlay)
    def ids(objs: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(o["kind"], o["metadata"]["name"]) for o in objs}

    assert ids(rendered) - ids(plain) == {("ClusterRole", "zkop-service-import-role"),
                                          ("ClusterRoleBinding", "zkop-service-import-rolebinding"),
                                          ("ClusterRole", "zkop-service-import-guard-role"),
                                          ("ClusterRoleBinding", "zkop-service-import-guard-rolebinding")}
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    (before,) = [o for o in plain if o["kind"] == "Deployment"]
    assert args == [*before["spec"]["template"]["spec"]["containers"][0]["args"], "--import-services"]
    parsed = build_parser().parse_args(args)
    assert parsed.import_services is True
    rules = tools.rbac_rules(rendered) - tools.rbac_rules(plain)
    verbs = ("list", "watch", "create", "patch", "delete")
    guard = {("networking.k8s.io", "servicecidrs", "list"), ("networking.k8s.io", "servicecidrs", "watch"),
             ("discovery.k8s.io", "endpointslices", "get")}  # the address guard's (endpointslices by name only)
    assert rules == {(group, resource, verb) for group, resource in (("", "services"),
                                                                     ("discovery.k8s.io", "endpointslices"))
                     for verb in verbs} | guard
    (binding,) = [o for o in rendered if o["metadata"]["name"] == "zkop-service-import-rolebinding"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "zkop", "namespace": "zkop-system"}]
