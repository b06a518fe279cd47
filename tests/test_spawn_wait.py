"""``spawn.wait``: a worker's end is seen when the kernel says it exited, not at the next of
Popen.wait's polls (sleeps of up to 50 ms between looks, about 25 ms late on average: a
quarter of a stand-in worker's life, and every process a session starts)."""

import subprocess
import sys
import time

import pytest

from pytest_mxperf.proc import spawn


def _start(tmp_path, code):
    return spawn.start([sys.executable, "-c", code], log_path=tmp_path / "log")


def _no_polling(monkeypatch):
    def polled(_seconds):
        raise AssertionError("waited by polling with sleeps")
    monkeypatch.setattr(time, "sleep", polled)


def test_a_child_that_exits_is_reaped_with_its_status_without_polling(tmp_path, monkeypatch):
    proc = _start(tmp_path, "import time; time.sleep(0.2); raise SystemExit(3)")
    _no_polling(monkeypatch)
    assert spawn.wait(proc, 30) == 3
    assert proc.returncode == 3


def test_popen_wait_with_a_timeout_polls(tmp_path, monkeypatch):
    # the control: what spawn.wait replaces fails the same check
    proc = _start(tmp_path, "import time; time.sleep(0.2)")
    _no_polling(monkeypatch)
    with pytest.raises(AssertionError, match="polling"):
        proc.wait(timeout=30)
    monkeypatch.undo()
    proc.wait()


def test_a_child_still_running_at_the_timeout_raises_and_is_not_reaped(tmp_path):
    proc = _start(tmp_path, "import time; time.sleep(60)")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            spawn.wait(proc, 0.05)
        assert proc.returncode is None and proc.poll() is None
    finally:
        spawn.kill_process_tree(proc.pid, proc.pid)
        proc.wait()
    assert proc.returncode is not None


def test_a_child_reaped_already_gives_its_status(tmp_path):
    proc = _start(tmp_path, "raise SystemExit(5)")
    proc.wait()
    assert spawn.wait(proc, 1) == 5
