"""What differs between the ZooKeeper lines zkop supports, asserted on real servers of each line.

Each test runs once per line under test (``ZKOP_ZOOKEEPER_LINES``; ``tests/conftest.py``): the four-letter
words the benchmark reads (``hack/bench``), ``enforce.auth`` (ZooKeeper 3.7+,
``AuthenticationHelper``: an unauthenticated client's requests end its session; older lines take the key for
an unknown system property and admit it), and ``exists`` on a znode the client may not read (ZOOKEEPER-2590).
"""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, SessionClosedRequireSaslError
from kazoo.retry import KazooRetry
from kazoo.security import make_digest_acl
from zkop_testing.waiting import EVENTUALLY
from zkop_testing.zookeeper import DEBIAN, ZooKeeperInstallation, ZooKeeperServer
from zkop_testing.zookeeper_secure import SecureZooKeeperServer, digest_jaas

pytestmark = pytest.mark.zookeeper_semantics
REPO = Path(__file__).resolve().parents[2]


def server_watches(server: ZooKeeperServer) -> Any:
    """``hack.bench.watches.server_watches``: ``wchs`` and ``wchc`` as the benchmark reads them."""
    sys.path.insert(0, str(REPO))
    try:
        from hack.bench.watches import server_watches as read
    finally:
        sys.path.remove(str(REPO))
    return read(server)


def test_each_line_answers_the_four_letter_words_the_benchmark_reads(
        zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str,
        zookeeper_installation: ZooKeeperInstallation) -> None:
    srvr = zk_server.srvr()
    release = re.search(r"^Zookeeper version: (\d+\.\d+\.\d+)", srvr, re.MULTILINE)
    assert release is not None, srvr
    assert tuple(int(n) for n in release.group(1).split(".")[:2]) == zookeeper_installation.version
    if zookeeper_installation.name != DEBIAN:  # a Maven line's name is its release; Debian's jar says 3.8.0
        assert release.group(1) == zookeeper_installation.name
    zxid = re.search(r"^Zxid: (0x[0-9a-f]+)", srvr, re.MULTILINE)  # hack/bench/measure.py reads it
    assert zxid is not None and zk_server.mode() == "standalone"

    zk.create(f"{zk_base}/w", b"")
    fired = threading.Event()
    zk.get(f"{zk_base}/w", watch=lambda event: fired.set())
    watches = server_watches(zk_server)  # wchs and wchc, as the benchmark reads them
    assert isinstance(watches["total"], int) and watches["total"] >= 1
    session = f"0x{zk.client_id[0]:x}"
    assert f"{zk_base}/w" in zk_server.four_letter_word("wchc").split(session, 1)[1].split("0x", 1)[0]

    mntr = zk_server.mntr()
    assert mntr["zk_version"].startswith(release.group(1))
    packets = int(mntr["zk_packets_received"])
    zk.set(f"{zk_base}/w", b"changed")
    assert fired.wait(EVENTUALLY)
    assert int(zk_server.mntr()["zk_packets_received"]) > packets


def test_enforce_auth_ends_an_unauthenticated_session_from_37_on(
        tmp_path: Path, zookeeper_installation: ZooKeeperInstallation) -> None:
    enforced = zookeeper_installation.at_least(3, 7)
    jaas = digest_jaas({"zkop": "secret"})
    with SecureZooKeeperServer(tmp_path, jaas=jaas, enforce_sasl=True, installation=zookeeper_installation) as server:
        client = KazooClient(hosts=server.hosts, connection_retry=KazooRetry(max_tries=1),
                             command_retry=KazooRetry(max_tries=0))
        client.start(timeout=EVENTUALLY)  # the handshake itself is admitted on every line
        try:
            if enforced:
                with pytest.raises(SessionClosedRequireSaslError):
                    client.create("/unauthenticated", b"x")
            else:
                client.create("/unauthenticated", b"x")
                assert client.get("/unauthenticated")[0] == b"x"
        finally:
            client.stop()
            client.close()
        assert ("zookeeper.enforce.auth.enabled = true" in server.log_path.read_text()) == enforced


def test_exists_checks_read_from_384_and_392_on(zk_server: ZooKeeperServer, zk: KazooClient, zk_base: str) -> None:
    """ZOOKEEPER-2590 (3.8.4, 3.9.2; ``FinalRequestProcessor``, ``OpCode.exists``): ``exists`` on a znode that
    exists checks READ as ``getData`` does, so a client that may not read it gets NoAuth; earlier releases (3.5 to
    3.7, Debian's 3.8.0) answer its stat. A missing znode is no error on any line. zkop needs READ on every
    znode it manages anyway (``zkop.zkconfig.spec.ZNODE_NEEDS``)."""
    release = re.search(r"^Zookeeper version: (\d+)\.(\d+)\.(\d+)", zk_server.srvr(), re.MULTILINE)
    assert release is not None
    major, minor, patch = (int(n) for n in release.groups())
    checks = (major, minor, patch) >= (3, 9, 2) or (3, 8, 4) <= (major, minor, patch) < (3, 9, 0)
    locked = f"{zk_base}/locked"
    zk.create(locked, b"theirs", acl=[make_digest_acl("other", "secret", all=True)])
    try:
        if checks:
            with pytest.raises(NoAuthError):
                zk.exists(locked)
        else:
            stat = zk.exists(locked)
            assert stat is not None and stat.dataLength == len(b"theirs")
        assert zk.exists(f"{locked}/missing") is None and zk.exists(f"{zk_base}/missing") is None
    finally:
        zk.delete(locked)  # DELETE is the parent's (open) ACL's
