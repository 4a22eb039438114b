"""The service bridge's ``zkop run`` flags.

The lead's ``zkop run`` parser calls :func:`add_flags`; after parsing,
:func:`options_from_args` returns the :class:`~zkop.services.bridge.options.BridgeOptions`, or ``None``
when ``--service-bridge`` is off. ``--dry-run`` is a ``zkop run`` flag (:mod:`zkop.cmd.main`) that
covers every controller; the bridge's options carry it too.
"""

from __future__ import annotations

import argparse

from zkop.cmd.flags import duration, format_duration, non_negative_int, positive_int, znode_path
from zkop.services.bridge.annotations import DUBBO_INTERFACES, FORMAT
from zkop.services.bridge.options import (
    DEFAULT_DUBBO_ROOT,
    DEFAULT_DUBBO_SERVICES_ROOT,
    DEFAULT_EXCLUDED_NAMESPACES,
    DEFAULT_ROOT,
    SERVICE_TYPES,
    SYNC_ANNOTATION,
    BridgeOptions,
    Format,
    Layout,
    Policy,
)
from zkop.services.bridge.records import parse_bool
from zkop.services.options import check_counts, root_flag
from zkop.zookeeper.paths import is_within

__all__ = ["add_flags", "options_from_args"]


def _bool(value: str) -> bool:
    parsed = parse_bool(value.strip())
    if parsed is None:
        raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")
    return parsed


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Add the ``--service-bridge*`` flags to ``parser`` (the ``zkop run`` parser)."""
    group = parser.add_argument_group("service bridge (Kubernetes Services → ZooKeeper)")
    group.add_argument("--service-bridge", action="store_true",
                       help="publish Kubernetes Services into ZooKeeper (default off)")
    group.add_argument("--service-bridge-root", default=DEFAULT_ROOT, type=znode_path, metavar="PATH",
                       help=f"znode under which records are written (default {DEFAULT_ROOT})")
    group.add_argument("--service-bridge-default-sync", type=_bool, nargs="?", const=True, default=True,
                       metavar="{true,false}",
                       help=f'publish every Service unless annotated {SYNC_ANNOTATION}: "false" (true, the '
                            f'default), or only those annotated "true" (false)')
    group.add_argument("--service-bridge-namespace", action="append", default=[], metavar="NAMESPACE",
                       help="publish only Services of this namespace (repeatable; default: all)")
    group.add_argument("--service-bridge-exclude-namespace", action="append", default=None, metavar="NAMESPACE",
                       help="never publish Services of this namespace; wins over --service-bridge-namespace "
                            f"(repeatable; default: {', '.join(DEFAULT_EXCLUDED_NAMESPACES)}; giving the flag "
                            "replaces the default, an empty value excludes nothing)")
    group.add_argument("--service-bridge-type", action="append", default=[], choices=SERVICE_TYPES, metavar="TYPE",
                       help=f"publish only Services of this spec.type: {', '.join(SERVICE_TYPES)} "
                            "(repeatable; default: all)")
    group.add_argument("--service-bridge-label", action="append", default=[], metavar="KEY",
                       help="copy this Service label into records (repeatable)")
    group.add_argument("--service-bridge-layout", choices=("flat", "nested"), default="flat",
                       help="flat: <root>/<namespace>-<name> (default, compatible, may collide); "
                            "nested: <root>/<namespace>/<name> (collision-free)")
    group.add_argument("--service-bridge-format", choices=("json", "curator", "dubbo"), default="json",
                       help="json: one JSON record per Service (default); curator: Apache Curator "
                            "service-discovery instances; dubbo: Apache Dubbo provider URLs of the interfaces a "
                            f"Service names ({DUBBO_INTERFACES}); a Service's {FORMAT} annotation chooses its own")
    group.add_argument("--service-bridge-dubbo-root", default=DEFAULT_DUBBO_ROOT, type=znode_path, metavar="PATH",
                       help=f"Dubbo's registry root, where the dubbo format publishes providers (default "
                            f"{DEFAULT_DUBBO_ROOT}, Dubbo's default group)")
    group.add_argument("--service-bridge-dubbo-services-root", default=DEFAULT_DUBBO_SERVICES_ROOT, type=znode_path,
                       metavar="PATH",
                       help="where the dubbo format publishes application-level instances (default "
                            f"{DEFAULT_DUBBO_SERVICES_ROOT}, Dubbo 3's ZookeeperServiceDiscovery root)")
    group.add_argument("--service-bridge-policy", choices=("sync", "upsert-only", "create-only"), default="sync",
                       help="sync: create, update and delete (default); upsert-only: never delete; "
                            "create-only: never update or delete")
    group.add_argument("--service-bridge-max-deletes", type=non_negative_int, default=10, metavar="N",
                       help="delete circuit breaker: a full sync that would remove the records of more than N "
                            "Services removes none (default 10; 0: no limit)")
    group.add_argument("--service-bridge-endpoints", action="store_true",
                       help="include ready EndpointSlice addresses in records (default off)")
    group.add_argument("--service-bridge-endpoints-debounce", type=duration, default=5.0, metavar="DURATION",
                       help="publish an endpoint change once it has been stable this long (default "
                            f"{format_duration(5.0)}; at the latest after 6 times as long)")
    group.add_argument("--service-bridge-workers", type=positive_int, default=2, metavar="N",
                       help="concurrent service-bridge reconciles (default 2)")


def options_from_args(args: argparse.Namespace) -> BridgeOptions | None:
    """The bridge's options from parsed flags, or ``None`` when ``--service-bridge`` is off.

    Raises:
        SystemExit: an invalid root path or a negative number, with the flag named.
    """
    if not args.service_bridge:
        return None
    root = root_flag("--service-bridge-root", args.service_bridge_root)
    dubbo_root = root_flag("--service-bridge-dubbo-root", args.service_bridge_dubbo_root)
    if is_within(dubbo_root, root) or is_within(root, dubbo_root):
        raise SystemExit(f"--service-bridge-dubbo-root {dubbo_root} and --service-bridge-root {root} must not "
                         "contain one another")
    services_root = root_flag("--service-bridge-dubbo-services-root", args.service_bridge_dubbo_services_root)
    for other, flag in ((root, "--service-bridge-root"), (dubbo_root, "--service-bridge-dubbo-root")):
        if is_within(services_root, other) or is_within(other, services_root):
            raise SystemExit(f"--service-bridge-dubbo-services-root {services_root} and {flag} {other} must not "
                             "contain one another")
    check_counts("--service-bridge", max_deletes=args.service_bridge_max_deletes, workers=args.service_bridge_workers)
    if args.service_bridge_endpoints_debounce < 0:
        raise SystemExit("--service-bridge-endpoints-debounce must not be negative")
    excluded = DEFAULT_EXCLUDED_NAMESPACES
    if args.service_bridge_exclude_namespace is not None:
        excluded = tuple(ns for ns in args.service_bridge_exclude_namespace if ns)
    layout: Layout = args.service_bridge_layout
    fmt: Format = args.service_bridge_format
    policy: Policy = args.service_bridge_policy
    debounce = float(args.service_bridge_endpoints_debounce)
    return BridgeOptions(
        root=root,
        default_sync=bool(args.service_bridge_default_sync),
        namespaces=tuple(dict.fromkeys(args.service_bridge_namespace)),
        exclude_namespaces=tuple(dict.fromkeys(excluded)),
        types=tuple(dict.fromkeys(args.service_bridge_type)),
        labels=tuple(dict.fromkeys(args.service_bridge_label)),
        layout=layout,
        format=fmt,
        dubbo_root=dubbo_root,
        dubbo_services_root=services_root,
        policy=policy,
        ensemble=getattr(args, "service_bridge_ensemble", None) or None,
        max_deletes=int(args.service_bridge_max_deletes),
        endpoints=bool(args.service_bridge_endpoints),
        endpoints_debounce=debounce,
        endpoints_max_delay=debounce * 6,
        workers=int(args.service_bridge_workers),
    )
