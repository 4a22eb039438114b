"""Secured ZooKeeper servers for tests: a throw-away CA, TLS on ``secureClientPort``, SASL with JAAS.

Follows the facts in ``shared/reference/zookeeper-secure-servers.md`` (Debian's ZooKeeper 3.8; the same keys
hold on the Maven lines, 3.9 the suite's default):

* TLS needs Netty (``-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory``)
  and ``/usr/share/java/netty-codec.jar`` on the class path (Debian's ``zookeeper.jar`` manifest
  omits it). Key and trust stores are PEM files (``ssl.keyStore.type=PEM``: a PKCS#8 key followed by
  the certificate); ``ssl.clientAuth`` is ``need``/``want``/``none``; the ``x509`` scheme's id is the
  client certificate's subject (``X509AuthenticationProvider``: ``CN=…``).
* SASL: a JAAS ``Server`` section (``DigestLoginModule`` with ``user_<name>="<password>"``),
  ``authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider`` and, to refuse
  unauthenticated clients, ``enforce.auth.enabled=true`` with ``enforce.auth.schemes=sasl``
  (ZooKeeper Administrator's Guide, "Authentication & Authorization Options").

The plain ``clientPort`` stays open on loopback so that the harness's four-letter-word probes keep
working; tests connect zkop to :attr:`SecureZooKeeperServer.secure_port`. Every file (CA, server
data, logs) lives in a directory the caller gives (pytest's ``tmp_path``). Certificates are made with
the ``openssl`` command line (no Python crypto package needed).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from zkop_testing.zookeeper import (
    DEFAULT_JVM_FLAGS,
    LOOPBACK,
    ZooKeeperInstallation,
    ZooKeeperServer,
    find_zookeeper,
    free_port,
)

__all__ = ["NETTY_CODEC_JAR", "Issued", "MitKdc", "SecureZooKeeperServer", "TestCA", "digest_jaas", "kerberos_jaas"]

NETTY_CODEC_JAR = "/usr/share/java/netty-codec.jar"
_NETTY_FACTORY = "-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory"


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@dataclass(frozen=True)
class Issued:
    """A certificate issued by :class:`TestCA`: PEM files ``cert`` and ``key`` (PKCS#8), and ``bundle``
    (key then certificate: ZooKeeper's PEM key store)."""

    cert: Path
    key: Path
    bundle: Path
    subject: str  # RFC 2253 form as ZooKeeper's x509 provider reports it, e.g. "CN=zkop"


class TestCA:
    """A throw-away certificate authority (P-256 keys, valid one day) in ``directory``.

    Args:
        directory: where the CA and every certificate it issues are written.
        name: the CA's common name (two CAs with different names do not trust each other).
    """

    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path, name: str = "zkop test CA") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        stem = name.replace(" ", "-")
        self.key = directory / f"{stem}.key"
        self.cert = directory / f"{stem}.pem"
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(self.key),
                 cwd=directory)
        _openssl("req", "-x509", "-new", "-key", str(self.key), "-out", str(self.cert), "-days", "1",
                 "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)

    def issue(self, cn: str, *, dns: Sequence[str] = (), ips: Sequence[str] = (), stem: str | None = None,
              organizations: Sequence[str] = ()) -> Issued:
        """Issue a certificate for ``CN=cn`` (and an ``O=`` per organization) with the given subject alternative names.

        Server certificates need ``dns``/``ips`` (the name a client connects to); a client
        certificate needs none. Kubernetes reads a client certificate's ``CN`` as the user name and
        each ``O`` as a group (kube-apiserver's x509 authenticator, ``CommonNameUserConversion``).
        Returns PEM paths under the CA's directory (``stem``: file name stem, default ``cn``; re-issuing
        with the same stem overwrites the files, as a rotation).
        """
        stem = stem or cn
        key, csr = self.directory / f"{stem}.key", self.directory / f"{stem}.csr"
        cert, bundle = self.directory / f"{stem}.pem", self.directory / f"{stem}-keystore.pem"
        ext = self.directory / f"{stem}.ext"
        sans = [f"DNS:{d}" for d in dns] + [f"IP:{i}" for i in ips]
        ext.write_text("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                       "extendedKeyUsage=serverAuth,clientAuth\n"
                       + (f"subjectAltName={','.join(sans)}\n" if sans else ""))
        new_key = self.directory / f"{stem}.key.new"
        _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(new_key),
                 cwd=self.directory)
        subject = f"/CN={cn}" + "".join(f"/O={o}" for o in organizations)
        _openssl("req", "-new", "-key", str(new_key), "-out", str(csr), "-subj", subject, cwd=self.directory)
        new_cert = self.directory / f"{stem}.pem.new"
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self.key),
                 "-CAcreateserial", "-out", str(new_cert), "-days", "1", "-extfile", str(ext), cwd=self.directory)
        new_bundle = self.directory / f"{stem}-keystore.pem.new"
        new_bundle.write_bytes(new_key.read_bytes() + new_cert.read_bytes())
        # Replace each file in one rename, like a Secret volume update (new inode).
        new_key.replace(key)
        new_cert.replace(cert)
        new_bundle.replace(bundle)
        return Issued(cert=cert, key=key, bundle=bundle, subject=f"CN={cn}")


