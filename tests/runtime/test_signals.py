"""A signal's shutdown runs outside the signal handler (:mod:`zkop.runtime.signals`).

The failure it prevents: CPython runs a handler in the main thread between bytecodes, also while that thread holds
a ``threading.Event``'s condition lock (inside ``wait`` or ``clear``); a handler calling ``set()`` on that event
then blocks on a lock its own thread holds, forever. ``zkop fetch --watch`` once ignored SIGTERM so in CI.
"""

from __future__ import annotations

import os
import signal
import threading

from zkop_testing.waiting import EVENTUALLY

from zkop.runtime.signals import SignalRelay


def test_the_handler_returns_while_its_thread_holds_the_lock_the_callback_takes() -> None:
    stop = threading.Event()
    with SignalRelay(lambda signum: stop.set()) as relay:
        returned = threading.Event()

        def signalled_inside_wait() -> None:
            with stop._cond:  # type: ignore[attr-defined]  # where Event.wait holds it when a signal lands
                relay.handler(signal.SIGTERM, None)
                returned.set()

        thread = threading.Thread(target=signalled_inside_wait, daemon=True)
        thread.start()
        assert returned.wait(EVENTUALLY), "the handler blocked on the lock its own thread holds"
        assert stop.wait(EVENTUALLY), "the callback never ran"
        thread.join(EVENTUALLY)


def test_a_real_signal_reaches_the_callback_on_the_relay_thread_and_the_old_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    calls: list[tuple[int, str]] = []
    called = threading.Event()

    def on_signal(signum: int) -> None:
        calls.append((signum, threading.current_thread().name))
        called.set()

    with SignalRelay(on_signal):
        os.kill(os.getpid(), signal.SIGTERM)
        assert called.wait(EVENTUALLY)
    assert calls == [(signal.SIGTERM, "zkop-signals")]
    assert signal.getsignal(signal.SIGTERM) == before
    assert not [t for t in threading.enumerate() if t.name == "zkop-signals"]


def test_a_callback_that_raises_is_logged_and_later_signals_still_relay() -> None:
    seen: list[int] = []
    second = threading.Event()

    def on_signal(signum: int) -> None:
        seen.append(signum)
        if len(seen) == 1:
            raise RuntimeError("first one fails")
        second.set()

    with SignalRelay(on_signal, signals=(signal.SIGUSR1,)) as relay:
        relay.handler(signal.SIGUSR1, None)
        relay.handler(signal.SIGUSR1, None)
        assert second.wait(EVENTUALLY)
    assert seen == [signal.SIGUSR1, signal.SIGUSR1]
