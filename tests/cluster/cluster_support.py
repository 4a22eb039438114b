"""Shared by the real-cluster suite's conftest and tests: the real ``kubectl``, the rendered install (from
:mod:`zkop_testing.zkop_install`, shared with tests/integration) and the Deployment's Pod without a kubelet."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from zkop_testing.controlplane import ControlPlane
from zkop_testing.flux import GITREPOSITORY, KUSTOMIZATION, Flux, GitWorkTree, condition
from zkop_testing.kustomize import Obj
from zkop_testing.operator import OperatorProcess
from zkop_testing.waiting import wait_for
from zkop_testing.zkop_install import (
    ZKOP_NAMESPACE,
    ZKOP_SERVICE_ACCOUNT,
    ServiceAccountClients,
    install,
    kubectl,
    rendered_install,
)

from zkop.kube.client import ApiException, KubeClient

__all__ = ["FLUX_LATENCIES", "WORKLOAD_LATENCIES", "ZKOP_NAMESPACE", "ZKOP_SERVICE_ACCOUNT", "ServiceAccountClients",
           "Story", "install", "kubectl", "pod_of_deployment", "rendered_install"]

#: (test id, step, seconds) the Flux story measured; conftest's terminal summary prints them.
FLUX_LATENCIES: list[tuple[str, str, float]] = []
#: (test id, step, seconds) from a change (a ZooKeeper write, a git push) to what a workload saw (a new ReplicaSet,
#: a Spring application's new value); conftest's terminal summary prints them (docs/operations.md quotes them).
WORKLOAD_LATENCIES: list[tuple[str, str, float]] = []


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
    its ``env`` resolved from the live ConfigMaps/Secrets and the Pod's fields, its Secret, ConfigMap and emptyDir
    volumes written under ``directory`` (and the args that name a path under a mount pointed there), a bound token of
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
            elif "configMap" in volume:
                ref = volume["configMap"]
                found = _optional_get(kube, f"/api/v1/namespaces/{namespace}/configmaps/{ref['name']}")
                assert found is not None or ref.get("optional"), f"ConfigMap {ref['name']} is missing"
                text = (found or {}).get("data") or {}
                for item in ref.get("items") or [{"key": k, "path": k} for k in text]:
                    if item["key"] in text:
                        (local / item["path"]).write_text(text[item["key"]], encoding="utf-8")
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


@dataclass
class Story:
    """The test's repository and the Flux objects that follow it, named after the test's namespace."""

    kube: KubeClient
    repo: GitWorkTree
    name: str
    test: str

    def push(self, message: str, files: dict[str, str | None]) -> tuple[str, float]:
        """Commit and push ``files``, then ask source-controller to fetch now; the SHA and when the push returned."""
        sha = self.repo.commit(message, files)
        pushed = time.monotonic()
        Flux.reconcile(self.kube, GITREPOSITORY, self.name)
        return sha, pushed

    def kustomization(self) -> dict[str, Any]:
        """The Kustomization as it is now."""
        found = Flux.get(self.kube, KUSTOMIZATION, self.name)
        assert found is not None
        return found

    def ready(self, sha: str) -> dict[str, Any]:
        """Wait until the Kustomization applied commit ``sha`` and is Ready (its health checks passed)."""
        def applied() -> dict[str, Any] | None:
            ks = self.kustomization()
            status = ks.get("status", {})
            if status.get("lastAppliedRevision") == self.repo.revision(sha) and condition(ks).get("status") == "True":
                return ks
            return None

        return wait_for(applied, message=f"Kustomization Ready at {sha[:12]}")

    def latency(self, step: str, pushed: float) -> None:
        """Record how long ``step`` took since the push (:data:`FLUX_LATENCIES`)."""
        FLUX_LATENCIES.append((self.test, step, time.monotonic() - pushed))
