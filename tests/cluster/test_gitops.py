"""The GitOps commands against a real cluster: ``zkop export``, ``kubectl apply``, then ``zkop run`` writes nothing.

``zkop export`` turns a live znode tree into ZooKeeperConfig manifests and a ``kustomization.yaml``;
kube-apiserver decides whether the CRD accepts every one of them (structural schema, a server-side
dry run, then a server-side apply as Flux's kustomize-controller makes it), ``kubectl diff`` whether
the cluster then holds exactly what the files say (zkop's finalizer and status included), and
``zkop run`` as its ServiceAccount converges every object with zero znode writes (ZooKeeper's own
transaction log), after which ``zkop diff`` finds nothing either.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cluster_support import kubectl
from kazoo.client import KazooClient
from kazoo.security import make_acl, make_digest_acl
from zkop_testing.controlplane import ControlPlane
from zkop_testing.kubectl import venv_kubectl
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import synced
from zkop_testing.txnlog import read_txn_log
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.cmd.main import main as zkop_main
from zkop.gitops.manifests import load_manifests
from zkop.kube.client import KubeClient

TREE = {
    "/legacy/features/checkout.v2/Enabled": b"true",
    "/legacy/features/empty": b"",
    "/legacy/routing/rules.json": '{"ünïcode": "ok"}'.encode(),
    "/legacy/blobs/all-bytes": bytes(range(256)),
    "/legacy/interior": b"interior data",
    "/legacy/interior/child": b"c",
}


def test_export_apply_run_writes_no_znode(plane: ControlPlane, zkop_kubeconfig: str, kube: KubeClient,
                                          namespace: str, zk_server: ZooKeeperServer, zk_base: str,
                                          zk: KazooClient, tmp_path: Path) -> None:
    for path, data in TREE.items():
        zk.ensure_path(zk_base + path.rsplit("/", 1)[0])
        zk.create(zk_base + path, data)
    zk.create(zk_base + "/legacy/guarded", b"g", acl=[make_digest_acl("ops", "pw", all=True),
                                                     make_acl("world", "anyone", all=True)])
    paths = [*TREE, "/legacy/guarded"]
    out = tmp_path / "export"
    hosts = f"{zk_server.hosts}{zk_base}"
    assert zkop_main(["export", "--zk-hosts", hosts, "--path", "/legacy", "--namespace", namespace,
                      "-d", str(out)]) == 0
    assert zkop_main(["validate", "-f", str(out)]) == 0
    names = [item.obj["metadata"]["name"] for item in load_manifests([str(out)]).objects]
    assert len(names) == len(paths)

    # The CRD accepts every exported manifest as is: a server-side dry run, then the apply Flux makes.
    apply = ["apply", "--server-side", "--field-manager=kustomize-controller", "-k", str(out)]
    dry = kubectl(plane, *apply, "--dry-run=server")
    assert dry.count("serverside-applied (server dry run)") == len(names), dry
    kubectl(plane, *apply)
    before = {p: zk.get(zk_base + p)[1].mzxid for p in paths}
    last_zxid = max(t.zxid for t in read_txn_log(zk_server.data_dir))
    with OperatorProcess(zkop_kubeconfig, hosts, ["--namespace", namespace]):
        wait_for(lambda: all(synced(kube, n, namespace) for n in names), message="exported objects synced")
    assert {p: zk.get(zk_base + p)[1].mzxid for p in paths} == before
    managed_writes = [t for t in read_txn_log(zk_server.data_dir)
                      if t.zxid > last_zxid and t.path.startswith(zk_base + "/legacy")
                      and t.op in ("create", "setData", "delete", "setACL")]
    assert managed_writes == []  # only ownership records under /zkop/owners were written

    # The cluster holds what the files say (kubectl diff: exit 0, nothing printed) ...
    diff = subprocess.run([venv_kubectl(), "--kubeconfig", str(plane.kubeconfig), "diff", "--server-side",
                           "--field-manager=kustomize-controller", "-k", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert (diff.returncode, diff.stdout) == (0, ""), diff.stdout + diff.stderr
    # ... and so does ZooKeeper (zkop diff: exit 0).
    assert zkop_main(["diff", "--zk-hosts", hosts, "-f", str(out)]) == 0
