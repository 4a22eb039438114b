"""A ZooKeeperEnsemble as plain data: :func:`parse_ensemble`, the Secrets it names, and the
:class:`~zkop.zookeeper.connection.ConnectionOptions` made from them (:func:`connection_options`).

The fields mirror ``zkop run``'s ``--zk-*`` flags (``docs/operations.md``, "Several ensembles"):
``connectString`` and ``chroot`` (``--zk-hosts``), ``sessionTimeout`` (``--zk-session-timeout``),
``watchMode`` (``--zk-watch-mode``), ``auth.digest`` (``--zk-auth-file``), ``auth.sasl``
(``--zk-sasl-*``), ``tls`` (``--zk-tls-*``, the Secret's ``ca.crt``, ``tls.crt``, ``tls.key``: a
cert-manager Certificate's Secret). Every Secret is read from the one namespace zkop trusts
(``--ensemble-secret-namespace``), never from anywhere else (cert-manager's cluster resource namespace).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from zkop.feature.tenancy import TenancyPolicy
from zkop.kube.client import JSON
from zkop.kube.duration import parse_duration
from zkop.zkconfig.spec import GROUP, VERSION
from zkop.zookeeper.connection import ConnectionOptions
from zkop.zookeeper.paths import InvalidPath, validate_path

__all__ = [
    "DEFAULT_SECRET_KEY",
    "FINALIZER",
    "GROUP",
    "KIND",
    "PLURAL",
    "VERSION",
    "WATCH_MODES",
    "EnsembleSpec",
    "InvalidEnsemble",
    "SecretKeyRef",
    "SecretMissing",
    "connection_options",
    "fingerprint",
    "parse_ensemble",
    "read_ensemble",
]

KIND = "ZooKeeperEnsemble"
PLURAL = "zookeeperensembles"
#: Held while a ZooKeeperConfig still needs the ensemble to delete its znode (``docs/operations.md``).
FINALIZER = "zookeeperensembles.platform.example.com/finalizer"
#: The Secret key of ``user:password`` when a ``secretRef`` names none.
DEFAULT_SECRET_KEY = "credentials"
#: As ``--zk-watch-mode``.
WATCH_MODES = ("auto", "persistent", "per-node")
_SASL_MECHANISMS = ("DIGEST-MD5", "GSSAPI")


class InvalidEnsemble(ValueError):
    """The spec breaks a rule; ``field`` names where (``spec.auth.sasl``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


class SecretMissing(ValueError):
    """A Secret or a key the spec names does not exist in the trusted namespace."""


@dataclass(frozen=True)
class SecretKeyRef:
    """A key of a Secret in the trusted namespace."""

    name: str
    key: str = DEFAULT_SECRET_KEY


@dataclass(frozen=True)
class EnsembleSpec:
    """A parsed ``spec``; ``None`` for what the spec leaves to zkop's flags (session timeout, watch mode)."""

    connect_string: str
    chroot: str = ""
    session_timeout: float | None = None
    watch_mode: str | None = None
    digest: SecretKeyRef | None = None
    sasl_mechanism: str | None = None
    sasl_credentials: SecretKeyRef | None = None
    sasl_principal: str | None = None
    sasl_service: str = "zookeeper"
    tls_secret: str | None = None
    tls_check_hostname: bool = True
    #: ``spec.tenancy`` and ``spec.adoption``: who may use the ensemble, where, and whether it adopts.
    policy: TenancyPolicy = field(default_factory=TenancyPolicy)

    @property
    def hosts(self) -> str:
        """The connect string with the chroot, as ``--zk-hosts`` takes it."""
        return self.connect_string + (self.chroot if self.chroot != "/" else "")

    @property
    def secret_names(self) -> frozenset[str]:
        """The Secrets (in the trusted namespace) this spec reads."""
        refs = (self.digest, self.sasl_credentials)
        return frozenset([r.name for r in refs if r is not None] + ([self.tls_secret] if self.tls_secret else []))


def _secret_ref(value: Any, field: str) -> SecretKeyRef:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        raise InvalidEnsemble(field, "needs a Secret name")
    key = value.get("key") or DEFAULT_SECRET_KEY
    if not isinstance(key, str):
        raise InvalidEnsemble(f"{field}.key", "must be a string")
    return SecretKeyRef(value["name"], key)


def _optional_str(spec: Mapping[str, Any], name: str, field: str) -> str | None:
    value = spec.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidEnsemble(field, "must be a string")
    return value or None


def parse_ensemble(spec: Any) -> EnsembleSpec:
    """Parse a ZooKeeperEnsemble's ``spec`` (the rules of its CRD schema, checked again for objects stored
    without them and for ``zkop validate``).

    Raises:
        InvalidEnsemble: a field breaks a rule (the exception names it).
    """
    if not isinstance(spec, dict):
        raise InvalidEnsemble("spec", "must be an object")
    connect = spec.get("connectString")
    if not isinstance(connect, str) or not connect.strip():
        raise InvalidEnsemble("spec.connectString", "is required: host:port[,host:port...]")
    if "/" in connect:
        raise InvalidEnsemble("spec.connectString", "has no chroot; set spec.chroot instead")
    chroot = _optional_str(spec, "chroot", "spec.chroot") or ""
    if chroot:
        try:
            validate_path(chroot)
        except InvalidPath as err:
            raise InvalidEnsemble("spec.chroot", str(err)) from None
    timeout = None
    if spec.get("sessionTimeout") is not None:
        try:  # a metav1.Duration: Go's rules, no bare seconds
            timeout = parse_duration(str(spec["sessionTimeout"]))
        except ValueError as err:
            raise InvalidEnsemble("spec.sessionTimeout", f"{err}: want a duration such as 10s or 1m30s") from None
        if timeout <= 0:
            raise InvalidEnsemble("spec.sessionTimeout", f"{spec['sessionTimeout']!r} must be positive")
    watch_mode = _optional_str(spec, "watchMode", "spec.watchMode")
    if watch_mode is not None and watch_mode not in WATCH_MODES:
        raise InvalidEnsemble("spec.watchMode", f"must be one of {', '.join(WATCH_MODES)}")
    auth = spec.get("auth") or {}
    if not isinstance(auth, dict):
        raise InvalidEnsemble("spec.auth", "must be an object")
    digest = None
    if auth.get("digest") is not None:
        digest = _secret_ref((auth["digest"] or {}).get("secretRef"), "spec.auth.digest.secretRef")
    sasl = auth.get("sasl")
    mechanism = principal = None
    service = "zookeeper"
    sasl_ref = None
    if sasl is not None:
        if not isinstance(sasl, dict) or sasl.get("mechanism") not in _SASL_MECHANISMS:
            raise InvalidEnsemble("spec.auth.sasl.mechanism", f"must be one of {', '.join(_SASL_MECHANISMS)}")
        mechanism = sasl["mechanism"]
        if sasl.get("secretRef") is not None:
            sasl_ref = _secret_ref(sasl["secretRef"], "spec.auth.sasl.secretRef")
        elif mechanism == "DIGEST-MD5":
            raise InvalidEnsemble("spec.auth.sasl.secretRef", "DIGEST-MD5 needs a Secret key holding user:password")
        principal = _optional_str(sasl, "principal", "spec.auth.sasl.principal")
        service = _optional_str(sasl, "service", "spec.auth.sasl.service") or "zookeeper"
    tls = spec.get("tls")
    tls_secret = None
    check_hostname = True
    if tls is not None:
        if not isinstance(tls, dict):
            raise InvalidEnsemble("spec.tls", "must be an object")
        tls_secret = _secret_ref(tls.get("secretRef"), "spec.tls.secretRef").name
        check_hostname = not bool(tls.get("insecureSkipHostnameVerify", False))
    try:
        policy = TenancyPolicy.from_spec(spec)
    except ValueError as err:  # names the field below spec: tenancy.rules[0].pathPrefixes[1] ...
        raise InvalidEnsemble("spec." + str(err).split(":", 1)[0], str(err).split(":", 1)[-1].strip()) from None
    return EnsembleSpec(connect.strip(), chroot, timeout, watch_mode, digest, mechanism, sasl_ref, principal, service,
                        tls_secret, check_hostname, policy)


def _secret_value(secrets: Callable[[str], JSON | None], name: str, key: str, *, required: bool = True) -> bytes | None:
    """The decoded bytes of ``key`` of Secret ``name`` (``data`` is base64; ``stringData`` is never stored)."""
    import base64
    import binascii

    secret = secrets(name)
    if secret is None:
        raise SecretMissing(f"Secret {name!r} not found in the trusted namespace")
    value = (secret.get("data") or {}).get(key)
    if value is None:
        if required:
            raise SecretMissing(f"Secret {name!r} has no key {key!r}")
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise SecretMissing(f"Secret {name!r} key {key!r} is not base64") from None


def _write(directory: Path, name: str, data: bytes) -> str:
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return str(path)


def connection_options(spec: EnsembleSpec, secrets: Callable[[str], JSON | None], base: ConnectionOptions,
                       directory: Path) -> ConnectionOptions:
    """The connection options of ``spec``: ``base`` (the flags' options) with the ensemble's hosts, timeout,
    watch mode, credentials and TLS material, the files TLS and SASL need written (mode 0600) to ``directory``.

    Args:
        secrets: ``name`` → the Secret in the trusted namespace (``None``: absent).
        base: zkop's own options; what the spec leaves unset is taken from them, its files never.
        directory: a private directory the ensemble's session owns (removed with it).

    Raises:
        SecretMissing: a Secret or key the spec needs is absent.
        InvalidEnsemble: a credential is not ``user:password``.
    """
    auth: tuple[tuple[str, str], ...] = ()
    if spec.digest is not None:
        raw = _secret_value(secrets, spec.digest.name, spec.digest.key)
        text = (raw or b"").decode("utf-8", "replace").strip()
        if ":" not in text:
            raise InvalidEnsemble("spec.auth.digest", f"Secret {spec.digest.name!r} key {spec.digest.key!r} is "
                                                      "not user:password")
        auth = (("digest", text),)
    sasl_file = None
    if spec.sasl_credentials is not None:
        raw = _secret_value(secrets, spec.sasl_credentials.name, spec.sasl_credentials.key)
        sasl_file = _write(directory, "sasl-credentials", raw or b"")
    ca = cert = key = None
    if spec.tls_secret is not None:
        values = {name: _secret_value(secrets, spec.tls_secret, name, required=False)
                  for name in ("ca.crt", "tls.crt", "tls.key")}
        if (values["tls.crt"] is None) != (values["tls.key"] is None):
            raise SecretMissing(f"Secret {spec.tls_secret!r}: tls.crt and tls.key go together")
        paths = {name: _write(directory, name, data) for name, data in values.items() if data is not None}
        ca, cert, key = paths.get("ca.crt"), paths.get("tls.crt"), paths.get("tls.key")
    return replace(
        base, hosts=spec.hosts, session_timeout=spec.session_timeout or base.session_timeout, auth=auth,
        auth_file=None, use_tls=spec.tls_secret is not None, tls_ca_file=ca, tls_cert_file=cert, tls_key_file=key,
        tls_check_hostname=spec.tls_check_hostname, sasl_mechanism=spec.sasl_mechanism,
        sasl_credentials_file=sasl_file, sasl_principal=spec.sasl_principal, sasl_service=spec.sasl_service,
        watch_mode=spec.watch_mode or base.watch_mode,
        # A rotation is a new session from the Secrets' new contents (a new fingerprint, a new directory);
        # the ensemble's state is zkop_ensemble_ready{ensemble}, zkop_zookeeper_connected is the flags' session's.
        report_connected=False,
    )


#: The spec fields that say which objects an ensemble admits, not how zkop connects: a change of these alone
#: keeps the session (:meth:`zkop.ensembles.running.EnsembleRuntime.change_policy`).
POLICY_FIELDS = frozenset({"tenancy", "adoption"})


def fingerprint(spec: JSON, secrets: Callable[[str], JSON | None], names: frozenset[str]) -> str:
    """A digest of ``spec`` (but :data:`POLICY_FIELDS`) and the data of the Secrets ``names``: the ensemble's
    session is made anew when it changes (a Secret's other metadata changing does not count)."""
    connection = {k: v for k, v in spec.items() if k not in POLICY_FIELDS}
    material = {"spec": connection, "secrets": {n: ((secrets(n) or {}).get("data")) for n in sorted(names)}}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def read_ensemble(get: Callable[[str], JSON | None], secrets: Callable[[str], JSON | None], name: str,
                  base: ConnectionOptions, directory: Path) -> ConnectionOptions:
    """The connection options of ZooKeeperEnsemble ``name`` as it is now, read once (``--service-bridge-ensemble``,
    ``--import-ensemble``): :func:`parse_ensemble` and :func:`connection_options` over what ``get`` and
    ``secrets`` return.

    Raises:
        SecretMissing: no such ensemble, or a Secret or key it needs is absent.
        InvalidEnsemble: its spec breaks a rule.
    """
    obj = get(name)
    if obj is None:
        raise SecretMissing(f"ZooKeeperEnsemble {name!r} not found")
    return connection_options(parse_ensemble(obj.get("spec")), secrets, base, directory)
