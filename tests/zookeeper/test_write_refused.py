"""The safety net under ``zkop run --dry-run``: an adapter that refuses writes sends none to a real ZooKeeper."""

from __future__ import annotations

import logging

import pytest
from kazoo.client import KazooClient

from zkop.zookeeper.actions import CheckVersion, CreateNode, DeleteNode, SetAcl, SetData
from zkop.zookeeper.adapter import WriteRefused, ZooKeeperAdapter, ZooKeeperError


def test_every_write_path_is_refused_loudly_and_nothing_reaches_zookeeper(
        adapter: ZooKeeperAdapter, zk: KazooClient, zk_base: str, caplog: pytest.LogCaptureFixture) -> None:
    zk.create(f"{zk_base}/app/existing", b"before", makepath=True)
    before = zk.get(f"{zk_base}/app/existing")[1]
    adapter.refuse_writes = "zkop run --dry-run"
    batches = [
        ([CreateNode("/app/new/deep", b"secret-bytes")], {}),
        ([SetData("/app/existing", b"after", 0)], {}),
        ([SetAcl("/app/existing", (), 0)], {}),
        ([DeleteNode("/app/existing", 0)], {}),
        ([CreateNode("/app/a", b"1"), CreateNode("/app/b", b"2")], {"atomic": True, "arm_watches": True}),
        ([SetData("/app/existing", b"after", 0)], {"require": (CheckVersion("/app/existing", 0),)}),
    ]
    with caplog.at_level(logging.ERROR, logger="zkop.zookeeper.writer"):
        for actions, kwargs in batches:
            with pytest.raises(WriteRefused, match="zkop run --dry-run"):
                adapter.execute(actions, **kwargs)  # type: ignore[arg-type]
        with pytest.raises(WriteRefused):
            adapter.probe("/zkop/probe")  # the start-up probe writes a scratch node: refused too
    refused = [r for r in caplog.records if r.levelno == logging.ERROR and "REFUSED" in r.getMessage()]
    assert len(refused) == len(batches) + 1
    assert "create /app/new/deep (12 bytes)" in refused[0].getMessage()
    assert "secret-bytes" not in caplog.text
    # Not a ZooKeeperError: no caller can mistake it for an outage or a conflict and swallow it.
    assert not issubclass(WriteRefused, ZooKeeperError)

    data, stat = zk.get(f"{zk_base}/app/existing")
    assert (data, stat.mzxid, stat.aversion) == (b"before", before.mzxid, before.aversion)
    assert zk.get_children(f"{zk_base}/app") == ["existing"]
    assert zk.exists(f"{zk_base}/zkop") is None
    # Reads still work, and writes resume once the refusal is lifted.
    observed = adapter.read("/app/existing")
    assert observed is not None and observed.data == b"before"
    adapter.refuse_writes = None
    adapter.execute([CreateNode("/app/new", b"ok")])
    assert zk.get(f"{zk_base}/app/new")[0] == b"ok"
