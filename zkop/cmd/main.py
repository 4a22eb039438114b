"""Command line: ``zkop run`` (the operator) and its flags.

Flag names follow controller-runtime (``--leader-elect``, ``--metrics-bind-address``,
``--health-probe-bind-address``); where an environment variable is named in
the help, it is the fallback when the flag is absent.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from kubernetes.config.config_exception import ConfigException

from zkop import __version__
from zkop.cmd.logging_setup import configure_logging
from zkop.zkconfig.spec import DEFAULT_MAX_DATA_BYTES
from zkop.zookeeper.actions import OPEN_ACL, AclEntry
from zkop.zookeeper.adapter import ConnectionOptions

__all__ = ["build_parser", "main"]

log = logging.getLogger("zkop")


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(name) or default


def _read_auth_file(path: str | None) -> tuple[tuple[str, str], ...]:
    """Read ``user:password`` (digest) from a file, as mounted from a Secret.

    A missing file means no authentication: the Deployment mounts the Secret as an
    optional volume, so an install without credentials has an empty directory.

    Raises:
        SystemExit: the file exists but does not hold ``user:password``.
    """
    if not path:
        return ()
    try:
        with open(path, encoding="utf-8") as f:
            credential = f.read().strip()
    except FileNotFoundError:
        log.info("--zk-auth-file %s does not exist; connecting without authentication", path)
        return ()
    if ":" not in credential:
        raise SystemExit(f"--zk-auth-file {path}: expected 'user:password'")
    return (("digest", credential),)


def add_zookeeper_flags(parser: argparse.ArgumentParser) -> None:
    """Flags shared by every command that talks to ZooKeeper."""
    group = parser.add_argument_group("ZooKeeper")
    group.add_argument("--zk-hosts", default=_env("ZOOKEEPER_HOSTS", "127.0.0.1:2181"),
                       help="connect string host:port[,host:port...][/chroot] [ZOOKEEPER_HOSTS] "
                            "(default 127.0.0.1:2181)")
    group.add_argument("--zk-session-timeout", type=float, default=10.0, help="session timeout, seconds (default 10)")
    group.add_argument("--zk-auth-file", default=_env("ZOOKEEPER_AUTH_FILE"),
                       help="file holding digest credentials user:password [ZOOKEEPER_AUTH_FILE]")
    group.add_argument("--zk-tls-ca-file", default=None, help="CA bundle for TLS to ZooKeeper")
    group.add_argument("--zk-tls-cert-file", default=None, help="client certificate for TLS")
    group.add_argument("--zk-tls-key-file", default=None, help="client key for TLS")
    group.add_argument("--zk-parent-acl", action="append", default=[], metavar="SCHEME:ID:PERMS",
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


def connection_options(args: argparse.Namespace) -> ConnectionOptions:
    """Build :class:`ConnectionOptions` from parsed ZooKeeper flags.

    Raises:
        SystemExit: an unreadable auth file or a malformed ``--zk-parent-acl``.
    """
    use_tls = bool(args.zk_tls_ca_file or args.zk_tls_cert_file)
    try:
        parent_acl = tuple(sorted(parse_acl_entry(e) for e in args.zk_parent_acl)) or OPEN_ACL
    except ValueError as err:
        raise SystemExit(f"--zk-parent-acl: {err}") from None
    return ConnectionOptions(
        hosts=args.zk_hosts, session_timeout=args.zk_session_timeout, auth=_read_auth_file(args.zk_auth_file),
        use_tls=use_tls, tls_ca_file=args.zk_tls_ca_file, tls_cert_file=args.zk_tls_cert_file,
        tls_key_file=args.zk_tls_key_file, parent_acl=parent_acl,
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``zkop`` argument parser with its subcommands."""
    parser = argparse.ArgumentParser(prog="zkop", description="Kubernetes operator that puts ZooKeeper under GitOps.")
    parser.add_argument("--version", action="version", version=f"zkop {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the operator")
    run.add_argument("--kubeconfig", default=None,
                     help="kubeconfig path [KUBECONFIG]; else in-cluster config, else ~/.kube/config")
    add_zookeeper_flags(run)
    run.add_argument("--namespace", action="append", default=[], dest="namespaces",
                     help="watch only this namespace (repeatable; default: all namespaces)")
    run.add_argument("--workers", type=int, default=4, help="concurrent reconciles (default 4)")
    run.add_argument("--cluster-id", default=_env("ZKOP_CLUSTER_ID", "default"),
                     help="names this installation in ZooKeeper ownership records; give every cluster sharing "
                          "an ensemble its own [ZKOP_CLUSTER_ID]")
    run.add_argument("--registry-root", default="/zkop/owners",
                     help="znode under which ownership records are kept (default /zkop/owners)")
    run.add_argument("--sync-period", type=float, default=600.0,
                     help="seconds between full resyncs from the cache (default 600, jittered)")
    run.add_argument("--max-data-bytes", type=int, default=DEFAULT_MAX_DATA_BYTES,
                     help=f"largest znode value accepted, bytes (default {DEFAULT_MAX_DATA_BYTES})")
    run.add_argument("--metrics-bind-address", default=":8080",
                     help="Prometheus /metrics address; 0 disables (default :8080)")
    run.add_argument("--health-probe-bind-address", default=":8081",
                     help="/healthz and /readyz address; 0 disables (default :8081)")
    run.add_argument("--leader-elect", action="store_true", help="elect a leader through a Lease (for replicas > 1)")
    run.add_argument("--leader-election-id", default="zkop-leader", help="name of the Lease (default zkop-leader)")
    run.add_argument("--leader-election-namespace", default=None,
                     help="namespace of the Lease (default: the pod's namespace)")
    run.add_argument("--leader-election-lease-duration", type=float, default=15.0, help="seconds (default 15)")
    run.add_argument("--leader-election-renew-deadline", type=float, default=10.0, help="seconds (default 10)")
    run.add_argument("--leader-election-retry-period", type=float, default=2.0, help="seconds (default 2)")
    run.add_argument("--graceful-shutdown-timeout", type=float, default=30.0,
                     help="seconds to drain in-flight reconciles on SIGTERM (default 30)")
    run.add_argument("--log-level", default=_env("ZKOP_LOG_LEVEL", "info"),
                     help="debug|info|warning|error [ZKOP_LOG_LEVEL] (default info)")
    run.add_argument("--log-format", default=_env("ZKOP_LOG_FORMAT", "text"), choices=["text", "json"],
                     help="text for people, json for log pipelines [ZKOP_LOG_FORMAT] (default text)")
    run.set_defaults(func=_run)
    from zkop.cmd.bridge_flags import add_flags as add_bridge_flags

    add_bridge_flags(run)
    from zkop.cmd.import_flags import add_flags as add_import_flags

    add_import_flags(run)

    from zkop.cmd.gitops import add_commands

    add_commands(sub)
    return parser


