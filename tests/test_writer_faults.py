"""Measurements are never lost (issue 36, part 2): a baseline or a history store that cannot be
written ends the session with one line and the writers' exit status (6), and every other
writer's work is there: the final results.json and summary.md, the history entry, holding the
measured cells.

The faults are injected into a real session (stand-in workers, tests/stub_worker.py) by a
conftest of the inner session that replaces the baseline store's writer or lock, so they are
tested on any machine, not only where a small file system can be mounted; and a baselines
directory under a regular file, which any account (root too) cannot create.
"""

import json
import os
import stat

import pytest

from pytest_mxperf.history.store import open_store
from pytest_mxperf.model import jsonio

CELLS = """
import pytest

@pytest.mark.mxperf_grid(models=("lenet", "alexnet"), batch_sizes=(8,))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""

#: the inner session's conftest: the fault named by MXPERF_TEST_FAULT, in the baseline store
FAULTS = """
import errno, os
import filelock
from pytest_mxperf.store import baseline_store

FAULT = os.environ.get("MXPERF_TEST_FAULT")

def _raise(err):
    def write(path, text):
        raise OSError(err, os.strerror(err), str(path))
    return write

class _Stuck:
    def __init__(self, path):
        self.path = path
    def __enter__(self):
        raise filelock.Timeout(self.path)
    def __exit__(self, *exc):
        return False

if FAULT == "no-space":
    baseline_store.atomic_write_text = _raise(errno.ENOSPC)
elif FAULT == "read-only":
    baseline_store.atomic_write_text = _raise(errno.EROFS)
elif FAULT == "lock-timeout":
    baseline_store._lock = lambda path: _Stuck(str(path) + ".lock")
"""


@pytest.fixture
def session(pytester, make_stub_python, monkeypatch, tmp_path):
    history = tmp_path / "history.sqlite"
    monkeypatch.setenv("MXPERF_HISTORY", str(history))
    pytester.makepyfile(test_cells=CELLS)
    pytester.makeconftest(FAULTS)

    def run(fault=None, baselines=None, store=None):
        if fault:
            monkeypatch.setenv("MXPERF_TEST_FAULT", fault)
        rep = pytester.path / "rep"
        args = ["-p", "no:cacheprovider", "-m", "cpu", "--perf-ctx", "cpu", "--perf-machine", "box",
                "--perf-baselines-dir", str(baselines or pytester.path / "bl"), "--perf-update-baselines",
                "--perf-python", make_stub_python("now"), "--perf-report", str(rep)]
        if store:
            args += ["--perf-store", store]
        r = pytester.runpytest_subprocess(*args)
        return r, rep, history
    return run


def _kept_everything(r, rep, history, cause):
    out = r.stdout.str() + r.stderr.str()
    assert r.ret == 6, out                                       # EXIT_WRITER, documented
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    lines = [ln for ln in out.splitlines() if cause in ln]
    assert lines, out                                            # the cause, named
    doc = json.loads((rep / "results.json").read_text())
    assert doc["session"]["complete"] is True                    # the final file, not the interim
    assert {r["key"].split("/")[1] for r in doc["records"]} == {"lenet", "alexnet"}
    assert all(r["runs"] for r in doc["records"])                # holding the measured processes
    summary = (rep / "summary.md").read_text()
    assert "in progress" not in summary and "2 cell(s) measured" in summary
    return out, doc


@pytest.mark.parametrize("fault, cause", [("no-space", "No space left on device"),
                                          ("read-only", "Read-only file system"),
                                          ("lock-timeout", "lock")])
def test_a_baseline_that_cannot_be_written_loses_nothing_else(session, fault, cause):
    r, rep, history = session(fault)
    out, doc = _kept_everything(r, rep, history, cause)
    with open_store(str(history)) as s:
        assert s.session_ids() == [doc["session"]["id"]]         # the history entry
    # the headline does not tell the user to do what just failed
    assert not any("record one with --perf-update-baselines" in ln for ln in out.splitlines()[:5]), out


def test_a_baselines_directory_under_a_regular_file(session, pytester):
    blocker = pytester.path / "not-a-dir"
    blocker.write_text("x")
    r, rep, history = session(baselines=blocker / "bl")
    _kept_everything(r, rep, history, "baseline")
    with open_store(str(history)) as s:
        assert len(s.session_ids()) == 1


def test_a_history_store_that_cannot_be_written_loses_nothing_else(session, pytester):
    blocker = pytester.path / "not-a-dir"
    blocker.write_text("x")
    r, rep, _ = session(store=str(blocker / "h.sqlite"))
    _kept_everything(r, rep, None, "history")
    assert list((pytester.path / "bl").glob("*.json"))          # the baseline was written


# ----------------------------------------------------------------------------- files

def test_a_written_file_keeps_the_umasks_mode(tmp_path):
    old = os.umask(0o022)
    try:
        import importlib
        importlib.reload(jsonio)  # reads the umask as it loads
        jsonio.write_json(tmp_path / "a.json", {"x": 1})
    finally:
        os.umask(old)
        importlib.reload(jsonio)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644


def test_a_killed_writers_temporary_file_is_swept_and_a_live_ones_is_not(tmp_path):
    target = tmp_path / "m.json"
    dead = tmp_path / f".m.json.{2 ** 22 + 12345}.abc.tmp"   # no such pid (above pid_max's default)
    live = tmp_path / f".m.json.{os.getpid()}.def.tmp"
    dead.write_text("{")
    live.write_text("{")
    assert jsonio.sweep_temporaries(target) == 1
    assert not dead.exists() and live.exists()
