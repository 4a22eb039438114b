"""Tell an application that its configuration changed: run a command, signal a process, POST to a URL.

:class:`~zkop.hooks.runner.HookRunner` runs the hooks of ``zkop fetch --watch`` on one thread of its own, one
notification at a time (never overlapping), coalescing: changes submitted while the hooks run make one more
run afterwards, with the latest content and every key changed since the last run that succeeded. A failing
hook is retried with exponential backoff (:mod:`tenacity`). Imports nothing else of zkop (the bottom layer
beside :mod:`zkop.render`).
"""

from zkop.hooks.kinds import Change, ExecHook, Hook, HookFailed, HttpHook, SignalHook, find_processes
from zkop.hooks.runner import Backoff, HookRunner

__all__ = ["Backoff", "Change", "ExecHook", "Hook", "HookFailed", "HookRunner", "HttpHook", "SignalHook",
           "find_processes"]
