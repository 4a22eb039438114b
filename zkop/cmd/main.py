"""Command line: ``zkop run`` (the operator) and its flags.

Flag names follow controller-runtime (``--leader-elect``, ``--metrics-bind-address``,
``--health-probe-bind-address``), and so do their values: durations are Go durations
(``15s``, ``10m``; a bare number is seconds), bind addresses ``[host]:port`` or ``0``. Where an
environment variable is named in the help, it is the fallback when the flag is absent. A usage
error is one line on stderr and exit status 2 (:mod:`zkop.cmd.flags`, which lists every exit code).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence

from kubernetes.config.config_exception import ConfigException

from zkop import __version__
from zkop.cmd.flags import (
    EXIT_ERROR,
    GRACEFUL_SHUTDOWN_TIMEOUT,
    LOG_LEVELS,
    ArgumentParser,
    UsageError,
    bind_address,
    dns_label,
    duration,
    exit_usage,
    format_duration,
    log_level,
    non_negative_int,
    positive_duration,
    positive_int,
)
from zkop.cmd.logging_setup import configure_logging
from zkop.configtree.options import DEFAULT_MAX_ZNODES as DEFAULT_TREE_MAX_ZNODES
from zkop.feature.tenancy import TenancyPolicy
from zkop.mirror.options import DEFAULT_MAX_BYTES, DEFAULT_MAX_ZNODES
from zkop.runtime.leaderelection import JITTER_FACTOR
from zkop.zkconfig.spec import DEFAULT_MAX_DATA_BYTES
from zkop.zookeeper.acls import identities, lockout
from zkop.zookeeper.actions import OPEN_ACL, AclEntry
from zkop.zookeeper.adapter import PARENT_NEEDS, ConnectionOptions
from zkop.zookeeper.security import (
    SASL_MECHANISMS,
    CredentialsError,
    read_sasl_credentials,
    sasl_principals,
    x509_subject,
)
from zkop.zookeeper.watches import WATCH_MODES

__all__ = ["build_parser", "main"]

log = logging.getLogger("zkop")


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(name) or default


def _read_auth_file(path: str | None, *, optional: bool = True) -> tuple[tuple[str, str], ...]:
    """Read ``user:password`` (digest) from a file, as mounted from a Secret.

    A missing file means no authentication: the Deployment mounts the Secret as an
    optional volume, so an install without credentials has an empty directory. That is
    logged at INFO for ``zkop run`` (``optional``); for the commands a person types
    (``export``, ``diff``, ``sync``) a missing file is more likely a typo, so it is a
    WARNING that names the file.

    Raises:
        UsageError: the file exists but cannot be read (a directory, no permission, not UTF-8)
            or does not hold ``user:password``.
    """
    if not path:
        return ()
    try:
        with open(path, encoding="utf-8") as f:
            credential = f.read().strip()
    except FileNotFoundError:
        log.log(logging.INFO if optional else logging.WARNING,
                "--zk-auth-file %s does not exist; connecting without authentication", path)
        return ()
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise UsageError(f"--zk-auth-file {path}: cannot read it: {reason}") from None
    if ":" not in credential:
        raise UsageError(f"--zk-auth-file {path}: expected 'user:password'")
    return (("digest", credential),)


def add_zookeeper_flags(parser: argparse.ArgumentParser, *, writes: bool = True) -> None:
    """Flags shared by every command that talks to ZooKeeper.

    Args:
        parser: the subcommand's parser.
        writes: the command creates znodes, so ``--zk-parent-acl`` applies (``run``, ``sync``);
            read-only commands (``export``, ``diff``) do not show it.
    """
    group = parser.add_argument_group("ZooKeeper")
    group.add_argument("--zk-hosts", default=_env("ZOOKEEPER_HOSTS", "127.0.0.1:2181"),
                       metavar="HOST:PORT[,...][/CHROOT]",
                       help="ZooKeeper connect string [ZOOKEEPER_HOSTS] (default 127.0.0.1:2181)")
    group.add_argument("--zk-session-timeout", type=positive_duration, default=10.0, metavar="DURATION",
                       help=f"session timeout (default {format_duration(10.0)})")
    group.add_argument("--zk-auth-file", default=_env("ZOOKEEPER_AUTH_FILE"), metavar="FILE",
                       help="file holding digest credentials user:password; a missing file means no "
                            "authentication [ZOOKEEPER_AUTH_FILE]")
    group.add_argument("--zk-tls", action="store_true",
                       help="TLS to ZooKeeper's secureClientPort (implied by any TLS file); the server "
                            "certificate is verified against --zk-tls-ca-file and the system trust store")
    group.add_argument("--zk-tls-ca-file", default=None, metavar="FILE",
                       help="PEM CA bundle that signs the ZooKeeper servers' certificates (added to the system "
                            "trust store)")
    group.add_argument("--zk-tls-cert-file", default=None, metavar="FILE",
                       help="PEM client certificate for mutual TLS (its subject is zkop's x509 ACL id)")
    group.add_argument("--zk-tls-key-file", default=None, metavar="FILE", help="PEM private key of --zk-tls-cert-file")
    group.add_argument("--zk-tls-insecure-skip-hostname-verify", action="store_true",
                       help="do not check that the server certificate names the host connected to (insecure; "
                            "logged as a warning)")
    group.add_argument("--zk-sasl-mechanism", choices=SASL_MECHANISMS, default=_env("ZOOKEEPER_SASL_MECHANISM"),
                       help="SASL authentication: DIGEST-MD5 (with --zk-sasl-credentials-file) or GSSAPI "
                            "(Kerberos: KRB5_CONFIG, KRB5_CLIENT_KTNAME or KRB5CCNAME) [ZOOKEEPER_SASL_MECHANISM]")
    group.add_argument("--zk-sasl-credentials-file", default=_env("ZOOKEEPER_SASL_CREDENTIALS_FILE"), metavar="FILE",
                       help="file holding user:password for DIGEST-MD5 [ZOOKEEPER_SASL_CREDENTIALS_FILE]")
    group.add_argument("--zk-sasl-principal", default=None, metavar="PRINCIPAL",
                       help="GSSAPI client principal (default: the one in the keytab or ticket cache)")
    group.add_argument("--zk-sasl-service", default="zookeeper", metavar="NAME",
                       help="SASL service name of the servers (ZooKeeper's zookeeper.sasl.client.username; "
                            "default zookeeper)")
    if writes:
        group.add_argument("--zk-parent-acl", action="append", default=[], type=_acl_entry, metavar="SCHEME:ID:PERMS",
                           help="ACL entry for parent znodes zkop creates, zkCli style, e.g. world:anyone:cdrwa or "
                                "digest:ops:HASH:cdrwa (repeatable; default: the open ACL)")


def parse_acl_entry(text: str) -> AclEntry:
    """Parse ``scheme:id:perms`` (zkCli's ``setAcl`` notation; perms from ``crwda``).

    The id may itself contain ``:`` (``digest:user:hash``), so the scheme is the first
    field and the permissions the last.

    Raises:
        ValueError: fewer than three fields or an unknown permission letter.
    """
    scheme, _, rest = text.partition(":")
    ident, _, perms = rest.rpartition(":")
    if not scheme or not ident or not perms:
        raise ValueError(f"ACL entry {text!r}: want scheme:id:perms")
    letters = {"r": 1, "w": 2, "c": 4, "d": 8, "a": 16}
    if any(ch not in letters for ch in perms):
        raise ValueError(f"ACL entry {text!r}: permissions are letters from 'crwda'")
    return AclEntry(scheme, ident, sum(letters[ch] for ch in set(perms)))


def _acl_entry(text: str) -> AclEntry:
    """argparse type for ``--zk-parent-acl``: :func:`parse_acl_entry`, errors as usage errors."""
    try:
        return parse_acl_entry(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def connection_options(args: argparse.Namespace) -> ConnectionOptions:
    """Build :class:`ConnectionOptions` from parsed ZooKeeper flags.

    ``--zk-parent-acl`` entries were parsed by argparse; a command without that flag gets the open ACL.

    Raises:
        UsageError: an unreadable or malformed auth file; a ``--zk-parent-acl`` that denies zkop's
            own identities read, create or delete on the parents it creates
            (:func:`zkop.zookeeper.acls.lockout`; ``ip`` entries get the benefit of the doubt until
            the start-up probe knows zkop's address);
            a certificate without its key (or the reverse); DIGEST-MD5 without a readable credentials file.
    """
    use_tls = bool(args.zk_tls or args.zk_tls_ca_file or args.zk_tls_cert_file or args.zk_tls_key_file)
    if bool(args.zk_tls_cert_file) != bool(args.zk_tls_key_file):
        raise UsageError("--zk-tls-cert-file and --zk-tls-key-file go together")
    if args.zk_sasl_mechanism == "DIGEST-MD5":
        if not args.zk_sasl_credentials_file:
            raise UsageError("--zk-sasl-mechanism DIGEST-MD5 needs --zk-sasl-credentials-file (user:password)")
        try:
            read_sasl_credentials(args.zk_sasl_credentials_file)
        except CredentialsError as err:
            raise UsageError(f"--zk-sasl-credentials-file: {err}") from None
    parent_acl = tuple(sorted(getattr(args, "zk_parent_acl", []))) or OPEN_ACL
    watch_mode = getattr(args, "zk_watch_mode", "auto")
    if watch_mode not in WATCH_MODES:  # argparse does not check a default taken from the environment
        raise UsageError(f"--zk-watch-mode {watch_mode!r}: choose from {', '.join(WATCH_MODES)}")
    auth = _read_auth_file(args.zk_auth_file, optional=getattr(args, "command", "run") == "run")
    options = ConnectionOptions(
        hosts=args.zk_hosts, session_timeout=args.zk_session_timeout, auth=auth,
        auth_file=args.zk_auth_file,
        use_tls=use_tls, tls_ca_file=args.zk_tls_ca_file, tls_cert_file=args.zk_tls_cert_file,
        tls_key_file=args.zk_tls_key_file, tls_check_hostname=not args.zk_tls_insecure_skip_hostname_verify,
        sasl_mechanism=args.zk_sasl_mechanism, sasl_credentials_file=args.zk_sasl_credentials_file,
        sasl_principal=args.zk_sasl_principal, sasl_service=args.zk_sasl_service, parent_acl=parent_acl,
        watch_mode=watch_mode,
    )
    ids = identities(options.auth, x509_subject=x509_subject(options.tls_cert_file))
    for principal in sasl_principals(options.sasl_mechanism, options.sasl_credentials_file, options.sasl_principal):
        ids |= identities(sasl_principal=principal)
    problem = lockout(parent_acl, ids, PARENT_NEEDS, address_known=False)
    if problem is not None:
        raise UsageError(f"--zk-parent-acl {problem}")
    return options


def build_parser(*, commands: bool = True) -> argparse.ArgumentParser:
    """The ``zkop`` argument parser with its subcommands (usage errors: one line, exit 2).

    With ``commands=False`` only ``run`` is there: :func:`main` builds that parser for ``zkop run``, so the
    operator's start does not import the GitOps and ``fetch`` commands' modules (about 60 ms of CPU: their
    diff, sync, validate and template code, Jinja2), none of which ``run`` uses.
    """
    parser = ArgumentParser(prog="zkop", description="Kubernetes operator that puts ZooKeeper under GitOps.",
                            epilog="Exit status: 0 ok, 1 problems found or the run failed, 2 usage or "
                                   "configuration error (docs/operations.md, 'Exit codes').")
    parser.add_argument("--version", action="version", version=f"zkop {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run", help="run the operator",
        description="Run the operator. Durations are Go durations (15s, 10m, 1h30m; a bare number is seconds). "
                    "Exit 0 after SIGTERM/SIGINT, 1 when the Lease is lost, 2 usage or configuration error "
                    "(including a start-up probe ZooKeeper refuses).")
    run.add_argument("--kubeconfig", default=None, metavar="FILE",
                     help="kubeconfig path [KUBECONFIG]; else in-cluster config, else ~/.kube/config")
    from zkop.cmd.kube_flags import add_flags as add_kube_flags

    add_kube_flags(run)
    add_zookeeper_flags(run)
    run.add_argument("--namespace", action="append", default=[], dest="namespaces", type=dns_label,
                     metavar="NAMESPACE", help="watch only this namespace (repeatable; default: all namespaces)")
    run.add_argument("--workers", type=positive_int, default=4, metavar="N",
                     help="concurrent reconciles (default 4)")
    run.add_argument("--cluster-id", default=_env("ZKOP_CLUSTER_ID", "default"), metavar="ID",
                     help="names this installation in ZooKeeper ownership records; give every cluster sharing "
                          "an ensemble its own [ZKOP_CLUSTER_ID] (default default)")
    run.add_argument("--registry-root", default="/zkop/owners", metavar="PATH",
                     help="znode under which ownership records are kept (default /zkop/owners)")
    run.add_argument("--sync-period", type=positive_duration, default=600.0, metavar="DURATION",
                     help=f"full resync from the cache, jittered (default {format_duration(600.0)})")
    run.add_argument("--acl-check-period", type=duration, default=60.0, metavar="DURATION",
                     help="how often the ACLs of managed znodes that declare spec.acl are compared with it; "
                          "ZooKeeper fires no watch on setAcl, so this bounds how long ACL drift lasts; "
                          f"0 disables (default {format_duration(60.0)})")
    run.add_argument("--zk-watch-mode", "--zookeeper-watch-mode", dest="zk_watch_mode", choices=WATCH_MODES,
                     default=_env("ZOOKEEPER_WATCH_MODE", "auto"),
                     help="how hand edits are noticed: auto = persistent recursive watches on the roots of the "
                          "managed paths if ZooKeeper supports them (3.6+), else one watch per znode; persistent = "
                          "the same, the fallback logged as an error; per-node = one watch per znode "
                          "[ZOOKEEPER_WATCH_MODE] (default auto)")
    run.add_argument("--max-data-bytes", type=positive_int, default=DEFAULT_MAX_DATA_BYTES, metavar="BYTES",
                     help=f"largest znode value accepted (default {DEFAULT_MAX_DATA_BYTES})")
    run.add_argument("--metrics-bind-address", type=bind_address, default=":8080", metavar="[HOST]:PORT",
                     help="Prometheus /metrics address; 0 disables (default :8080)")
    run.add_argument("--health-probe-bind-address", type=bind_address, default=":8081", metavar="[HOST]:PORT",
                     help="/healthz and /readyz address; 0 disables (default :8081)")
    run.add_argument("--leader-elect", action="store_true", help="elect a leader through a Lease (for replicas > 1)")
    run.add_argument("--leader-election-id", default="zkop-leader", metavar="NAME",
                     help="name of the Lease (default zkop-leader)")
    run.add_argument("--leader-election-namespace", default=None, type=dns_label, metavar="NAMESPACE",
                     help="namespace of the Lease (default: the pod's namespace: $POD_NAMESPACE, else the "
                          "service account's namespace file; outside a pod 'default')")
    run.add_argument("--leader-election-lease-duration", type=positive_duration, default=15.0, metavar="DURATION",
                     help=f"how long a Lease is valid without renewal (default {format_duration(15.0)})")
    run.add_argument("--leader-election-renew-deadline", type=positive_duration, default=10.0, metavar="DURATION",
                     help=f"a leader that cannot renew for this long exits (default {format_duration(10.0)})")
    run.add_argument("--leader-election-retry-period", type=positive_duration, default=2.0, metavar="DURATION",
                     help=f"how often candidates try and leaders renew (default {format_duration(2.0)})")
    run.add_argument("--graceful-shutdown-timeout", type=duration, default=GRACEFUL_SHUTDOWN_TIMEOUT,
                     metavar="DURATION",
                     help="time to drain in-flight reconciles on SIGTERM; then their API requests are cancelled "
                          f"(default {format_duration(GRACEFUL_SHUTDOWN_TIMEOUT)})")
    run.add_argument("--log-level", type=log_level, default=_env("ZKOP_LOG_LEVEL", "info"),
                     metavar="{" + ",".join(LOG_LEVELS) + "}", help="[ZKOP_LOG_LEVEL] (default info)")
    run.add_argument("--log-format", default=_env("ZKOP_LOG_FORMAT", "text"), choices=["text", "json"],
                     help="text for people, json for log pipelines [ZKOP_LOG_FORMAT] (default text)")
    run.add_argument("--dry-run", action="store_true",
                     help="plan and log every change (ZooKeeperConfigs, service bridge, service import) and make "
                          "none: nothing is written to ZooKeeper, Services or EndpointSlices; ZooKeeperConfig "
                          "status shows Ready=False, reason DryRun, with the planned changes, and no finalizer "
                          "is added")
    run.add_argument("--zookeeper-ensembles", action="store_true",
                     help="manage ZooKeeperConfigs on the ZooKeeperEnsembles they name in spec.ensembleRef too "
                          "(docs/operations.md, \"Several ensembles\")")
    run.add_argument("--ensemble-secret-namespace", default=None, type=dns_label, metavar="NAMESPACE",
                     help="the one namespace ZooKeeperEnsembles' Secrets are read from (default: zkop's own)")
    run.add_argument("--service-bridge-ensemble", default=None, metavar="NAME",
                     help="publish Services into the ZooKeeperEnsemble NAME instead of the --zk-* ensemble (its "
                          "spec and Secrets are read at start-up)")
    run.add_argument("--import-ensemble", default=None, metavar="NAME",
                     help="import services from the ZooKeeperEnsemble NAME instead of the --zk-* ensemble (read at "
                          "start-up)")
    run.add_argument("--tenancy-policy-file", default=None, metavar="FILE",
                     help="YAML with the default ensemble's tenancy rules and adoption mode (tenancy.rules: "
                          "namespaces or namespaceSelector, pathPrefixes; adoption: Always, IfRequested or Never); "
                          "default: every namespace may manage every path, and existing znodes are adopted "
                          "(docs/operations.md, 'Tenancy and adoption')")
    run.add_argument("--zookeeper-mirrors", action="store_true",
                     help="reconcile ZooKeeperMirror objects: a znode or subtree mirrored read-only into a ConfigMap "
                          "(default off; needs the zookeeper-mirror component's RBAC)")
    run.add_argument("--mirror-max-znodes", type=non_negative_int, default=DEFAULT_MAX_ZNODES, metavar="N",
                     help="znodes one ZooKeeperMirror may have zkop read; a larger subtree is not mirrored "
                          f"(LimitExceeded); 0: no limit (default {DEFAULT_MAX_ZNODES})")
    run.add_argument("--mirror-max-bytes", type=non_negative_int, default=DEFAULT_MAX_BYTES, metavar="BYTES",
                     help="bytes of znode data one ZooKeeperMirror may have zkop read; more is not mirrored "
                          f"(LimitExceeded); 0: no limit (default {DEFAULT_MAX_BYTES})")
    run.add_argument("--config-trees", action="store_true",
                     help="reconcile ZooKeeperConfigTree objects: a subtree of znodes from one object (default off; "
                          "on in the shipped manifests and chart)")
    run.add_argument("--config-tree-max-znodes", type=non_negative_int, default=DEFAULT_TREE_MAX_ZNODES,
                     metavar="N", help="znodes below one ZooKeeperConfigTree's root zkop lists at most; a tree over "
                                   f"more is refused (LimitExceeded); 0: no limit (default {DEFAULT_TREE_MAX_ZNODES})")
    run.set_defaults(func=_run)
    from zkop.cmd.bridge_flags import add_flags as add_bridge_flags

    add_bridge_flags(run)
    from zkop.cmd.import_flags import add_flags as add_import_flags

    add_import_flags(run)
    from zkop.cmd.metrics_flags import add_flags as add_metrics_flags

    add_metrics_flags(run)
    if not commands:
        return parser

    from zkop.cmd.gitops import add_commands

    add_commands(sub)
    from zkop.cmd.fetch import add_command as add_fetch

    add_fetch(sub)
    return parser


def _check_leader_election(args: argparse.Namespace) -> None:
    """client-go's ``NewLeaderElector`` rule: lease duration > renew deadline > 1.2 × retry period.

    Raises:
        UsageError: the three ``--leader-election-*`` durations break it (only with ``--leader-elect``).
    """
    if not args.leader_elect:
        return
    lease, renew, retry = (args.leader_election_lease_duration, args.leader_election_renew_deadline,
                           args.leader_election_retry_period)
    if lease <= renew:
        raise UsageError(f"--leader-election-lease-duration ({format_duration(lease)}) must be longer than "
                         f"--leader-election-renew-deadline ({format_duration(renew)})")
    if renew <= JITTER_FACTOR * retry:
        raise UsageError(f"--leader-election-renew-deadline ({format_duration(renew)}) must be longer than "
                         f"{JITTER_FACTOR} × --leader-election-retry-period ({format_duration(retry)})")


def read_tenancy_policy(path: str | None) -> TenancyPolicy | None:
    """The default ensemble's policy from ``--tenancy-policy-file`` (``None`` without the flag).

    The file holds the ``tenancy`` and ``adoption`` fields of a ZooKeeperEnsemble's spec, read by the
    same :meth:`~zkop.feature.tenancy.TenancyPolicy.from_spec`.

    Raises:
        UsageError: the file cannot be read, is not YAML, or breaks a rule (naming the field).
    """
    if path is None:
        return None
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            spec = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise UsageError(f"--tenancy-policy-file {path}: cannot read it: {reason}") from None
    except yaml.YAMLError as err:
        raise UsageError(f"--tenancy-policy-file {path}: not YAML: {' '.join(str(err).split())}") from None
    try:
        return TenancyPolicy.from_spec(spec)
    except ValueError as err:
        raise UsageError(f"--tenancy-policy-file {path}: {err}") from None


def _check_dubbo_root(dubbo_root: str, registry_root: str, flag: str = "--service-bridge-dubbo-root") -> None:
    """Refuse a ``--service-bridge-dubbo-root`` (or ``flag``) that holds or lies in one of zkop's reserved roots.

    Raises:
        UsageError: naming both flags.
    """
    from zkop.feature.gate import probe_root
    from zkop.zookeeper.paths import RESERVED_ROOT, is_within

    for root, what in ((registry_root, "--registry-root"), (probe_root(registry_root), "the start-up probe's root"),
                       (RESERVED_ROOT, "ZooKeeper's own root")):
        if is_within(dubbo_root, root) or is_within(root, dubbo_root):
            raise UsageError(f"{flag} {dubbo_root} must neither hold nor lie in {what} {root}")


def _run(args: argparse.Namespace) -> int:
    from zkop.cmd.bridge_flags import options_from_args as bridge_options_from_args
    from zkop.cmd.import_flags import kind_options_from_args
    from zkop.cmd.import_flags import options_from_args as import_options_from_args
    from zkop.operator.options import OperatorOptions
    from zkop.operator.run import ConfigurationError, Operator
    from zkop.runtime.certs import CertificateError
    from zkop.runtime.manager import ManagerOptions
    from zkop.runtime.signals import SignalRelay

    _check_leader_election(args)
    tenancy = read_tenancy_policy(args.tenancy_policy_file)
    try:
        bridge = bridge_options_from_args(args)
        importer = import_options_from_args(args)
        service_imports = kind_options_from_args(args)
    except SystemExit as err:  # the services' flag checks end this way; argparse types catch them first
        if isinstance(err.code, str):
            raise UsageError(err.code) from None
        raise
    if bridge is not None:
        _check_dubbo_root(bridge.dubbo_root, args.registry_root)
        _check_dubbo_root(bridge.dubbo_services_root, args.registry_root, "--service-bridge-dubbo-services-root")
    options = OperatorOptions(
        kubeconfig=args.kubeconfig, zookeeper=connection_options(args), namespaces=args.namespaces,
        workers=args.workers, leader_elect=args.leader_elect,
        leader_election_id=args.leader_election_id, leader_election_namespace=args.leader_election_namespace,
        lease_duration=args.leader_election_lease_duration, renew_deadline=args.leader_election_renew_deadline,
        retry_period=args.leader_election_retry_period, sync_period=args.sync_period,
        max_data_bytes=args.max_data_bytes,
        cluster_id=args.cluster_id, registry_root=args.registry_root, acl_check_period=args.acl_check_period,
        bridge=bridge, importer=importer, service_imports=service_imports, mirrors=args.zookeeper_mirrors,
        dry_run=args.dry_run,
        mirror_max_znodes=args.mirror_max_znodes, mirror_max_bytes=args.mirror_max_bytes,
        config_trees=args.config_trees, config_tree_max_znodes=args.config_tree_max_znodes,
        ensembles=args.zookeeper_ensembles, ensemble_secret_namespace=args.ensemble_secret_namespace,
        manager=ManagerOptions(
            metrics_bind_address=args.metrics_bind_address, metrics_secure=args.metrics_secure,
            metrics_cert_dir=args.metrics_cert_dir, metrics_cert_name=args.metrics_cert_name,
            metrics_key_name=args.metrics_cert_key, health_probe_bind_address=args.health_probe_bind_address,
            graceful_shutdown_timeout=args.graceful_shutdown_timeout),
        kube_api_qps=args.kube_api_qps, kube_api_burst=args.kube_api_burst,
        tenancy=tenancy,
    )
    try:
        operator = Operator(options)
    except ConfigException as err:
        raise UsageError(f"no usable Kubernetes configuration ({err}); pass --kubeconfig, set KUBECONFIG, "
                         "or run in a cluster") from None
    except ConfigurationError as err:
        raise UsageError(str(err)) from None

    def on_signal(signum: int) -> None:  # on SignalRelay's thread, never inside the handler itself
        log.info("received %s; shutting down", signal.Signals(signum).name)
        operator.stop()

    try:
        operator.bind()  # before anything starts: an address in use is a usage error, no server listening
    except OSError as err:  # the message names the server and the address
        raise UsageError(err.strerror or str(err)) from None
    except CertificateError as err:
        log.error("cannot serve metrics securely: %s", err)
        return EXIT_ERROR
    log.info("zkop %s starting (identity %s)", __version__, operator.identity)
    with SignalRelay(on_signal):
        try:
            code = operator.run()
        except CertificateError as err:
            log.error("cannot serve metrics securely: %s", err)
            code = EXIT_ERROR
    log.info("zkop stopped (exit code %d)", code)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``zkop`` console script; returns the process exit code.

    Usage errors (argparse's and :class:`~zkop.cmd.flags.UsageError`) print one line on stderr and
    raise ``SystemExit(2)``; codes are listed in :mod:`zkop.cmd.flags`.  Logging is zkop's
    (:func:`~zkop.cmd.logging_setup.configure_logging`) while the command runs and as it was
    when it returns or raises.
    """
    arguments = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(commands=arguments[:1] != ["run"]).parse_args(arguments)
    restore_logging = configure_logging(getattr(args, "log_level", "info"), getattr(args, "log_format", "text"))
    try:
        code: int = args.func(args)
    except UsageError as err:
        exit_usage(f"zkop {args.command}", str(err))
    finally:
        restore_logging()  # called in-process (tests): the caller's logging as it was
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
