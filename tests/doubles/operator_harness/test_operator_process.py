"""``zkop_testing.operator.OperatorProcess`` when ``zkop run`` does not start: nothing left behind, a clear error.

A failed start kills the process and everything in its process group, removes the log file the harness
made and raises :class:`OperatorStartError` (or :class:`OperatorStartTimeout`) with zkop's output.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from zkop_testing.operator import OperatorProcess, OperatorStartError, OperatorStartTimeout
from zkop_testing.waiting import wait_for


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_zkop_exiting_at_once_raises_its_output_and_leaves_no_log(tmp_path: Path) -> None:
    proc = OperatorProcess(str(tmp_path / "kubeconfig"), "127.0.0.1:1", ["--no-such-flag"])
    with pytest.raises(OperatorStartError) as failed, proc:
        pass
    assert failed.value.returncode == 2 and not isinstance(failed.value, TimeoutError)
    assert "unrecognized arguments: --no-such-flag" in str(failed.value)
    assert "--no-such-flag" in failed.value.output and "--no-such-flag" in proc.log_tail()
    assert not proc.log_path.exists()


def test_a_command_that_cannot_run_raises_and_leaves_no_log(tmp_path: Path) -> None:
    proc = OperatorProcess(str(tmp_path / "kubeconfig"), "127.0.0.1:1", command_prefix=[str(tmp_path / "missing")])
    with pytest.raises(OperatorStartError, match=r"cannot run .*missing"):
        proc.start()
    assert proc.proc is None and not proc.log_path.exists()


def test_not_ready_in_time_kills_the_whole_process_group(tmp_path: Path) -> None:
    # A prefix that never runs zkop, ignores SIGTERM and has a child: only a SIGKILL to the group ends both.
    prefix = ["sh", "-c", 'trap "" TERM; echo waiting forever; sleep 3600 & wait', "--"]
    proc = OperatorProcess(str(tmp_path / "kubeconfig"), "127.0.0.1:1", command_prefix=prefix)
    with pytest.raises(OperatorStartTimeout) as late:
        proc.start(timeout=0.5)
    assert isinstance(late.value, TimeoutError) and "zkop /readyz not met within 0.5 s" in str(late.value)
    assert "waiting forever" in late.value.output
    assert proc.proc is not None and proc.proc.returncode is not None
    pgid = proc.proc.pid
    wait_for(lambda: not group_alive(pgid), message="the sleeping child killed with its parent (and reaped)")
    assert not proc.log_path.exists()
