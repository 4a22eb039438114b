"""Fixtures for the GitOps commands: an in-process CLI runner and the legacy znode tree."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from gitops_support import ALICE, EPHEMERAL, LEGACY, SEQUENTIAL, Cli, Legacy, Run
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from zkop_testing.waiting import EVENTUALLY
from zkop_testing.zookeeper import ZooKeeperServer

from zkop.cmd.main import main


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """``cli("diff", "-f", dir, stdin=None)``: run ``zkop.cmd.main.main`` in-process, capture its output."""

    def run(*argv: str, stdin: str | None = None) -> Run:
        capsys.readouterr()
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        try:
            code = main(list(argv))
        except SystemExit as exit_:  # argparse usage errors
            code = int(exit_.code or 0)
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


@pytest.fixture
def alice(zk_server: ZooKeeperServer, zk_base: str) -> Iterator[KazooClient]:
    """A session authenticated as alice; deletes ``zk_base`` at teardown (the shared fixture's
    session could not list alice-only znodes)."""
    client = KazooClient(hosts=zk_server.hosts, auth_data=[("digest", ":".join(ALICE))])
    client.start(timeout=EVENTUALLY)
    yield client
    with contextlib.suppress(NoNodeError):
        client.delete(zk_base, recursive=True)
    client.stop()
    client.close()


@pytest.fixture
def legacy(zk_server: ZooKeeperServer, zk_base: str, alice: KazooClient, tmp_path: Path) -> Legacy:
    """The tree of ``LEGACY`` under ``zk_base``, plus an ephemeral and a sequential znode."""
    for path, (data, acl) in LEGACY.items():
        alice.ensure_path(zk_base + path.rsplit("/", 1)[0])
        alice.create(zk_base + path, data, acl=acl)
    assert alice.create(zk_base + "/app/svc/lock-", b"", sequence=True) == zk_base + SEQUENTIAL
    alice.create(zk_base + EPHEMERAL, b"10.0.0.7:8080", ephemeral=True)
    auth = tmp_path / "zk-auth"
    auth.write_text(":".join(ALICE) + "\n")
    return Legacy(zk_base, f"{zk_server.hosts}{zk_base}", str(auth), alice)
