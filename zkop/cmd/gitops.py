"""The GitOps adoption subcommands: ``zkop export``, ``diff``, ``validate`` and ``sync``.

Exit status of every command (the table for all of zkop is in :mod:`zkop.cmd.flags`): 0 success /
no differences, 1 problems found (``validate``: invalid manifests; ``diff``: differences, as
``diff`` and ``kubectl diff``; ``export``: some znodes could not be exported; ``sync``: some
znodes could not be converged), 2 error (bad flags, unreadable or invalid input for
``diff``/``sync``, ZooKeeper unreachable, files in the way of ``export``).

``-o/--output`` is the output format, as in kubectl: ``json`` (or ``yaml``) prints one document
on stdout (shapes in each ``_run_*`` docstring); ``text`` prints results on stdout and notes,
warnings and summaries on stderr. ``export`` writes into ``-d/--dir``. A progress bar is drawn on
stderr when stdout is a terminal.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from zkop.cmd.flags import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_PROBLEMS,
    LOG_LEVELS,
    UsageError,
    log_level,
    output_format,
    positive_int,
)
from zkop.cmd.main import add_zookeeper_flags, connection_options
from zkop.gitops.diff import ZnodeDiff, diff_object, diff_prune, skipped
from zkop.gitops.export import SECRET_KEY, Export, ExportConflict, plan_export, write_export
from zkop.gitops.manifests import ManifestSourceError, load_manifests
from zkop.gitops.names import is_dns1123_label
from zkop.gitops.progress import Progress
from zkop.gitops.prune import PruneRefused, check_prune_roots, plan_prune
from zkop.gitops.schema import SchemaChecker, load_crd_schema, load_tree_crd_schema
from zkop.gitops.sync import SyncResult, prune_znodes, sync_objects
from zkop.gitops.tree import NodeNotFound, PathFilter, ZNode, is_sequential_name, read_nodes, walk
from zkop.gitops.tree_export import plan_tree_export
from zkop.gitops.trees import diff_tree, plan_tree, sync_trees
from zkop.gitops.validate import CheckedObject, CheckedTree, Validation, validate_manifests
from zkop.ownership.registry import DEFAULT_REGISTRY_ROOT
from zkop.zkconfig.spec import DEFAULT_MAX_DATA_BYTES
from zkop.zookeeper.acls import expand_auth
from zkop.zookeeper.adapter import ZooKeeperAdapter, ZooKeeperError
from zkop.zookeeper.paths import RESERVED_ROOT, InvalidPath, is_within, validate_path

__all__ = ["EXIT_ERROR", "EXIT_OK", "EXIT_PROBLEMS", "add_commands"]

log = logging.getLogger(__name__)

OUTPUT_FORMATS = ("text", "json", "yaml")


class CommandError(Exception):
    """A failure that ends the command with exit status 2; the message is for people."""


# --- parser ----------------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser, *, manifests: bool, output_hint: str = "") -> None:
    parser.add_argument("-o", "--output", type=output_format(OUTPUT_FORMATS, output_hint), default="text",
                        metavar="{" + ",".join(OUTPUT_FORMATS) + "}",
                        help="output format: text (default), or one JSON or YAML document on stdout")
    parser.add_argument("--max-data-bytes", type=positive_int, default=DEFAULT_MAX_DATA_BYTES, metavar="BYTES",
                        help=f"largest znode value accepted, as the operator's flag (default {DEFAULT_MAX_DATA_BYTES})")
    parser.add_argument("--crd", default=None, metavar="FILE",
                        help="ZooKeeperConfig CRD to check against (default: the one shipped with zkop)")
    parser.add_argument("--log-level", type=log_level, default="warning", metavar="{" + ",".join(LOG_LEVELS) + "}",
                        help="(default warning)")
    if manifests:
        parser.add_argument("-f", "--filename", action="extend", nargs="+", required=True, metavar="PATH",
                            help="manifest file, directory (recursive; one holding a kustomization.yaml is built "
                                 "with kustomize, as Flux does) or - for stdin; repeatable")


def _registry_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--registry-root", default=DEFAULT_REGISTRY_ROOT, metavar="PATH",
                        help=f"zkop's ownership registry, never exported or pruned (default {DEFAULT_REGISTRY_ROOT})")


def _prune_flags(parser: argparse.ArgumentParser, verb: str) -> None:
    group = parser.add_argument_group("pruning")
    group.add_argument("--prune", action="store_true",
                       help=f"{verb} znodes under --prune-root that no manifest declares (leaves first, "
                            "never recursive, never ephemeral/sequential/excluded)")
    group.add_argument("--prune-root", action="append", default=[], metavar="PATH",
                       help="subtree that --prune may delete from (required with --prune; repeatable)")
    group.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                       help="subtree never pruned (glob on the path, or on the name if it has no '/'; repeatable)")
    _registry_flag(parser)


def add_commands(sub: Any) -> None:
    """Add ``export``, ``diff``, ``validate`` and ``sync`` to the subparsers ``sub``.

    Each subparser sets ``func`` (``Callable[[argparse.Namespace], int]``) with ``set_defaults``.
    """
    export = sub.add_parser(
        "export", help="write ZooKeeperConfig manifests for a live znode subtree",
        description="Write one ZooKeeperConfig per leaf znode and per interior znode holding data or a "
                    "non-open ACL, in a directory mirroring the tree, plus a kustomization.yaml. Ephemeral "
                    "and sequential znodes are skipped. Exit 0 ok, 1 some znodes not exported, 2 error.")
    add_zookeeper_flags(export, writes=False)
    export.add_argument("--path", default=None, metavar="PATH", help="subtree to export (default /)")
    export.add_argument("--tree", action="append", default=[], metavar="PATH",
                        help="export this subtree as one ZooKeeperConfigTree (inline entries reproducing every "
                             "byte) instead of one ZooKeeperConfig per znode; repeatable, not with --path")
    export.add_argument("-d", "--dir", required=True, metavar="DIRECTORY", help="directory to write into")
    export.add_argument("--namespace", default=None, metavar="NAMESPACE",
                        help="metadata.namespace of every object (default: none)")
    export.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="subtree not exported (glob on the path, or on the name if it has no '/'; repeatable)")
    export.add_argument("--include-empty", action="store_true",
                        help="also export empty interior znodes with the open ACL")
    export.add_argument("--force", action="store_true", help="overwrite files that exist in DIRECTORY")
    _registry_flag(export)
    _common(export, manifests=False, output_hint="; the directory to write into is -d/--dir")
    export.set_defaults(func=_guarded(_run_export))

    diff = sub.add_parser(
        "diff", help="compare manifests with live ZooKeeper",
        description="Print a unified diff per znode that sync would change. "
                    "Exit 0 no differences, 1 differences, 2 error (as diff and kubectl diff).")
    add_zookeeper_flags(diff, writes=False)
    _common(diff, manifests=True)
    _prune_flags(diff, "show as deletions")
    diff.set_defaults(func=_guarded(_run_diff))

    validate = sub.add_parser(
        "validate", help="check manifests offline (CRD schema and zkop's rules)",
        description="Check manifests against the CRD schema and zkop's rules without touching ZooKeeper. "
                    "Exit 0 valid, 1 one line per problem (file:line, object, field, rule), 2 error.")
    _common(validate, manifests=True)
    _registry_flag(validate)
    validate.add_argument("--strict", action=argparse.BooleanOptionalAction, default=True,
                          help="fields not in the CRD schema are errors, as server-side apply and kubectl apply "
                               "treat them (default); --no-strict: warnings (kubectl --validate=false prunes them)")
    validate.set_defaults(func=_guarded(_run_validate))

    sync = sub.add_parser(
        "sync", help="apply manifests straight to ZooKeeper, as the operator would",
        description="Converge ZooKeeper to the manifests with the operator's rules, without Kubernetes. "
                    "Nothing is deleted without --prune. Exit 0 ok, 1 some znodes not converged, 2 error "
                    "(nothing written).")
    add_zookeeper_flags(sync)
    _common(sync, manifests=True)
    sync.add_argument("--dry-run", action="store_true", help="print the plan, write nothing")
    _prune_flags(sync, "delete")
    sync.set_defaults(func=_guarded(_run_sync))


# --- plumbing --------------------------------------------------------------------------------


def _emit(args: argparse.Namespace, document: dict[str, Any]) -> None:
    """Write ``document`` on stdout as ``-o json`` or ``-o yaml`` asks (keys in insertion order).

    YAML strings are not folded (a message stays on one line, as in the JSON and text outputs).
    """
    if args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1 << 30))
    else:
        sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")


def _note(message: str) -> None:
    sys.stderr.write(message + "\n")


def _guarded(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Turn :class:`CommandError` and the usual I/O failures into exit status 2 with a message."""

    def guarded(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (CommandError, ZooKeeperError, ManifestSourceError, ExportConflict, PruneRefused) as err:
            message = str(err)
        except (OSError, ValueError, yaml.YAMLError) as err:
            log.debug("zkop %s failed", args.command, exc_info=True)
            message = f"{type(err).__name__}: {err}"
        _note(f"zkop {args.command}: error: {message}")
        if args.output != "text":
            _emit(args, {"command": args.command, "error": message})
        return EXIT_ERROR

    guarded.__doc__ = run.__doc__
    return guarded


@contextmanager
def _session(args: argparse.Namespace) -> Iterator[ZooKeeperAdapter]:
    try:
        options = connection_options(args)
    except UsageError as err:  # an unreadable or malformed --zk-auth-file
        raise CommandError(str(err)) from None
    adapter = ZooKeeperAdapter(options)
    try:
        adapter.start()
        yield adapter
    finally:
        adapter.stop()


def _checker(args: argparse.Namespace) -> SchemaChecker:
    try:
        return SchemaChecker(load_crd_schema(args.crd))
    except FileNotFoundError as err:
        raise CommandError(str(err)) from None


def _validation(args: argparse.Namespace, *, strict: bool = True) -> Validation:
    manifests = load_manifests(args.filename)
    return validate_manifests(manifests, _checker(args), max_data_bytes=args.max_data_bytes, strict=strict,
                              registry_root=getattr(args, "registry_root", DEFAULT_REGISTRY_ROOT))


def _valid_input(args: argparse.Namespace) -> Validation:
    """Manifests for diff/sync: any validation error is a :class:`CommandError` (nothing touched)."""
    validation = _validation(args)
    for problem in validation.problems:
        _note(str(problem))
    if validation.errors:
        raise CommandError(f"{len(validation.errors)} problem(s) in the manifests (see zkop validate); "
                           "nothing read or written")
    return validation


def _path_filter(args: argparse.Namespace) -> PathFilter:
    return PathFilter(args.exclude, reserved=(RESERVED_ROOT, args.registry_root))


def _declared(objects: Sequence[CheckedObject], trees: Sequence[CheckedTree]) -> set[str]:
    """Every path the input declares: each ZooKeeperConfig's, each tree's root and children."""
    return ({c.path for c in objects} | {t.path for t in trees}
            | {child.path for t in trees for child in t.children or ()})


def _prune_candidates(args: argparse.Namespace, adapter: ZooKeeperAdapter,
                      objects: Sequence[CheckedObject], trees: Sequence[CheckedTree] = ()) -> list[ZNode]:
    """Walk each prune root and apply :func:`plan_prune`; deepest first over all roots. Nothing below the root
    of a tree whose children are unknown offline (a Secret source) is a candidate."""
    path_filter = _path_filter(args)
    declared = _declared(objects, trees)
    unknown = [t.path for t in trees if t.children is None]
    candidates: dict[str, ZNode] = {}
    with Progress("reading znodes") as progress:
        for root in args.prune_root:
            if path_filter.excluded(root):
                continue
            try:
                tree = walk(adapter, root, skip=path_filter.excluded,
                            descend=lambda n: not is_sequential_name(n.name), on_node=progress.advance)
            except NodeNotFound:
                continue
            for node in plan_prune(tree, declared):
                if not any(is_within(node.path, root) for root in unknown):
                    candidates.setdefault(node.path, node)
    return sorted(candidates.values(), key=lambda n: (-n.path.count("/"), n.path))


def _check_prune_args(args: argparse.Namespace, objects: Sequence[CheckedObject],
                      trees: Sequence[CheckedTree] = ()) -> None:
    if args.prune_root and not args.prune:
        raise CommandError("--prune-root needs --prune")
    if args.prune:
        if not args.prune_root:
            raise CommandError("--prune needs at least one --prune-root PATH (the subtrees it may delete from)")
        check_prune_roots(args.prune_root, _declared(objects, trees), _path_filter(args))


# --- commands --------------------------------------------------------------------------------


def _run_export(args: argparse.Namespace) -> int:
    """``zkop export``. JSON: ``{"command", "root", "directory", "exported": [{"path", "name", "file"}],
    "withheld": [{"path", "secret", "key"}], "skipped": [{"path", "reason"}], "problems": [{"path", "reason"}]}``;
    with ``--tree`` ``root`` is the list of tree roots and ``exported`` has one item per tree."""
    if args.tree:
        return _run_export_trees(args)
    args.path = args.path or "/"
    if args.path != "/":
        try:
            validate_path(args.path)
        except InvalidPath as err:
            raise CommandError(f"--path: {err}") from None
    if args.namespace is not None and not is_dns1123_label(args.namespace):
        raise CommandError(f"--namespace {args.namespace!r} is not a DNS-1123 label")
    checker = _checker(args)
    path_filter = _path_filter(args)
    if path_filter.reserved_path(args.path):
        raise CommandError(f"--path {args.path} lies in a reserved subtree ({', '.join(path_filter.reserved)})")
    with _session(args) as adapter, Progress("reading znodes") as progress:
        try:
            tree = walk(adapter, args.path, skip=path_filter.excluded,
                        descend=lambda n: not is_sequential_name(n.name), on_node=progress.advance)
        except NodeNotFound as err:
            raise CommandError(str(err)) from None
    export = plan_export(tree, checker, namespace=args.namespace, include_empty=args.include_empty,
                         max_data_bytes=args.max_data_bytes)
    directory = Path(args.dir)
    write_export(export, directory, force=args.force)
    problems = export.problems
    if args.output != "text":
        _emit(args, {
            "command": "export", "root": args.path, "directory": str(directory),
            "exported": [{"path": z.path, "name": z.name, "file": str(z.file)} for z in export.znodes],
            "withheld": [{"path": z.path, "secret": z.secret, "key": SECRET_KEY} for z in export.znodes if z.secret],
            "skipped": [{"path": n.path, "reason": n.reason} for n in export.notes if not n.problem],
            "problems": [{"path": n.path, "reason": n.reason} for n in problems],
        })
    else:
        for note in export.notes:
            _note(f"{'error' if note.problem else 'skipped'}: {note.path}: {note.reason}")
        for znode in (z for z in export.znodes if z.secret):
            _note(f"withheld: {znode.path}: its ACL does not grant world:anyone read, so its value is not exported; "
                  f"the manifest reads it from Secret {znode.secret} key {SECRET_KEY}: create that Secret")
        sys.stdout.write(
            f"exported {len(export.znodes)} znode(s) under {args.path} to {directory} (listed in "
            f"{directory / 'kustomization.yaml'}); {len(export.notes) - len(problems)} skipped, "
            f"{len(problems)} problem(s)\n")
    return EXIT_PROBLEMS if problems else EXIT_OK


def _run_export_trees(args: argparse.Namespace) -> int:
    """``zkop export --tree PATH...``: one ZooKeeperConfigTree per subtree (:mod:`zkop.gitops.tree_export`)."""
    if args.path is not None:
        raise CommandError("--tree and --path cannot be combined: export the trees and the other znodes separately")
    if args.include_empty:
        raise CommandError("--include-empty does not apply to --tree: an empty interior znode is implied")
    if args.namespace is not None and not is_dns1123_label(args.namespace):
        raise CommandError(f"--namespace {args.namespace!r} is not a DNS-1123 label")
    path_filter = _path_filter(args)
    for root in args.tree:
        try:
            validate_path(root)
        except InvalidPath as err:
            raise CommandError(f"--tree {root}: {err}") from None
        if root == "/":
            raise CommandError("--tree /: the root znode cannot be a tree's root")
        if path_filter.reserved_path(root):
            raise CommandError(f"--tree {root} lies in a reserved subtree ({', '.join(path_filter.reserved)})")
    for a in args.tree:
        for b in args.tree:
            if a != b and is_within(b, a):
                raise CommandError(f"--tree {b} lies inside --tree {a}: one znode, one object")
    try:
        checker = SchemaChecker(load_tree_crd_schema())
    except FileNotFoundError as err:
        raise CommandError(str(err)) from None
    export = Export(",".join(args.tree))
    with _session(args) as adapter, Progress("reading znodes") as progress:
        for root in args.tree:
            try:
                walked = walk(adapter, root, skip=path_filter.excluded,
                              descend=lambda n: not is_sequential_name(n.name), on_node=progress.advance)
            except NodeNotFound as err:
                raise CommandError(str(err)) from None
            one = plan_tree_export(walked, checker, namespace=args.namespace)
            export.znodes.extend(one.znodes)
            export.notes.extend(one.notes)
    directory = Path(args.dir)
    write_export(export, directory, force=args.force)
    problems = export.problems
    if args.output != "text":
        _emit(args, {
            "command": "export", "root": list(args.tree), "directory": str(directory),
            "exported": [{"path": z.path, "name": z.name, "file": str(z.file)} for z in export.znodes],
            "withheld": [],
            "skipped": [{"path": n.path, "reason": n.reason} for n in export.notes if not n.problem],
            "problems": [{"path": n.path, "reason": n.reason} for n in problems],
        })
    else:
        for note in export.notes:
            _note(f"{'error' if note.problem else 'skipped'}: {note.path}: {note.reason}")
        sys.stdout.write(
            f"exported {len(export.znodes)} of {len(args.tree)} tree(s) to {directory} (listed in "
            f"{directory / 'kustomization.yaml'}); {len(export.notes) - len(problems)} znode(s) skipped, "
            f"{len(problems)} problem(s)\n")
    return EXIT_PROBLEMS if problems else EXIT_OK


def _run_validate(args: argparse.Namespace) -> int:
    """``zkop validate``. JSON: ``{"command", "objects", "valid", "ignored", "problems": [{"location", "object",
    "field", "rule", "severity"}]}``."""
    validation = _validation(args, strict=args.strict)
    if args.output != "text":
        _emit(args, {"command": "validate", "objects": validation.total, "valid": len(validation.objects),
                    "ignored": validation.ignored, "problems": [p.to_json() for p in validation.problems]})
    else:
        for problem in validation.problems:
            sys.stdout.write(f"{problem}\n")
        _note(f"{validation.total} {'object' if validation.total == 1 else 'objects'} checked: "
              f"{len(validation.objects)} valid, {len(validation.errors)} error(s), "
              f"{len(validation.warnings)} warning(s); {validation.ignored} other object(s) ignored")
    return EXIT_PROBLEMS if validation.errors else EXIT_OK


def _run_diff(args: argparse.Namespace) -> int:
    """``zkop diff``. JSON: ``{"command", "results": [{"path", "status", "changes", "diff", "message",
    "object"}], "summary": {status: count}}``; status equal|differs|outOfSync|skipped|error."""
    validation = _valid_input(args)
    objects, trees = validation.objects, validation.trees
    _check_prune_args(args, objects, trees)
    results: list[ZnodeDiff] = []
    resolved = sorted((c for c in objects if c.desired is not None), key=lambda c: c.path)
    results.extend(skipped(c) for c in sorted(objects, key=lambda c: c.path) if c.desired is None)
    with _session(args) as adapter:
        with Progress("reading znodes", total=len(resolved)) as progress:
            observed = read_nodes(adapter, [c.path for c in resolved], on_node=progress.advance)
        ids = adapter.identities
        for checked in resolved:
            live = observed[checked.path]
            if isinstance(live, ZooKeeperError):
                results.append(ZnodeDiff(checked.path, "error", message=str(live), object=checked.describe()))
            else:
                # An ``auth`` entry is stored as the writer's ids (fixupACL): compare with what sync would store.
                assert checked.desired is not None
                desired = dataclasses.replace(checked.desired, acl=expand_auth(checked.desired.acl, ids))
                results.append(diff_object(dataclasses.replace(checked, desired=desired), live))
        for tree in trees:
            if tree.children is None:
                results.append(ZnodeDiff(tree.path, "skipped", message=f"the tree reads {tree.unresolved}, which "
                                         "cannot be resolved without a cluster; skipped", object=tree.describe()))
            else:
                results.extend(diff_tree(plan_tree(adapter, tree)))
        if args.prune:
            results.extend(diff_prune(node) for node in _prune_candidates(args, adapter, objects, trees))
    summary = Counter(r.status for r in results)
    if args.output != "text":
        _emit(args, {"command": "diff", "results": [r.to_json() for r in results], "summary": dict(summary)})
    else:
        for result in results:
            if result.status == "differs":
                sys.stdout.write(result.text)
            elif result.status != "equal":
                _note(f"{result.status}: {result.path}: {result.message}")
        others = ", ".join(f"{count} {status}" for status, count in sorted(summary.items()) if status != "differs")
        not_compared = " (not compared: they need a cluster)" if summary["skipped"] else ""
        _note(f"{summary['differs']} of {len(results)} znode(s) differ"
              + (f"; {others}{not_compared}" if others else ""))
    if summary["error"]:
        return EXIT_ERROR
    return EXIT_PROBLEMS if summary["differs"] else EXIT_OK


_DRY_RUN_VERBS = {"created": "would create", "updated": "would update", "pruned": "would prune"}


def _sync_line(result: SyncResult, dry_run: bool) -> str:
    verb = _DRY_RUN_VERBS.get(result.result, result.result) if dry_run else result.result
    detail = "; ".join(result.actions) if result.actions else result.message
    return f"{verb} {result.path}: {detail}"


def _run_sync(args: argparse.Namespace) -> int:
    """``zkop sync``. JSON: ``{"command", "dryRun", "results": [{"path", "result", "message", "object",
    "actions"}], "summary": {result: count}}``; result unchanged|created|updated|outOfSync|pruned|skipped|error."""
    validation = _valid_input(args)
    objects, trees = validation.objects, validation.trees
    _check_prune_args(args, objects, trees)
    with _session(args) as adapter:
        with Progress("reading znodes", total=len(objects)) as progress:
            observed = read_nodes(adapter, [c.path for c in objects if c.desired is not None],
                                  on_node=progress.advance)
        with Progress("syncing znodes", total=len(objects)) as progress:
            results = sync_objects(adapter, objects, dry_run=args.dry_run, pre_read=observed,
                                   on_done=progress.advance)
        with Progress("syncing trees", total=len(trees)) as progress:
            results.extend(sync_trees(adapter, trees, dry_run=args.dry_run, on_done=progress.advance))
        if args.prune:
            candidates = _prune_candidates(args, adapter, objects, trees)
            with Progress("pruning znodes", total=len(candidates)) as progress:
                results.extend(prune_znodes(adapter, candidates, dry_run=args.dry_run, on_done=progress.advance))
    summary = Counter(r.result for r in results)
    if args.output != "text":
        _emit(args, {"command": "sync", "dryRun": args.dry_run, "results": [r.to_json() for r in results],
                    "summary": dict(summary)})
    else:
        for result in results:
            if result.result != "unchanged":
                sys.stdout.write(_sync_line(result, args.dry_run) + "\n")
        prefix = "dry run, nothing written: " if args.dry_run else ""
        counts = (", ".join(f"{n} {k}" for k, n in sorted(summary.items()))
                  or "no ZooKeeperConfig or ZooKeeperConfigTree objects")
        sys.stdout.write(f"sync: {prefix}{counts}\n")
    return EXIT_PROBLEMS if summary["error"] else EXIT_OK