def digest_jaas(users: Mapping[str, str]) -> str:
    """A JAAS file whose ``Server`` section accepts DIGEST-MD5 logins ``user → password``."""
    entries = "".join(f'\n  user_{user}="{password}"' for user, password in users.items())
    return f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required{entries};\n}};\n"


class SecureZooKeeperServer(ZooKeeperServer):
    """A standalone :class:`ZooKeeperServer` with TLS on a ``secureClientPort`` and/or SASL.

    Args:
        directory: the server's directory (data, conf, logs, JAAS file); kept after :meth:`stop`.
        server_cert: the server's key store (an :class:`Issued`); enables TLS.
        trust: CA PEM the server trusts for client certificates.
        client_auth: ``ssl.clientAuth`` (``need``, ``want``, ``none``).
        jaas: JAAS file text; enables SASL (``SASLAuthenticationProvider``).
        enforce_sasl: refuse clients that have not authenticated with SASL.
        jvm_flags_extra: more JVM flags (``-Djava.security.krb5.conf=…`` for Kerberos).
        extra_config: more ``zoo.cfg`` keys.
        installation: the server's line (default :func:`find_zookeeper`, the newest line; to Debian's jar
            netty's codec is added, a Maven line has it already). ``enforce.auth.enabled`` exists from 3.7 on: older
            lines take it for an unknown system property and admit unauthenticated clients.
        Other keyword arguments go to :class:`ZooKeeperServer`.
    """

    def __init__(self, directory: Path, *, server_cert: Issued | None = None, trust: Path | None = None,
                 client_auth: str = "need", jaas: str | None = None, enforce_sasl: bool = False,
                 extra_config: Mapping[str, str] | None = None, jvm_flags_extra: Sequence[str] = (),
                 installation: ZooKeeperInstallation | None = None, **kwargs: Any) -> None:
        installation = installation or find_zookeeper()
        if not installation.bundles_netty:
            installation = replace(installation, classpath=(*installation.classpath, NETTY_CODEC_JAR))
        self.directory = directory
        self.secure_port: int | None = free_port() if server_cert is not None else None
        config: dict[str, str] = {}
        flags = [*DEFAULT_JVM_FLAGS, _NETTY_FACTORY, *jvm_flags_extra]
        if server_cert is not None:
            assert self.secure_port is not None
            config.update({
                "secureClientPort": str(self.secure_port),
                "secureClientPortAddress": LOOPBACK,
                "ssl.keyStore.location": str(server_cert.bundle),
                "ssl.keyStore.type": "PEM",
                "ssl.clientAuth": client_auth,
                "authProvider.x509": "org.apache.zookeeper.server.auth.X509AuthenticationProvider",
            })
            if trust is not None:
                config.update({"ssl.trustStore.location": str(trust), "ssl.trustStore.type": "PEM"})
        if jaas is not None:
            jaas_file = directory / "jaas.conf"
            directory.mkdir(parents=True, exist_ok=True)
            jaas_file.write_text(jaas)
            flags.append(f"-Djava.security.auth.login.config={jaas_file}")
            config["authProvider.sasl"] = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
            if enforce_sasl:
                config.update({"enforce.auth.enabled": "true", "enforce.auth.schemes": "sasl"})
        config.update(extra_config or {})
        super().__init__(extra_config=config, jvm_flags=flags, installation=installation, **kwargs)

    def _ensure_dir(self) -> None:
        if self._base_dir is None:
            self._base_dir = self.directory / "server"

    def secure_hosts(self, host: str = LOOPBACK) -> str:
        """Connect string for the TLS port, reached as ``host`` (``localhost`` or ``127.0.0.1``)."""
        if self.secure_port is None:
            raise ValueError("this server has no TLS port")
        return f"{host}:{self.secure_port}"


