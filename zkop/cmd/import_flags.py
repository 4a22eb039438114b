"""The service importer's ``zkop run`` flags.

The ``zkop run`` parser calls :func:`add_flags`; after parsing, :func:`options_from_args` returns
the :class:`~zkop.services.importer.options.ImportOptions`, or ``None`` when ``--import-services`` is off.
"""

from __future__ import annotations

import argparse

from zkop.cmd.flags import dns_label, non_negative_int, positive_int, znode_path
from zkop.kube.validation import is_dns1123_label
from zkop.services.importer.guard import parse_cidr
from zkop.services.importer.kind.options import DEFAULT_MAX_SERVICES, KindOptions
from zkop.services.importer.options import DEFAULT_ROOTS, FORMATS, ImportFormat, ImportOptions
from zkop.services.options import check_counts, root_flag

__all__ = ["add_flags", "kind_options_from_args", "options_from_args"]


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Add the ``--import-*`` flags to ``parser`` (the ``zkop run`` parser)."""
    group = parser.add_argument_group("service import (ZooKeeper services → Kubernetes Services)")
    group.add_argument("--import-services", action="store_true",
                       help="create a selector-less Service and EndpointSlices for every service registered in "
                            "ZooKeeper (default off)")
    group.add_argument("--import-format", choices=FORMATS, default="curator",
                       help="curator: <root>/<service>/<instance> Curator ServiceInstance JSON (default; also "
                            "Spring Cloud Zookeeper); json: zkop's service-bridge records <root>/<key>; dubbo: "
                            "<root>/<interface>/providers/<provider URL>")
    group.add_argument("--import-root", default=None, type=znode_path, metavar="PATH",
                       help="znode whose children are the services (default: "
                            + ", ".join(f"{root} for {fmt}" for fmt, root in DEFAULT_ROOTS.items()) + ")")
    group.add_argument("--import-namespace", default="default", type=dns_label, metavar="NAMESPACE",
                       help="namespace the Services and EndpointSlices are created in (default: default)")
    group.add_argument("--import-prefix", default="", metavar="PREFIX",
                       help="prepended to every imported Service name (default: none)")
    group.add_argument("--import-max-deletes", type=non_negative_int, default=10, metavar="N",
                       help="delete circuit breaker: a full sync that would remove more than N imported Services "
                            "removes none (default 10; 0: no limit)")
    group.add_argument("--import-allowed-cidrs", action="append", default=[], metavar="CIDR[,CIDR…]",
                       help="import only IP addresses inside these CIDRs (repeatable or comma-separated; default: "
                            "any address outside the cluster's Service ranges and the API server's own addresses)")
    group.add_argument("--import-workers", type=positive_int, default=2, metavar="N",
                       help="concurrent service-import reconciles (default 2)")
    group.add_argument("--service-imports", action="store_true",
                       help="reconcile ZooKeeperServiceImport objects: a namespace's own import, into its own "
                            "namespace, confined by the tenancy rules (default off; needs the service-imports "
                            "component's RBAC); --import-allowed-cidrs holds for them too")
    group.add_argument("--service-import-max-services", type=non_negative_int, default=DEFAULT_MAX_SERVICES,
                       metavar="N", help="Services one ZooKeeperServiceImport may select; more: LimitExceeded, none "
                                         f"imported; 0: no limit (default {DEFAULT_MAX_SERVICES})")


def options_from_args(args: argparse.Namespace) -> ImportOptions | None:
    """The importer's options from parsed flags, or ``None`` when ``--import-services`` is off.

    Raises:
        SystemExit: an invalid root path, namespace, number or CIDR, with the flag named.
    """
    if not args.import_services:
        return None
    fmt: ImportFormat = args.import_format
    root = root_flag("--import-root", args.import_root if args.import_root is not None else DEFAULT_ROOTS[fmt])
    if not is_dns1123_label(args.import_namespace):
        raise SystemExit(f"--import-namespace: {args.import_namespace!r} is not a valid namespace name")
    check_counts("--import", max_deletes=args.import_max_deletes, workers=args.import_workers)
    allowed = _allowed_cidrs(args)
    return ImportOptions(
        namespace=args.import_namespace, format=fmt, root=root, prefix=str(args.import_prefix),
        max_deletes=int(args.import_max_deletes), workers=int(args.import_workers),
        ensemble=getattr(args, "import_ensemble", None) or None, allowed_cidrs=tuple(allowed),
    )


def _allowed_cidrs(args: argparse.Namespace) -> list[str]:
    allowed: list[str] = []
    for value in getattr(args, "import_allowed_cidrs", None) or []:
        for text in str(value).split(","):
            if not text.strip():
                continue
            try:
                allowed.append(str(parse_cidr(text)))
            except ValueError as err:
                raise SystemExit(f"--import-allowed-cidrs: {text.strip()!r} is not a CIDR ({err})") from None
    return allowed


def kind_options_from_args(args: argparse.Namespace) -> KindOptions | None:
    """The ZooKeeperServiceImport feature's options, or ``None`` when ``--service-imports`` is off.

    Raises:
        SystemExit: an invalid CIDR in ``--import-allowed-cidrs``, with the flag named.
    """
    if not getattr(args, "service_imports", False):
        return None
    return KindOptions(max_services=int(args.service_import_max_services), allowed_cidrs=tuple(_allowed_cidrs(args)),
                       workers=int(args.import_workers))
