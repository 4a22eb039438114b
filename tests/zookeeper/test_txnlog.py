"""The transaction log reader splits a multi into its operations and reports a failed multi as an error."""

from __future__ import annotations

from kazoo.client import KazooClient
from zkop_testing.txnlog import read_txn_log
from zkop_testing.zookeeper import ZooKeeperServer


def test_multi_is_split_into_its_operations(zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str) -> None:
    zk.create(f"{zk_base}/m", b"")
    ok = zk.transaction()
    ok.create(f"{zk_base}/m/record", b"r")
    ok.create(f"{zk_base}/m/node", b"n")
    ok.set_data(f"{zk_base}/m", b"parent", version=0)
    assert ok.commit() == [f"{zk_base}/m/record", f"{zk_base}/m/node", zk.exists(f"{zk_base}/m")]
    failed = zk.transaction()
    failed.create(f"{zk_base}/m/other", b"o")
    failed.create(f"{zk_base}/m/node", b"again")  # NodeExists: the whole multi is rolled back
    failed.commit()
    mine = [t for t in read_txn_log(zk_server.data_dir) if t.session == zk.client_id[0] and t.multi]
    assert [(t.op, t.path) for t in mine] == [
        ("create", f"{zk_base}/m/record"), ("create", f"{zk_base}/m/node"), ("setData", f"{zk_base}/m"),
        ("error", "multi"),
    ]
    assert len({t.zxid for t in mine[:3]}) == 1 and mine[3].zxid > mine[0].zxid


def test_multi_with_newline_bytes_in_its_payload(zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str) -> None:
    # Ten bytes of data: the length prefix holds 0x0a, which the toolkit prints as a line break.
    zk.create(f"{zk_base}/nl", b"")
    multi = zk.transaction()
    multi.create(f"{zk_base}/nl/a", b"0123456789")
    multi.create(f"{zk_base}/nl/b", b"0123456789")
    multi.check(f"{zk_base}/nl", 0)
    multi.commit()
    mine = [t for t in read_txn_log(zk_server.data_dir) if t.session == zk.client_id[0] and t.multi]
    assert [(t.op, t.path) for t in mine] == [
        ("create", f"{zk_base}/nl/a"), ("create", f"{zk_base}/nl/b"), ("check", f"{zk_base}/nl"),
    ]