def _run(args: argparse.Namespace) -> int:
    from zkop.cmd.bridge_flags import options_from_args as bridge_options_from_args
    from zkop.cmd.import_flags import options_from_args as import_options_from_args
    from zkop.cmd.operator import Operator, OperatorOptions

    if args.workers < 1:
        raise SystemExit("--workers must be at least 1")
    options = OperatorOptions(
        kubeconfig=args.kubeconfig, zookeeper=connection_options(args), namespaces=args.namespaces,
        workers=args.workers, metrics_bind_address=args.metrics_bind_address,
        health_probe_bind_address=args.health_probe_bind_address, leader_elect=args.leader_elect,
        leader_election_id=args.leader_election_id, leader_election_namespace=args.leader_election_namespace,
        lease_duration=args.leader_election_lease_duration, renew_deadline=args.leader_election_renew_deadline,
        retry_period=args.leader_election_retry_period, sync_period=args.sync_period,
        graceful_shutdown_timeout=args.graceful_shutdown_timeout, max_data_bytes=args.max_data_bytes,
        cluster_id=args.cluster_id, registry_root=args.registry_root, bridge=bridge_options_from_args(args),
        importer=import_options_from_args(args),
    )
    try:
        operator = Operator(options)
    except ConfigException as err:
        raise SystemExit(
            f"zkop run: no usable Kubernetes configuration ({err}); pass --kubeconfig, set KUBECONFIG, "
            "or run in a cluster"
        ) from None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s; shutting down", signal.Signals(signum).name)
        operator.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("zkop %s starting (identity %s)", __version__, operator.identity)
    code = operator.run()
    log.info("zkop stopped (exit code %d)", code)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``zkop`` console script; returns the process exit code."""
    args = build_parser().parse_args(argv)
    configure_logging(getattr(args, "log_level", "info"), getattr(args, "log_format", "text"))
    code: int = args.func(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
