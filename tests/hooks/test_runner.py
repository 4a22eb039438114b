"""zkop.hooks: one runner, never overlapping, coalescing, retrying with backoff; the exec, signal and HTTP hooks."""

from __future__ import annotations

import http.server
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from zkop_testing.waiting import EVENTUALLY, wait_for

from zkop.hooks import Backoff, Change, ExecHook, HookFailed, HookRunner, HttpHook, SignalHook, find_processes


class Recording:
    """A hook that records each call, can be held inside a call, and fails while ``failures`` is positive."""

    name = "recording"

    def __init__(self, failures: int = 0) -> None:
        self.calls: list[Change] = []
        self.running = 0
        self.overlapped = False
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()
        self.failures = failures

    def __call__(self, change: Change) -> None:
        self.running += 1
        self.overlapped |= self.running > 1
        self.calls.append(change)
        self.entered.set()
        self.release.wait(EVENTUALLY)
        self.running -= 1
        if self.failures > 0:
            self.failures -= 1
            raise HookFailed("not yet")


@pytest.fixture
def fast() -> Backoff:
    return Backoff(attempts=3, initial=0.01, maximum=0.02)


def change(digest: str, *keys: str) -> Change:
    return Change(tuple(keys), digest, "/out")


def test_changes_while_a_hook_runs_coalesce_into_one_more_run_with_the_latest(fast: Backoff) -> None:
    hook = Recording()
    runner = HookRunner([hook], fast)
    runner.start()
    try:
        hook.release.clear()
        runner.submit(change("d1", "a"))
        assert hook.entered.wait(EVENTUALLY)
        for i, key in enumerate(["b", "c", "d"], start=2):
            runner.submit(change(f"d{i}", key))
        hook.release.set()
        wait_for(runner.idle, message="runner idle")
    finally:
        runner.stop()
    assert [(c.digest, c.keys) for c in hook.calls] == [("d1", ("a",)), ("d4", ("b", "c", "d"))]
    assert not hook.overlapped


def test_a_failing_hook_is_retried_with_backoff_then_succeeds(fast: Backoff) -> None:
    hook = Recording(failures=2)
    runner = HookRunner([hook], fast)
    runner.start()
    try:
        runner.submit(change("d1", "a"))
        wait_for(lambda: runner.delivered, message="delivered")
    finally:
        runner.stop()
    assert len(hook.calls) == 3 and runner.delivered == [change("d1", "a")]


def test_a_hook_given_up_keeps_its_keys_for_the_next_notification(fast: Backoff) -> None:
    hook = Recording(failures=3)
    runner = HookRunner([hook], fast)
    runner.start()
    try:
        runner.submit(change("d1", "a"))
        wait_for(lambda: len(hook.calls) == 3 and runner.idle(), message="given up")
        assert runner.delivered == []
        runner.submit(change("d2", "b"))
        wait_for(lambda: runner.delivered, message="delivered")
    finally:
        runner.stop()
    assert runner.delivered == [change("d2", "a", "b")]


def test_exec_passes_keys_in_the_environment_never_through_a_shell(tmp_path: Path) -> None:
    out = tmp_path / "env"
    script = "import os, sys; open(sys.argv[1], 'w').write(os.environ['ZKOP_CHANGED_KEYS'] + '|' + sys.argv[2])"
    evil = "$(touch pwned); `touch pwned`"
    ExecHook([sys.executable, "-c", script, str(out), "$HOME"], timeout=EVENTUALLY)(change("d", evil, "b"))
    assert out.read_text() == f"{evil}\nb|$HOME"
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_exec_failures_are_hook_failures(tmp_path: Path) -> None:
    with pytest.raises(HookFailed, match="exited 3"):
        ExecHook([sys.executable, "-c", "raise SystemExit(3)"])(change("d"))
    with pytest.raises(HookFailed, match="cannot run"):
        ExecHook([str(tmp_path / "missing")])(change("d"))
    with pytest.raises(HookFailed, match="longer than"):
        ExecHook([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.2)(change("d"))


def test_signal_finds_a_process_by_name_and_by_pid_file(tmp_path: Path) -> None:
    name = "zkop-sig-test"
    proc = subprocess.Popen(["bash", "-c", 'exec -a "$0" "$@"', name, sys.executable, "-c",
                             "import signal, sys; signal.signal(signal.SIGUSR1, lambda *a: sys.exit(7)); "
                             "print('ready', flush=True); signal.pause()"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        assert find_processes(name) == [proc.pid]
        SignalHook(signal.SIGUSR1, process_name=name)(change("d"))
        assert proc.wait(EVENTUALLY) == 7
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    with pytest.raises(HookFailed, match="no process named"):
        SignalHook(signal.SIGUSR1, process_name=name)(change("d"))
    pid_file = tmp_path / "pid"
    pid_file.write_text("1\n")
    with pytest.raises(HookFailed, match="not a process ID above 1"):
        SignalHook(signal.SIGHUP, pid_file=str(pid_file))(change("d"))


@pytest.fixture
def server() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    got: list[tuple[str, bytes]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append((self.path, self.rfile.read(int(self.headers.get("Content-Length") or 0))))
            code = {"/ok": 200, "/fail": 500, "/moved": 302}[self.path]
            self.send_response(code)
            if code == 302:
                self.send_header("Location", "/ok")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", got
    httpd.shutdown()
    httpd.server_close()
    thread.join(EVENTUALLY)


def test_notify_url_posts_and_only_2xx_is_success(server: tuple[str, list[tuple[str, bytes]]]) -> None:
    base, got = server
    HttpHook(f"{base}/ok")(change("d"))
    with pytest.raises(HookFailed, match="answered 500"):
        HttpHook(f"{base}/fail")(change("d"))
    with pytest.raises(HookFailed, match="answered 302"):
        HttpHook(f"{base}/moved")(change("d"))  # no redirect followed
    assert got == [("/ok", b"{}"), ("/fail", b"{}"), ("/moved", b"{}")]
    with pytest.raises(ValueError, match="http:// or https://"):
        HttpHook("file:///etc/passwd")
