"""Flag plumbing shared by every ``zkop`` subcommand: value types, usage errors, exit codes.

Exit codes are documented once, in docs/operations.md, "Exit codes" (0 success; 1 ran and found
or hit problems; 2 usage or configuration error, nothing done). Value types raise
:class:`argparse.ArgumentTypeError`, so argparse reports ``zkop run: error: argument --sync-period: …``
and exits 2 (also for string defaults taken from environment variables); checks over several flags
raise :class:`UsageError`, which ``zkop.cmd.main.main`` reports the same way.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

from zkop.kube.duration import format_duration, parse_duration
from zkop.kube.validation import is_dns1123_label
from zkop.operator.options import GRACEFUL_SHUTDOWN_TIMEOUT
from zkop.runtime.serving import parse_bind_address
from zkop.zookeeper.paths import InvalidPath, validate_path

__all__ = [
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "GRACEFUL_SHUTDOWN_TIMEOUT",
    "LOG_LEVELS",
    "ArgumentParser",
    "UsageError",
    "bind_address",
    "dns_label",
    "duration",
    "exit_usage",
    "format_duration",
    "log_level",
    "non_negative_int",
    "output_format",
    "positive_duration",
    "positive_int",
    "znode_path",
]

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_ERROR = 2

LOG_LEVELS = ("debug", "info", "warning", "error")



class UsageError(Exception):
    """A flag value or combination zkop rejects after parsing; ends the command with exit 2."""


def exit_usage(prog: str, message: str) -> NoReturn:
    """Write ``<prog>: error: <message>`` as one line on stderr and exit 2 (argparse's usage status).

    Raises:
        SystemExit: always, with code 2.
    """
    line = " ".join(message.split())
    sys.stderr.write(f"{prog}: error: {line} (see '{prog} --help')\n")
    raise SystemExit(EXIT_ERROR)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line usage error (no usage dump) and exit status 2.

    Subparsers are made of the same class (``add_subparsers`` uses the parent's class).  Flags are
    never abbreviated (``allow_abbrev=False`` for every parser): Go's ``flag`` and ``pflag`` have no
    prefix matching, and a prefix that works today would change meaning when a flag is added.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Report a usage error through :func:`exit_usage`."""
        exit_usage(self.prog, message)

    def parse_known_args(self, args: Iterable[str] | None = None, namespace: Any = None) -> tuple[Any, list[str]]:
        """argparse's, except that a flag taking a value takes the next argument when it starts with
        ``-`` and a digit or ``.`` (``--sync-period -5s``), as Go's ``flag`` and ``pflag`` take the
        next argument whatever it is; argparse takes only plain negative numbers (``-5``) and would
        say "expected one argument".  So a negative value gets the flag's own error (``duration
        '-5s' must not be negative``) with or without ``=``.
        """
        given = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self._attach_negative_values(given), namespace)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """argparse's, except that an unknown flag after a subcommand is that subcommand's error
        (``zkop run: error: unrecognized arguments: --sync-per 5s``), not the top parser's."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self._parser_of(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def _parser_of(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The (sub)parser of the subcommand ``parsed`` chose, or this parser."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(parsed, action.dest or "", None) or "")
                if isinstance(chosen, ArgumentParser):
                    return chosen._parser_of(parsed)
        return self

    def _attach_negative_values(self, args: list[str]) -> list[str]:
        """``["--flag", "-5s"]`` → ``["--flag=-5s"]`` for this parser's flags that take one value."""
        takes_value = {option for action in self._actions if action.nargs is None for option in action.option_strings}
        joined: list[str] = []
        index = 0
        while index < len(args):
            arg = args[index]
            if arg == "--":
                return joined + args[index:]
            if arg in takes_value and index + 1 < len(args) and _NEGATIVE_VALUE.match(args[index + 1]):
                joined.append(f"{arg}={args[index + 1]}")
                index += 2
                continue
            joined.append(arg)
            index += 1
        return joined


#: A value that starts like a negative number or duration: ``-5``, ``-5s``, ``-.5h``.
_NEGATIVE_VALUE = re.compile(r"-[0-9.]")


def duration(text: str) -> float:
    """argparse type: a non-negative Go duration (``15s``, ``10m``, ``1h30m``) or bare seconds → seconds.

    Raises:
        argparse.ArgumentTypeError: not a duration (:func:`~zkop.kube.duration.parse_duration`) or negative.
    """
    try:
        seconds = parse_duration(text, bare_seconds=True)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err} (want e.g. 15s, 10m, 1h30m, 500ms)") from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} must not be negative")
    return seconds


def positive_duration(text: str) -> float:
    """argparse type: like :func:`duration`, and more than zero.

    Raises:
        argparse.ArgumentTypeError: not a duration, or not positive.
    """
    seconds = duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} must be more than 0")
    return seconds


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (``--workers``).

    Raises:
        argparse.ArgumentTypeError: not a whole number, or less than 1.
    """
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: a whole number of at least 0 (``--service-bridge-max-deletes``, 0 meaning no limit).

    Raises:
        argparse.ArgumentTypeError: not a whole number, or negative.
    """
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def log_level(text: str) -> str:
    """argparse type: one of :data:`LOG_LEVELS`, case-insensitive → lower case.

    Raises:
        argparse.ArgumentTypeError: another word (e.g. ``verbose``).
    """
    level = text.strip().lower()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"unknown log level {text!r} (choose from {', '.join(LOG_LEVELS)})")
    return level


def bind_address(text: str) -> str:
    """argparse type: a controller-runtime bind address (``:8080``, ``127.0.0.1:8080``, ``[::1]:8080``, ``0``).

    The rule is :func:`zkop.runtime.serving.parse_bind_address`, the one the servers use; the
    text is returned unchanged.

    Raises:
        argparse.ArgumentTypeError: anything that function rejects.
    """
    try:
        parse_bind_address(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def dns_label(text: str) -> str:
    """argparse type: a DNS-1123 label (a namespace name).

    Raises:
        argparse.ArgumentTypeError: not a label (upper case, underscores, over 63 characters, …).
    """
    if not is_dns1123_label(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid namespace name (DNS-1123 label)")
    return text


def znode_path(text: str) -> str:
    """argparse type: an absolute znode path (ZooKeeper's ``PathUtils.validatePath``); a trailing ``/`` is dropped.

    Raises:
        argparse.ArgumentTypeError: a relative path, empty segments, ``.``/``..``, forbidden characters.
    """
    path = text.rstrip("/") or "/"
    try:
        validate_path(path)
    except InvalidPath as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return path


def output_format(choices: Sequence[str], hint: str = "") -> Callable[[str], str]:
    """argparse type factory for ``-o/--output`` (kubectl's habit: the output format).

    Args:
        choices: accepted formats, e.g. ``("text", "json", "yaml")``.
        hint: appended to the error, e.g. where a flag that used to be ``-o`` went.

    Returns:
        A type function that returns the format, lower case.
    """

    def parse(text: str) -> str:
        fmt = text.strip().lower()
        if fmt not in choices:
            raise argparse.ArgumentTypeError(
                f"unknown output format {text!r} (choose from {', '.join(choices)}){hint}")
        return fmt

    parse.__name__ = "output format"
    return parse
