"""No orphans: a worker dies with the process that started it, even after kill -9 of that
process, and the next session sweeps the work directory the killed one could not remove."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

import stand_ins

from pytest_mxperf.proc import parent_death, spawn

PARENT = textwrap.dedent("""
    import json, sys, time
    from pytest_mxperf.proc import spawn
    with spawn.WorkDir(base=sys.argv[1]) as d:
        proc = spawn.start(json.loads(sys.argv[2]), log_path=d / "w.log")
        print(proc.pid, d, flush=True)
        time.sleep(600)
""")


def _sleeping_children(tmp_path):
    """A child that cannot arm itself (armed between fork and exec), and one that runs a module
    of the package (a stand-in throughput worker whose cell sleeps: armed by its own import)."""
    stub = stand_ins.stub_python(tmp_path / "python", sleep_models={"alexnet": 600})
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"workload": {"model": "alexnet", "contexts": ["cpu:0"]}}))
    wrapper = tmp_path / "wrapper"  # an interpreter wrapper that runs Python without exec
    wrapper.write_text(f"#!/bin/sh\n{stub} \"$@\"\n")
    wrapper.chmod(0o755)
    worker = ["-m", "pytest_mxperf.workers.throughput", str(spec), str(tmp_path / "result.json")]
    return {"preexec": [sys.executable, "-c", "import time; time.sleep(600)"],
            "itself": [stub, *worker], "itself-through-a-wrapper": [str(wrapper), *worker]}


def _gone(pid, within=10.0):
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _python_under(pid, within=20.0):
    """The stand-in's Python process at or under ``pid`` (the wrapper runs it as a child)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            procs = [psutil.Process(pid)] + psutil.Process(pid).children(recursive=True)
            found = [p for p in procs if any("stub_worker.py" in a for a in p.cmdline())]
        except psutil.Error:
            found = []
        if found:
            return found[0].pid
        time.sleep(0.05)
    raise AssertionError("the stand-in worker never started")


@pytest.mark.parametrize("armed", ["preexec", "itself", "itself-through-a-wrapper"])
def test_a_worker_dies_with_its_killed_parent_and_its_workdir_is_swept(tmp_path, armed):
    env = spawn.with_package_path(os.environ)
    (tmp_path / "work").mkdir()
    command = _sleeping_children(tmp_path)[armed]
    assert spawn.arms_itself(command) == armed.startswith("itself")
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path / "work"), json.dumps(command)],
                              stdout=subprocess.PIPE, env=env, text=True)
    try:
        worker_pid, workdir = parent.stdout.readline().split()
        worker_pid = int(worker_pid)
        assert psutil.pid_exists(worker_pid)
        if armed != "preexec":
            python = _python_under(worker_pid)
            time.sleep(0.5)  # its first import (arming) is done long before its cell's sleep ends
            assert psutil.Process(python).status() != psutil.STATUS_ZOMBIE  # armed and running, not refused
            if armed == "itself-through-a-wrapper":
                assert psutil.Process(python).ppid() == worker_pid  # the wrapper is its parent
            worker_pid = python
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _gone(worker_pid), "the worker outlived its SIGKILLed parent"
    finally:
        parent.kill()
        parent.wait()
    # the killed parent could not remove its work directory; the next session does
    assert os.path.isdir(workdir)
    removed = spawn.sweep_stale_workdirs(str(tmp_path / "work"))
    assert removed == [workdir] and not os.path.exists(workdir)


def test_the_sweep_leaves_live_owners_and_foreign_directories_alone(tmp_path):
    with spawn.WorkDir(base=str(tmp_path)) as mine:
        foreign = tmp_path / "mxperf-not-ours"
        foreign.mkdir()
        assert spawn.sweep_stale_workdirs(str(tmp_path)) == []
        assert mine.exists() and foreign.exists()


def test_a_child_whose_parent_died_before_the_signal_was_armed_exits():
    # preexec re-checks the parent: started for a parent pid that is not its parent, it exits
    preexec = parent_death.preexec(parent_pid=1)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=preexec)
    assert proc.wait(timeout=30) == 1


def test_a_package_child_whose_parent_died_before_it_armed_exits_and_its_children_do_not_inherit_the_pid():
    # a child that arms itself (the package's __init__) re-checks the parent likewise
    env = dict(spawn.with_package_path(os.environ), **{parent_death.PARENT_PID_VAR: "1"})
    code = "import pytest_mxperf, time; time.sleep(60)"
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=30).returncode == 1
    # armed for its real parent, it runs, and the variable is gone before its own children start
    env[parent_death.PARENT_PID_VAR] = str(os.getpid())
    code = ("import pytest_mxperf, os, subprocess, sys; "
            "print(os.environ.get('MXPERF_PARENT_PID'), subprocess.run([sys.executable, '-c', "
            "'import os; print(os.environ.get(\"MXPERF_PARENT_PID\"))'], capture_output=True, text=True).stdout.strip())")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert (r.returncode, r.stdout.split()) == (0, ["None", "None"]), r.stderr


def test_only_a_command_that_runs_a_module_of_the_package_arms_itself():
    assert spawn.arms_itself(["/venv/bin/python", "-m", "pytest_mxperf.workers.throughput", "s.json", "r.json"])
    assert spawn.arms_itself(["/stub/python", "-m", "pytest_mxperf.measure.cluster", "s.json", "r.json"])
    assert not spawn.arms_itself([sys.executable, "-c", "import time; time.sleep(1)"])
    assert not spawn.arms_itself([sys.executable, "-m", "pytest", "-m", "cpu"])
    assert not spawn.arms_itself(["/bin/true", "pytest_mxperf.workers.throughput"])


def test_a_package_child_is_started_without_a_preexec_function_and_told_its_parent(tmp_path, monkeypatch):
    # no preexec_fn: what lets subprocess start it by vfork instead of copying the parent
    seen = []
    real = subprocess.Popen

    def popen(args, **kw):
        seen.append((kw["preexec_fn"], kw["env"].get(parent_death.PARENT_PID_VAR)))
        return real(args, **kw)
    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setenv(parent_death.PARENT_PID_VAR, "12345")  # inherited from a parent: never passed on
    env = spawn.with_package_path(os.environ)
    spawn.start([sys.executable, "-m", "pytest_mxperf.proc.parent_death"], env=env, log_path=tmp_path / "a").wait()
    spawn.start([sys.executable, "-c", "pass"], env=env, log_path=tmp_path / "b").wait()
    (none, pid), (preexec, other) = seen
    assert none is None and pid == str(os.getpid())
    assert callable(preexec) and other is None
