"""One thread that runs the hooks, never two notifications at once, coalescing and retrying."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_exception_type, wait_exponential

from zkop.hooks.kinds import Change, Hook, HookFailed

__all__ = ["Backoff", "HookRunner"]

log = logging.getLogger("zkop.hooks")


@dataclass(frozen=True)
class Backoff:
    """Retries of a failing hook: at most ``attempts`` tries, ``initial`` seconds before the second, doubling up to
    ``maximum`` seconds."""

    attempts: int = 5
    initial: float = 1.0
    maximum: float = 30.0


class HookRunner:
    """Runs ``hooks`` in order for each notification on a thread of its own (:meth:`start`, :meth:`stop`).

    :meth:`submit` never blocks. A change submitted while a notification runs (or waits to retry) is not run
    beside it: the runner ends the notification's current try, then runs once more with the latest change and
    the union of the keys (a hook that was retrying is not retried for the older content). A hook that fails
    ``backoff.attempts`` times is given up for that content (logged as an error); its keys stay in the next
    notification. Thread-safe.

    Attributes:
        delivered: the changes every hook succeeded for, in order (tests, logs).
    """

    def __init__(self, hooks: Sequence[Hook], backoff: Backoff = Backoff()) -> None:
        self.hooks = list(hooks)
        self.backoff = backoff
        self.delivered: list[Change] = []
        self._cond = threading.Condition()
        self._pending: Change | None = None
        self._carried: set[str] = set()
        self._stopping = False
        self._busy = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (no-op without hooks)."""
        if self.hooks and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="zkop-hooks", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Let a running hook finish (no more retries), drop what is pending, and end the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def submit(self, change: Change) -> None:
        """Notify of ``change`` (merged with what is still pending or was not delivered)."""
        if not self.hooks:
            return
        with self._cond:
            keys = set(change.keys) | self._carried | (set(self._pending.keys) if self._pending else set())
            self._pending = Change(tuple(sorted(keys)), change.digest, change.output)
            self._cond.notify_all()

    def idle(self) -> bool:
        """Nothing pending and no hook running."""
        with self._cond:
            return self._pending is None and not self._busy

    def _superseded(self) -> bool:
        with self._cond:
            return self._stopping or self._pending is not None

    def _sleep(self, seconds: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._stopping or self._pending is not None, timeout=seconds)

    def _stop(self, state: RetryCallState) -> bool:
        return state.attempt_number >= self.backoff.attempts or self._superseded()

    def _before_sleep(self, hook: Hook) -> Any:
        def log_retry(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            log.warning("%s failed (%s); retrying in %.1fs", hook.name, error,
                        state.next_action.sleep if state.next_action is not None else 0.0)
        return log_retry

    def _notify(self, change: Change) -> bool:
        for hook in self.hooks:
            retrying = Retrying(stop=self._stop, sleep=self._sleep, reraise=True,
                                retry=retry_if_exception_type(HookFailed),
                                wait=wait_exponential(multiplier=self.backoff.initial, max=self.backoff.maximum),
                                before_sleep=self._before_sleep(hook))
            try:
                retrying(hook, change)
            except HookFailed as err:
                if self._superseded():
                    log.info("%s failed (%s); newer content arrived meanwhile", hook.name, err)
                else:
                    log.error("%s failed %d times (%s); given up for this content (digest %s)", hook.name,
                              self.backoff.attempts, err, change.digest[:12])
                return False
            log.info("%s: notified of %d changed keys (digest %s)", hook.name, len(change.keys), change.digest[:12])
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or self._pending is not None)
                if self._stopping:
                    return
                change, self._pending, self._carried = self._pending, None, set()
                self._busy = True
            assert change is not None
            try:
                ok = self._notify(change)
            except Exception:  # a hook's bug must not end the runner
                log.exception("notification failed")
                ok = False
            with self._cond:
                self._busy = False
                if ok:
                    self.delivered.append(change)
                else:
                    self._carried |= set(change.keys)
                self._cond.notify_all()