class MitKdc:
    """A throw-away MIT Kerberos KDC (Debian's ``krb5-kdc``) for realm ``EXAMPLE.COM`` on a free loopback port.

    Writes ``krb5.conf``, ``kdc.conf``, the database and keytabs into ``directory``; :meth:`env` gives
    the variables a process needs (``KRB5_CONFIG``; ``KRB5_KDC_PROFILE`` for the admin tools).
    ``krb5kdc -n`` runs in the foreground as a child; :meth:`stop` ends it. Configuration follows
    MIT krb5's ``kdc.conf(5)`` and ``krb5.conf(5)`` (``dns_canonicalize_hostname = false`` and
    ``rdns = false``: ``localhost`` stays ``localhost`` in service principals).

    Raises:
        FileNotFoundError: ``krb5kdc``/``kdb5_util``/``kadmin.local`` are not installed
            (``apt-get install -y krb5-kdc krb5-admin-server``).
    """

    REALM = "EXAMPLE.COM"

    def __init__(self, directory: Path) -> None:
        import shutil

        for tool in ("krb5kdc", "kdb5_util", "kadmin.local"):
            if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
                raise FileNotFoundError(f"{tool} not installed: apt-get install -y krb5-kdc krb5-admin-server")
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.krb5_conf = directory / "krb5.conf"
        self.kdc_conf = directory / "kdc.conf"
        self.krb5_conf.write_text(
            f"[libdefaults]\n default_realm = {self.REALM}\n dns_lookup_kdc = false\n dns_lookup_realm = false\n"
            " dns_canonicalize_hostname = false\n rdns = false\n udp_preference_limit = 1\n"
            f"[realms]\n {self.REALM} = {{\n  kdc = {LOOPBACK}:{self.port}\n }}\n"
            f"[domain_realm]\n localhost = {self.REALM}\n")
        self.kdc_conf.write_text(
            f"[kdcdefaults]\n kdc_listen = {LOOPBACK}:{self.port}\n kdc_tcp_listen = {LOOPBACK}:{self.port}\n"
            f"[realms]\n {self.REALM} = {{\n  database_name = {directory / 'principal'}\n"
            f"  key_stash_file = {directory / 'stash'}\n  acl_file = {directory / 'kadm5.acl'}\n"
            f"  kdc_listen = {LOOPBACK}:{self.port}\n  kdc_tcp_listen = {LOOPBACK}:{self.port}\n }}\n"
            f"[logging]\n kdc = FILE:{directory / 'kdc.log'}\n")
        self._run("/usr/sbin/kdb5_util", "create", "-s", "-r", self.REALM, "-P", "master-password")
        self._proc = subprocess.Popen(["/usr/sbin/krb5kdc", "-n"], env=self.env(), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    def env(self) -> dict[str, str]:
        """Environment for Kerberos tools and clients of this KDC (inherits ``os.environ``)."""
        import os

        return {**os.environ, "KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def _run(self, *argv: str) -> None:
        subprocess.run(argv, env=self.env(), check=True, capture_output=True, timeout=60)

    def add_principal(self, name: str) -> Path:
        """Create ``name@EXAMPLE.COM`` with a random key; return a keytab holding it."""
        keytab = self.directory / f"{name.replace('/', '_')}.keytab"
        self._run("/usr/sbin/kadmin.local", "-r", self.REALM, "-q", f"addprinc -randkey {name}")
        self._run("/usr/sbin/kadmin.local", "-r", self.REALM, "-q", f"ktadd -k {keytab} {name}")
        return keytab

    def stop(self) -> None:
        """Terminate the KDC and wait for it."""
        self._proc.terminate()
        self._proc.wait(timeout=10)


def kerberos_jaas(keytab: Path, principal: str) -> str:
    """A JAAS file whose ``Server`` section logs the ZooKeeper server in from ``keytab`` as ``principal``."""
    return ("Server {\n  com.sun.security.auth.module.Krb5LoginModule required\n"
            f'  useKeyTab=true\n  keyTab="{keytab}"\n  storeKey=true\n  useTicketCache=false\n'
            f'  principal="{principal}";\n}};\n')
