"""``zkop fetch``: a znode or a subtree written into a directory or one rendered file, once or kept up to date.

For workloads that want files instead of a ConfigMap: an init container runs ``zkop fetch --path P --dir D``
before the application starts, a sidecar ``--watch``. ``--dir`` writes exactly the keys a ZooKeeperMirror of the
same path would put in its ConfigMap (:mod:`zkop.mirror.keys`; collisions, invalid keys and unreadable znodes are
left out and logged), atomically (:func:`zkop.mirror.files.write_atomically`); ``--out`` one file in a
``--format`` or through a sandboxed ``--template`` (:mod:`zkop.render`). With ``--watch`` the application is told
after each complete update (:mod:`zkop.hooks`: ``--exec``, ``--signal``, ``--notify-url``). The loop is
:class:`zkop.mirror.sidecar.Sidecar`. Only reads: the session gets no write surface.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
from pathlib import Path
from typing import Any

from zkop.cmd.flags import (
    EXIT_ERROR,
    LOG_LEVELS,
    UsageError,
    duration,
    log_level,
    positive_duration,
    positive_int,
    znode_path,
)
from zkop.hooks import Backoff, ExecHook, Hook, HookRunner, HttpHook, SignalHook
from zkop.kube.duration import parse_duration
from zkop.mirror.decide import MirrorSpec
from zkop.mirror.keys import key_problem
from zkop.mirror.sidecar import DirectoryOutput, FileOutput, Output, Sidecar, Wait
from zkop.render import FORMATS, RenderError, SandboxedTemplate, TemplateError
from zkop.runtime.signals import SignalRelay
from zkop.zookeeper.adapter import ZooKeeperAdapter, ZooKeeperError, ZooKeeperUnavailable

__all__ = ["add_command", "parse_wait"]

log = logging.getLogger("zkop.fetch")


def parse_wait(text: str) -> Wait:
    """argparse type: ``MIN`` or ``MIN:MAX`` durations (consul-template's ``wait``; MAX defaults to 4 × MIN).

    Raises:
        argparse.ArgumentTypeError: not durations, MIN not positive, or MAX below MIN.
    """
    low, _, high = text.partition(":")
    try:
        minimum = parse_duration(low, bare_seconds=True)
        maximum = parse_duration(high, bare_seconds=True) if high else 4 * minimum
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err} (want MIN or MIN:MAX, e.g. 1s:5s)") from None
    if minimum <= 0 or maximum < minimum:
        raise argparse.ArgumentTypeError(f"--wait {text!r}: MIN more than 0 and MAX at least MIN")
    return Wait(minimum, maximum)


def _signal(text: str) -> signal.Signals:
    name = text.upper()
    try:
        return signal.Signals[name if name.startswith("SIG") else f"SIG{name}"]
    except KeyError:
        raise argparse.ArgumentTypeError(f"unknown signal {text!r} (e.g. HUP, USR1, TERM)") from None


def add_command(sub: Any) -> None:
    """Add ``fetch`` to the subparsers ``sub``."""
    from zkop.cmd.main import add_zookeeper_flags

    fetch = sub.add_parser(
        "fetch", help="write a znode or subtree into a directory or one file (once, or kept up to date with --watch)",
        description="Write the znode at --path (with --recursive, every znode below it) into --dir as files named "
                    "like a ZooKeeperMirror's ConfigMap keys, atomically as the kubelet updates a ConfigMap "
                    "volume, or into one file --out in a --format or through a --template. With --watch, keep it "
                    "up to date and notify the application after each complete update (--exec, --signal, "
                    "--notify-url). Exit 0 ok, 1 some znodes left out, not renderable or --path missing, 2 error.")
    add_zookeeper_flags(fetch, writes=False)
    fetch.add_argument("--path", required=True, type=znode_path, metavar="PATH", help="the znode or subtree root")
    where = fetch.add_mutually_exclusive_group(required=True)
    where.add_argument("--dir", metavar="DIRECTORY", help="directory to write into, one file per znode")
    where.add_argument("--out", metavar="FILE", help="one file to write (with --format or --template)")
    how = fetch.add_mutually_exclusive_group()
    how.add_argument("--format", choices=sorted(FORMATS), help="with --out: the file's format")
    how.add_argument("--template", metavar="FILE", help="with --out: a Jinja template, rendered in its sandbox")
    fetch.add_argument("-r", "--recursive", action="store_true", help="every znode below --path, not only it")
    fetch.add_argument("--key", default=None, metavar="NAME",
                       help="name of a single znode's file or key (default: its last path name)")
    fetch.add_argument("--watch", action="store_true", help="keep running and rewrite on every change")
    fetch.add_argument("--wait", type=parse_wait, default=None, metavar="MIN[:MAX]",
                       help="with --watch, write once no change came for MIN, at the latest MAX after the first "
                            "(default 50ms:200ms; MAX defaults to 4 x MIN)")
    fetch.add_argument("--debounce", type=positive_duration, default=None, metavar="DURATION",
                       help="deprecated: --wait DURATION")
    hooks = fetch.add_argument_group("hooks (with --watch: after each complete update whose content changed)")
    hooks.add_argument("--exec", dest="exec_command", metavar="COMMAND",
                       help="run COMMAND (split into words like a shell, run without one), with ZKOP_CHANGED_KEYS, "
                            "ZKOP_DIGEST and ZKOP_OUTPUT in its environment")
    hooks.add_argument("--exec-timeout", type=positive_duration, default=30.0, metavar="DURATION",
                       help="--exec must exit within this (default 30s), else it is killed and retried")
    hooks.add_argument("--signal", type=_signal, default=None, metavar="SIGNAL",
                       help="send SIGNAL (HUP, USR1, ...) to the process of --pid-file or --process-name")
    hooks.add_argument("--pid-file", metavar="FILE", help="with --signal: the file holding the process ID")
    hooks.add_argument("--process-name", metavar="NAME",
                       help="with --signal: every process of this name (/proc; a pod with shareProcessNamespace)")
    hooks.add_argument("--notify-url", metavar="URL", help="POST to URL (e.g. http://localhost:8080/actuator/refresh)")
    hooks.add_argument("--notify-timeout", type=positive_duration, default=10.0, metavar="DURATION",
                       help="--notify-url must answer 2xx within this (default 10s)")
    hooks.add_argument("--hook-attempts", type=positive_int, default=5, metavar="N",
                       help="tries of a failing hook per content (default 5)")
    hooks.add_argument("--hook-backoff", type=duration, default=1.0, metavar="DURATION",
                       help="wait before the second try, doubling up to 30s (default 1s)")
    fetch.add_argument("--log-level", type=log_level, default="info", metavar="{" + ",".join(LOG_LEVELS) + "}")
    fetch.add_argument("--log-format", default="text", choices=["text", "json"])
    fetch.set_defaults(func=_run_fetch)


def _output(args: argparse.Namespace) -> Output:
    if args.dir is not None:
        if args.format or args.template:
            raise UsageError("--format and --template go with --out, not --dir")
        return DirectoryOutput(args.dir)
    if not (args.format or args.template):
        raise UsageError("--out needs --format or --template")
    if args.template:
        try:
            source = Path(args.template).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise UsageError(f"--template {args.template}: {err}") from None
        try:
            return FileOutput(args.out, template=SandboxedTemplate(source, args.template))
        except TemplateError as err:
            raise UsageError(f"--template {err}") from None
    return FileOutput(args.out, form=args.format)


def _hooks(args: argparse.Namespace) -> list[Hook]:
    hooks: list[Hook] = []
    if args.exec_command is not None:
        try:
            argv = shlex.split(args.exec_command)
        except ValueError as err:
            raise UsageError(f"--exec: {err}") from None
        if not argv:
            raise UsageError("--exec: an empty command")
        hooks.append(ExecHook(argv, args.exec_timeout))
    if args.signal is not None:
        if (args.pid_file is None) == (args.process_name is None):
            raise UsageError("--signal needs exactly one of --pid-file and --process-name")
        hooks.append(SignalHook(args.signal, pid_file=args.pid_file, process_name=args.process_name))
    elif args.pid_file is not None or args.process_name is not None:
        raise UsageError("--pid-file and --process-name go with --signal")
    if args.notify_url is not None:
        try:
            hooks.append(HttpHook(args.notify_url, args.notify_timeout))
        except ValueError as err:
            raise UsageError(str(err)) from None
    if hooks and not args.watch:
        raise UsageError("--exec, --signal and --notify-url go with --watch")
    return hooks


def _run_fetch(args: argparse.Namespace) -> int:
    from zkop.cmd.main import connection_options

    output = _output(args)
    hooks = _hooks(args)
    if args.key is not None and ("/" in args.key or key_problem(args.key) is not None):
        raise UsageError(f"--key {args.key!r}: {key_problem(args.key) or 'a name without /'}")
    wait = args.wait or (Wait(args.debounce, 4 * args.debounce) if args.debounce else Wait())
    spec = MirrorSpec(args.path, bool(args.recursive), "", args.key)
    adapter = ZooKeeperAdapter(connection_options(args))
    runner = HookRunner(hooks, Backoff(args.hook_attempts, args.hook_backoff))
    sidecar = Sidecar(adapter, spec, output, hooks=runner, wait=wait)
    try:
        adapter.start()
    except ZooKeeperError as err:
        log.error("cannot connect to ZooKeeper: %s", err)
        return EXIT_ERROR
    try:
        if not args.watch:
            return _once(sidecar)

        runner.start()
        with SignalRelay(lambda signum: sidecar.stop()):  # never sidecar.stop() inside the handler itself
            return sidecar.watch()
    finally:
        runner.stop()
        adapter.stop()


def _once(sidecar: Sidecar) -> int:
    try:
        _, skipped = sidecar.once()
    except FileNotFoundError as err:
        log.error("%s; nothing written", err)
        return 1
    except RenderError as err:
        log.error("%s", err)
        return 1
    except (ZooKeeperUnavailable, ZooKeeperError, OSError) as err:
        log.error("%s", err)
        return EXIT_ERROR
    return 1 if skipped else 0
