"""No orphans: a worker dies with the process that started it, even after kill -9 of that
process, and the next session sweeps the work directory the killed one could not remove."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

from pytest_mxperf.proc import spawn

PARENT = textwrap.dedent("""
    import sys, time
    from pytest_mxperf.proc import spawn
    with spawn.WorkDir(base=sys.argv[1]) as d:
        proc = spawn.start([sys.executable, "-c", "import time; time.sleep(600)"], log_path=d / "w.log")
        print(proc.pid, d, flush=True)
        time.sleep(600)
""")


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


def test_a_worker_dies_with_its_killed_parent_and_its_workdir_is_swept(tmp_path):
    env = spawn.with_package_path(os.environ)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], stdout=subprocess.PIPE, env=env,
                              text=True)
    try:
        worker_pid, workdir = parent.stdout.readline().split()
        worker_pid = int(worker_pid)
        assert psutil.pid_exists(worker_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert _gone(worker_pid), "the worker outlived its SIGKILLed parent"
    finally:
        parent.kill()
        parent.wait()
    # the killed parent could not remove its work directory; the next session does
    assert os.path.isdir(workdir)
    removed = spawn.sweep_stale_workdirs(str(tmp_path))
    assert removed == [workdir] and not os.path.exists(workdir)


def test_the_sweep_leaves_live_owners_and_foreign_directories_alone(tmp_path):
    with spawn.WorkDir(base=str(tmp_path)) as mine:
        foreign = tmp_path / "mxperf-not-ours"
        foreign.mkdir()
        assert spawn.sweep_stale_workdirs(str(tmp_path)) == []
        assert mine.exists() and foreign.exists()


def test_a_child_whose_parent_died_before_the_signal_was_armed_exits():
    # preexec re-checks the parent: started for a parent pid that is not its parent, it exits
    preexec = spawn._die_with_parent(parent_pid=1)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=preexec)
    assert proc.wait(timeout=30) == 1
