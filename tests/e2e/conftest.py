"""The kind end-to-end suite: a real cluster, zkop's image and manifests, a real ZooKeeper.

Needs Docker (a running engine), ``kind`` and ``kubectl`` on ``PATH``; without them every test
here is **skipped** (decided once, at collection, in well under a second when a tool is
missing). ``ZKOP_E2E=0`` skips it where all three are present: the ``ci`` workflow's ``test``
job sets it, because GitHub's Ubuntu runners come with Docker, kind (``/usr/local/bin/kind``) and
kubectl (actions/runner-images ``images/ubuntu/scripts/build/install-kubernetes-tools.sh``), and
the suite has its own workflow (``e2e``). pytest-kind's ``KindCluster`` drives the cluster, but
with the ``kind`` and ``kubectl`` found on ``PATH``, so nothing is downloaded.

What the session sets up (in this order):

1. a kind cluster (``ZKOP_E2E_CLUSTER``, default ``zkop-e2e``; kubeconfig at
   ``ZKOP_E2E_KUBECONFIG`` or ``.pytest-kind/<name>/kubeconfig``);
2. the image ``ghcr.io/example/zkop:e2e`` built from ``./Dockerfile`` (skip with
   ``ZKOP_E2E_SKIP_BUILD=1`` when it was built beforehand) and loaded into the nodes;
3. ZooKeeper from ``hack/zookeeper-statefulset.yaml``;
4. zkop from ``tests/e2e/overlay`` (``manifests/default`` + the service-bridge component).

The cluster is deleted afterwards unless ``--keep-cluster`` (pytest-kind's option) or
``ZKOP_E2E_KEEP_CLUSTER=1`` is given, which the CI workflow uses to run the API-server contract
suite against the same cluster. When a test failed, zkop's logs are printed at teardown.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kind_support import E2E_DIR, IMAGE, REPO, ZK_AUTH, ZK_NAMESPACE, ZKOP_NAMESPACE, Kubectl
from zkop_testing.waiting import EVENTUALLY


def environment_problem() -> str | None:
    """Why the kind suite cannot run here, or ``None`` if it can."""
    for tool in ("kind", "kubectl", "docker"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    try:
        done = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"`docker info` failed: {err}"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return f"`docker info` failed: {lines[-1] if lines else f'exit code {done.returncode}'}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every test of this directory, with the reason, where Docker/kind/kubectl are missing or ZKOP_E2E=0."""
    ours = [item for item in items if E2E_DIR in Path(str(item.path)).resolve().parents]
    if not ours:
        return
    if os.environ.get("ZKOP_E2E") == "0":
        reason = "kind end-to-end suite turned off (ZKOP_E2E=0)"
    elif (problem := environment_problem()) is not None:
        reason = f"kind end-to-end suite needs Docker, kind and kubectl: {problem}"
    else:
        return
    marker = pytest.mark.skip(reason=reason)
    for item in ours:
        item.add_marker(marker)


def _run(command: Sequence[str], timeout: float) -> None:
    subprocess.run(list(command), check=True, timeout=timeout)


@pytest.fixture(scope="session")
def kubectl(request: pytest.FixtureRequest) -> Iterator[Kubectl]:
    """A kind cluster with ZooKeeper and zkop installed; a :class:`Kubectl` for it."""
    from pytest_kind import KindCluster

    kind, kubectl_bin = shutil.which("kind"), shutil.which("kubectl")
    assert kind and kubectl_bin
    name = os.environ.get("ZKOP_E2E_CLUSTER", "zkop-e2e")
    kubeconfig = os.environ.get("ZKOP_E2E_KUBECONFIG")
    cluster = KindCluster(name, kubeconfig=Path(kubeconfig) if kubeconfig else None,
                          kind_path=Path(kind), kubectl_path=Path(kubectl_bin))
    cluster.create()
    k = Kubectl(kubectl_bin, Path(cluster.kubeconfig_path))
    keep = bool(request.config.getoption("keep_cluster", False)) or os.environ.get("ZKOP_E2E_KEEP_CLUSTER") == "1"
    try:
        if os.environ.get("ZKOP_E2E_SKIP_BUILD") != "1":
            _run(["docker", "build", "-t", IMAGE, str(REPO)], timeout=1200)
        cluster.load_docker_image(IMAGE)
        k("apply", "-f", str(REPO / "hack" / "zookeeper-statefulset.yaml"))
        k("-n", ZK_NAMESPACE, "rollout", "status", "statefulset/zookeeper", "--timeout=300s", timeout=320)
        k("apply", "-k", str(E2E_DIR / "overlay"))
        k("wait", "--for=condition=Established", "crd/zookeeperconfigs.platform.example.com", "--timeout=60s")
        k("-n", ZKOP_NAMESPACE, "rollout", "status", "deployment/zkop-controller-manager", "--timeout=300s",
          timeout=320)
        yield k
    finally:
        if request.session.testsfailed:
            print(k("-n", ZKOP_NAMESPACE, "get", "pods,lease,events", "-o", "wide", check=False))
            print(k("-n", ZKOP_NAMESPACE, "logs", "-l", "app.kubernetes.io/name=zkop", "--all-containers",
                    "--prefix", "--tail=300", check=False))
        if not keep:
            cluster.delete()


@pytest.fixture(scope="session")
def zk_port(kubectl: Kubectl) -> Iterator[int]:
    """A local port forwarded to the in-cluster ZooKeeper Service."""
    with kubectl.port_forward(ZK_NAMESPACE, "svc/zookeeper", 2181) as port:
        yield port


@pytest.fixture(scope="session")
def zk(zk_port: int) -> Iterator[KazooClient]:
    """A kazoo client on the in-cluster ZooKeeper, authenticated as the examples' ops identity."""
    client = KazooClient(hosts=f"127.0.0.1:{zk_port}", auth_data=[ZK_AUTH])
    client.start(timeout=EVENTUALLY)
    yield client
    client.stop()
    client.close()
