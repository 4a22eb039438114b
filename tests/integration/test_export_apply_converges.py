"""Issue 7's last proof: exported manifests are accepted by the CRD and converge with zero znode writes."""

from __future__ import annotations

from pathlib import Path

from kazoo.client import KazooClient
from kazoo.security import make_acl, make_digest_acl
from zkop_testing.operator import OperatorProcess
from zkop_testing.resources import ZKC, synced
from zkop_testing.txnlog import read_txn_log
from zkop_testing.waiting import wait_for
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.cmd.main import main as zkop_main
from zkop.gitops.manifests import load_manifests
from zkop.kube.client import KubeClient, resource_path


def test_export_apply_run_writes_no_znode(kubeconfig: str, kube: KubeClient, zk_server: ZooKeeperServer,
                                          zk_base: str, zk: KazooClient, tmp_path: Path) -> None:
    tree = {
        "/legacy/features/checkout.v2/Enabled": b"true",
        "/legacy/features/empty": b"",
        "/legacy/routing/rules.json": '{"ünïcode": "ok"}'.encode(),
        "/legacy/blobs/all-bytes": bytes(range(256)),
        "/legacy/interior": b"interior data",
        "/legacy/interior/child": b"c",
    }
    for path, data in tree.items():
        zk.ensure_path(zk_base + path.rsplit("/", 1)[0])
        zk.create(zk_base + path, data)
    zk.create(zk_base + "/legacy/guarded", b"g", acl=[make_digest_acl("ops", "pw", all=True),
                                                     make_acl("world", "anyone", all=True)])
    out = tmp_path / "export"
    hosts = f"{zk_server.hosts}{zk_base}"
    assert zkop_main(["export", "--zk-hosts", hosts, "--path", "/legacy", "-d", str(out)]) == 0
    assert zkop_main(["validate", "-f", str(out)]) == 0
    objects = load_manifests([str(out)]).objects
    assert len(objects) == len(tree) + 1
    for item in objects:  # the CRD accepts every exported manifest as is
        kube.request("POST", resource_path(*ZKC, "default"), body=item.obj)
    before = {p: zk.get(zk_base + p)[1].mzxid for p in [*tree, "/legacy/guarded"]}
    last_zxid = max(t.zxid for t in read_txn_log(zk_server.data_dir))
    with OperatorProcess(kubeconfig, hosts):
        names = [item.obj["metadata"]["name"] for item in objects]
        wait_for(lambda: all(synced(kube, n) for n in names), message="exported objects synced")
    assert {p: zk.get(zk_base + p)[1].mzxid for p in [*tree, "/legacy/guarded"]} == before
    managed_writes = [t for t in read_txn_log(zk_server.data_dir)
                      if t.zxid > last_zxid and t.path.startswith(zk_base + "/legacy")
                      and t.op in ("create", "setData", "delete", "setACL")]
    assert managed_writes == []  # only ownership records under /zkop/owners were written
