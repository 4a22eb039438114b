"""How to reach the ensemble: :class:`ConnectionOptions` and the kazoo client built from them.

TLS follows ZooKeeper's ``secureClientPort`` (Netty) with kazoo's ``use_ssl``: certificates are
always verified, the host name is checked unless explicitly opted out; SASL (DIGEST-MD5,
GSSAPI) goes through kazoo's ``sasl_options`` (:mod:`zkop.zookeeper.security`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from zkop.zookeeper.actions import OPEN_ACL, AclEntry
from zkop.zookeeper.handler import SelectHandler
from zkop.zookeeper.security import install_sasl_handler, sasl_options

__all__ = ["ConnectionOptions", "build_client", "split_chroot"]

log = logging.getLogger("zkop.zookeeper.session")


@dataclass(frozen=True)
class ConnectionOptions:
    """How to reach the ensemble.

    Attributes:
        hosts: connect string ``host:port[,host:port…][/chroot]`` (ZooKeeper Programmer's Guide,
            "Connecting"); the chroot must already exist.
        session_timeout: requested session timeout, seconds (the server clamps it to
            [2, 20] × tickTime by default); also the longest any request waits for its answer.
        auth: ``(scheme, credential)`` pairs, e.g. ``("digest", "user:password")``.
        auth_file: the file ``auth`` was read from (``user:password``, digest), if any: watched for
            rotation like the TLS and SASL files, and re-read into kazoo's ``auth_data`` when it changes.
        use_tls, tls_ca_file, tls_cert_file, tls_key_file: TLS to the client port (ZooKeeper's
            ``secureClientPort``); the server certificate is always verified, against
            ``tls_ca_file`` and the system trust store (OpenSSL's default paths, ``SSL_CERT_FILE``).
        tls_check_hostname: check that the server certificate names the host zkop connects to
            (RFC 6125 via ``ssl.SSLContext.check_hostname``); off only by explicit opt-out.
        sasl_mechanism: ``"DIGEST-MD5"`` or ``"GSSAPI"`` (see :mod:`.security`), or ``None``.
        sasl_credentials_file: ``user:password`` file for DIGEST-MD5.
        sasl_principal: client principal for GSSAPI (default: the credentials cache's or keytab's).
        sasl_service: the server's SASL service name (ZooKeeper's ``zookeeper.sasl.client.username``).
        credentials_check_period: seconds between checks of the TLS and SASL files for rotation
            (:class:`~zkop.zookeeper.security.RotationWatcher`); a change opens a new session.
        connect_timeout: seconds to wait for the first session in
            :meth:`~zkop.zookeeper.session.Session.start`.
        parent_acl: ACL for parent znodes zkop creates (default: the open ACL).
        session_expiration_percent: a session SUSPENDED for this percentage of
            ``session_timeout`` is declared LOST and a new one is made from scratch (Curator's
            ``sessionExpirationPercent``, default 100; 0 disables: SUSPENDED until a server
            takes the old session back or expires it). kazoo 2.11 keeps only the requested
            timeout, not the negotiated one Curator uses; they are the same unless the request
            is outside the servers' [minSessionTimeout, maxSessionTimeout].
        refusal_check_interval: while SUSPENDED, every this many seconds ask the ensemble whether
            it refuses the session for having seen a newer zxid (it lost its data); two answers
            "yes" in a row reset the session before the timeout. ``None`` disables the check.
        watch_mode: ``auto`` (persistent recursive watches on the roots of what is managed when the
            server supports them, ZooKeeper ≥ 3.6; else one watch per znode), ``persistent`` (the
            same, the fallback logged as an error) or ``per-node`` (one watch per znode always);
            see :mod:`zkop.zookeeper.watches`.
        report_connected: this session sets ``zkop_zookeeper_connected`` (the process's main session; the
            sessions of other ensembles report their state elsewhere).
    """

    hosts: str = "127.0.0.1:2181"
    session_timeout: float = 10.0
    auth: tuple[tuple[str, str], ...] = ()
    auth_file: str | None = None
    use_tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_credentials_file: str | None = None
    sasl_principal: str | None = None
    sasl_service: str = "zookeeper"
    credentials_check_period: float = 30.0
    connect_timeout: float = 15.0
    parent_acl: tuple[AclEntry, ...] = OPEN_ACL
    session_expiration_percent: int = 100
    refusal_check_interval: float | None = 1.0
    watch_mode: str = "auto"
    report_connected: bool = True


def split_chroot(hosts: str) -> tuple[str, str]:
    """Split ``"h1:2181,h2:2181/app"`` into ``("h1:2181,h2:2181", "/app")``; chroot ``""`` if none."""
    index = hosts.find("/")
    if index < 0:
        return hosts, ""
    return hosts[:index], hosts[index:].rstrip("/")


def build_client(options: ConnectionOptions, connection_retry: KazooRetry | None = None,
                 handler: SelectHandler | None = None, logger: logging.Logger | None = None) -> KazooClient:
    """A kazoo client for ``options``: zkop's select handler (or ``handler``), TLS (certificates verified,
    host name checked unless opted out), SASL, ``connection_retry`` and ``logger``.

    The default retry reconnects without end, 0.2 s doubling to 5 s between passes over the hosts.

    Raises:
        CredentialsError: SASL is asked for with an unreadable credentials file or an unknown mechanism.
    """
    kwargs: dict[str, Any] = {
        "hosts": options.hosts,
        "timeout": options.session_timeout,
        "auth_data": list(options.auth) or None,
        "connection_retry": connection_retry or {"max_tries": -1, "delay": 0.2, "backoff": 2, "max_delay": 5.0},
        "handler": handler or SelectHandler(),
        "logger": logger,
        "sasl_options": sasl_options(options.sasl_mechanism, options.sasl_credentials_file,
                                     options.sasl_principal, options.sasl_service),
    }
    if options.use_tls:
        if not options.tls_check_hostname:
            log.warning("TLS to ZooKeeper without host name verification (--zk-tls-insecure-skip-hostname-verify): "
                        "any server holding a certificate from a trusted CA can impersonate the ensemble")
        kwargs.update(
            use_ssl=True, ca=options.tls_ca_file, certfile=options.tls_cert_file,
            keyfile=options.tls_key_file, verify_certs=True, check_hostname=options.tls_check_hostname,
        )
    client = KazooClient(**kwargs)
    if options.sasl_mechanism:
        install_sasl_handler(client)
    return client
