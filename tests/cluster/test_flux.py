"""The seed's GitOps story with Flux's own controllers: a ZooKeeperConfig committed to Git reaches ZooKeeper.

source-controller fetches the test's repository over smart HTTP (``git http-backend``); kustomize-controller
builds ``./zookeeper``, applies it server-side as field manager ``kustomize-controller`` into the test's
namespace (``targetNamespace``) and prunes what left Git (``prune: true``); zkop, as its ServiceAccount and
watching only that namespace, writes the znodes; the Kustomization's health checks (``wait: true``: kstatus
over everything it applied, ``fluxcd/pkg/ssa`` ``manager_wait.go``) go Ready only once zkop reports each
ZooKeeperConfig Current, and fail fast with the object's name when zkop reports one Stalled. Every commit asks
for a fetch at once, as ``flux reconcile source git`` does; how long each took from ``git push`` to the znode is
printed at the end of the run (``FLUX_LATENCIES``), never asserted on.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import yaml
from cluster_support import Story
from kazoo.client import KazooClient
from zkop_testing.controlplane import REPO
from zkop_testing.flux import Flux, GitServer, condition, iter_inventory
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import conditions, get, read, synced
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.kube.client import KubeClient

#: The seed's own manifest, committed as it is (its ``namespace: default`` is overridden by ``targetNamespace``).
EXAMPLE = REPO / "examples" / "feature-flag.yaml"
FLAG = "/app/features/new-recommendation-engine/enabled"
NAME = "new-recommendation-engine-enabled"


def manifest(name: str, path: str, **spec: Any) -> str:
    """A ZooKeeperConfig as a file in the repository (no namespace: the Kustomization sets it)."""
    return yaml.safe_dump({"apiVersion": "platform.example.com/v1alpha1", "kind": "ZooKeeperConfig",
                           "metadata": {"name": name}, "spec": {"path": path, **spec}})


@pytest.fixture
def zkop(zkop_kubeconfig: str, namespace: str, zk_server: ZooKeeperServer, zk_base: str) -> Iterator[OperatorProcess]:
    """``zkop run`` as its ServiceAccount for this namespace, chrooted at ``zk_base``: not started (the test
    starts it), stopped at the end."""
    proc = OperatorProcess(zkop_kubeconfig, f"{zk_server.hosts}{zk_base}", ["--workers", "2", "--namespace", namespace])
    yield proc
    code = proc.stop()
    assert code in (None, 0), proc.log_tail()


def test_flux_delivers_a_zookeeperconfig_from_git_to_zookeeper(zkop: OperatorProcess, story: Story, flux: Flux,
                                                               git_server: GitServer, kube: KubeClient, namespace: str,
                                                               zk: KazooClient, zk_base: str) -> None:
    # 1. The seed's manifest committed while zkop is not running: kustomize-controller applies it, and the
    #    Kustomization's health check waits, because the CRD defaults status.observedGeneration to -1.
    sha, _ = story.push("the new recommendation engine's feature flag", {"zookeeper/feature-flag.yaml":
                                                                         EXAMPLE.read_text(encoding="utf-8")})
    obj: dict[str, Any] = wait_for(lambda: get(kube, NAME, namespace), message="kustomize-controller applied it")
    managers = {entry["manager"]: entry for entry in obj["metadata"]["managedFields"]}
    assert managers["kustomize-controller"]["operation"] == "Apply", obj["metadata"]["managedFields"]
    assert "f:spec" in managers["kustomize-controller"]["fieldsV1"]
    assert obj["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] == story.name
    assert obj["status"]["observedGeneration"] == -1

    def checking_health() -> dict[str, Any] | None:
        ks = story.kustomization()
        healthy = condition(ks, "Healthy")
        running = healthy.get("status") == "Unknown" and story.repo.revision(sha) in healthy.get("message", "")
        return ks if running else None

    ks = wait_for(checking_health, message="health check running for the new revision")
    assert condition(ks)["status"] != "True", ks["status"]
    assert read(zk, zk_base + FLAG) is None

    zkop.start()
    assert wait_for(lambda: read(zk, zk_base + FLAG) == b"true", message="znode created")
    ks = story.ready(sha)
    obj = wait_for(lambda: synced(kube, NAME, namespace), message="zkop reports it Synced")
    # Ready came after zkop's own Ready (both in whole seconds: the same second is possible, earlier is not).
    flux_ready = datetime.fromisoformat(condition(ks)["lastTransitionTime"])
    assert flux_ready >= datetime.fromisoformat(conditions(obj)["Ready"]["lastTransitionTime"])
    assert condition(ks, "Healthy")["status"] == "True"
    assert f"{namespace}_{NAME}_platform.example.com_ZooKeeperConfig" in set(iter_inventory(ks))

    # 2. A second ZooKeeperConfig committed with zkop running (stringData this time).
    sha, pushed = story.push("a connection limit", {"zookeeper/max-connections.yaml": manifest(
        "max-connections", "/app/limits/max-connections", stringData="100")})
    wait_for(lambda: read(zk, zk_base + "/app/limits/max-connections") == b"100", message="second znode created")
    story.latency("create: commit -> znode", pushed)
    story.ready(sha)
    story.latency("create: commit -> Kustomization Ready", pushed)

    # 3. A change in Git: the znode follows, the object's generation moves on and zkop observes it.
    changed = EXAMPLE.read_text(encoding="utf-8").replace("dHJ1ZQ==", base64.b64encode(b"false").decode())
    sha, pushed = story.push("turn the flag off", {"zookeeper/feature-flag.yaml": changed})
    wait_for(lambda: read(zk, zk_base + FLAG) == b"false", message="znode updated")
    story.latency("update: commit -> znode", pushed)
    story.ready(sha)
    story.latency("update: commit -> Kustomization Ready", pushed)
    obj = wait_for(lambda: synced(kube, NAME, namespace), message="status follows generation 2")
    assert obj["metadata"]["generation"] == 2

    # 4. A second object claiming the same znode: zkop reports it Stalled (PathConflict: the older object owns
    #    the path) and writes nothing; the health check fails fast and names it.
    copy = f"{NAME}-copy"
    sha, _ = story.push("a copy of the flag", {"zookeeper/copy.yaml": manifest(copy, FLAG, stringData="conflict")})

    def health_check_failed() -> dict[str, Any] | None:
        ks = story.kustomization()
        ready = condition(ks)
        if ks["status"].get("lastAttemptedRevision") == story.repo.revision(sha) and ready.get("status") == "False":
            return ks
        return None

    ks = wait_for(health_check_failed, message="health check failed")
    ready = condition(ks)
    assert ready["reason"] == "HealthCheckFailed", ready
    assert "failed early due to stalled resources" in ready["message"], ready
    assert f"ZooKeeperConfig/{namespace}/{copy} status: 'Failed'" in ready["message"], ready
    stalled = conditions(get(kube, copy, namespace))
    assert stalled["Stalled"]["status"] == "True" and stalled["Ready"]["reason"] == "PathConflict", stalled
    assert read(zk, zk_base + FLAG) == b"false"

    # 5. The copy removed from Git: Flux prunes it and is Ready again; the owner's znode is untouched.
    sha, _ = story.push("remove the copy", {"zookeeper/copy.yaml": None})
    ks = story.ready(sha)
    assert get(kube, copy, namespace) is None
    assert read(zk, zk_base + FLAG) == b"false"

    # 6. Both files removed: Flux prunes both objects, zkop's finalizer removes their znodes.
    sha, pushed = story.push("retire the flag and the limit", {"zookeeper/feature-flag.yaml": None,
                                                               "zookeeper/max-connections.yaml": None})
    wait_for(lambda: read(zk, zk_base + FLAG) is None and read(zk, zk_base + "/app/limits/max-connections") is None,
             message="znodes removed")
    story.latency("delete: commit -> znode removed", pushed)
    wait_for(lambda: get(kube, NAME, namespace) is None and get(kube, "max-connections", namespace) is None,
             message="objects gone")
    ks = story.ready(sha)
    assert list(iter_inventory(ks)) == []
    assert zk.exists(zk_base + "/app/features") is not None  # parents zkop created stay
    # source-controller fetched over smart HTTP, once per commit at least (a Git server handler's exception
    # would have failed the test: zkop_testing.server_errors).
    fetches = [r for r in git_server.requests if r[:2] == ("POST", f"/{namespace}.git/git-upload-pack")]
    assert len(fetches) >= 7 and all(status == 200 for _, _, status in fetches), git_server.requests
