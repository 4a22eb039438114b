"""SASL GSSAPI (Kerberos) against a real MIT KDC and a ZooKeeper server that logs in from a keytab.

Needs Debian's ``krb5-kdc`` and ``krb5-admin-server`` and the ``kerberos`` Python package (pure-sasl's
GSSAPI backend; the ``kerberos`` extra, built against ``libkrb5-dev``); ``.ci/run`` installs them.
The client side is configured the way the docs tell an operator to: ``KRB5_CONFIG`` and
``KRB5_CLIENT_KTNAME`` in the environment, ``--zk-sasl-mechanism GSSAPI``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.security import make_acl
from zkop_testing.zookeeper_secure import MitKdc, SecureZooKeeperServer, kerberos_jaas

from zkop.cmd.main import build_parser, connection_options
from zkop.zookeeper.adapter import ConnectionOptions, ZooKeeperAdapter, ZooKeeperError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Kerberos:
    kdc: MitKdc
    server: SecureZooKeeperServer
    client_keytab: Path


@pytest.fixture(scope="module")
def kerberos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kerberos]:
    directory = tmp_path_factory.mktemp("kerberos")
    kdc = MitKdc(directory / "kdc")
    try:
        server_keytab = kdc.add_principal("zookeeper/localhost")
        client_keytab = kdc.add_principal("zkop")
        server = SecureZooKeeperServer(
            directory, jaas=kerberos_jaas(server_keytab, f"zookeeper/localhost@{kdc.REALM}"), enforce_sasl=True,
            extra_config={"kerberos.removeHostFromPrincipal": "true", "kerberos.removeRealmFromPrincipal": "true"},
            jvm_flags_extra=[f"-Djava.security.krb5.conf={kdc.krb5_conf}"])
        with server:
            yield Kerberos(kdc, server, client_keytab)
    finally:
        kdc.stop()


def test_gssapi_with_a_client_keytab_manages_a_znode_under_a_sasl_acl(kerberos: Kerberos, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRB5_CONFIG", str(kerberos.kdc.krb5_conf))
    monkeypatch.setenv("KRB5_CLIENT_KTNAME", str(kerberos.client_keytab))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'ccache'}")
    args = build_parser().parse_args(["run", "--zk-hosts", f"localhost:{kerberos.server.client_port}",
                                      "--zk-sasl-mechanism", "GSSAPI", "--zk-sasl-principal", "zkop@EXAMPLE.COM"])
    adapter = ZooKeeperAdapter(connection_options(args))
    started = time.monotonic()
    adapter.start()
    try:
        log.info("GSSAPI session in %.2f s", time.monotonic() - started)
        adapter.client.create("/kerberized", b"x", acl=[make_acl("sasl", "zkop", all=True)])
        assert adapter.client.get("/kerberized")[0] == b"x"
    finally:
        adapter.stop()


def test_gssapi_without_credentials_is_a_clear_error(kerberos: Kerberos, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRB5_CONFIG", str(kerberos.kdc.krb5_conf))
    monkeypatch.delenv("KRB5_CLIENT_KTNAME", raising=False)
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'empty-ccache'}")
    adapter = ZooKeeperAdapter(ConnectionOptions(hosts=f"localhost:{kerberos.server.client_port}",
                                                 sasl_mechanism="GSSAPI", connect_timeout=10))
    try:
        with pytest.raises(ZooKeeperError, match=r"SASL GSSAPI.*No Kerberos credentials available") as raised:
            adapter.start()
        log.info("%s", raised.value)
    finally:
        adapter.stop()
