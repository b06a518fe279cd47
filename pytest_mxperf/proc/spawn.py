"""Parent-side process spawning: the one place that starts, supervises and kills children.

Used by the runner (one worker per measurement) and by the distributed launcher (the
ps-lite roles of a cluster). Every child

* is started with ``subprocess`` (never a bare fork: MXNet reads its environment at import),
  in its own session, so its whole process group can be killed;
* dies with the process that started it: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, then a check
  that its parent is still the one that started it (a parent that died in between would never
  send the signal): armed by the child itself, first thing, where it runs one of this
  package's modules (started by vfork, about 2 ms of the parent's time), else between fork and
  exec (``parent_death``). The signal is per spawning *thread* and is not inherited by
  grandchildren, so every level (pytest -> launcher -> roles) sets it where it starts its own
  children;
* writes its output to a file, never a pipe that could fill up and block it.

A killed parent can clean nothing up, so work directories carry their owner's pid and
``sweep_stale_workdirs`` (called at the start of a session) removes those whose owner is
gone. Caches that must outlive a session (built venvs, a CUDA JIT cache, profile traces)
live elsewhere (``cache_dir``).
"""

from __future__ import annotations

import hashlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Mapping, Optional, Sequence

from pytest_mxperf.model.jsonio import pid_alive
from pytest_mxperf.proc import parent_death
from pytest_mxperf.workers.op_cache import cache_root

WORKDIR_PREFIX = "mxperf-"
OWNER_FILE = ".owner-pid"
TAIL_LINES = 15


def package_path() -> str:
    """A directory holding only this package (a symlink to it), for the PYTHONPATH of workers.

    Workers may run under another interpreter (an A/B reference venv) that does not have
    pytest-mxperf installed. Putting the package's parent directory on their PYTHONPATH
    would, for an installed wheel, put this interpreter's whole site-packages (its numpy,
    its mxnet) in front of theirs; this directory exposes ``pytest_mxperf`` alone."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(str(package).encode()).hexdigest()[:16]
    home = cache_dir("package-path", digest)
    link = home / package.name
    if not (link.is_symlink() and link.resolve() == package):
        tmp = home / f".{package.name}.{os.getpid()}"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        tmp.symlink_to(package, target_is_directory=True)
        os.replace(tmp, link)  # atomic: a concurrent session sees the old link or the new one
    return str(home)


def with_package_path(env: Mapping[str, str]) -> dict:
    """``env`` with this package first on PYTHONPATH (workers import ``pytest_mxperf``)."""
    env = dict(env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_path(), env.get("PYTHONPATH")) if p)
    return env


def arms_itself(command: Sequence[str]) -> bool:
    """Whether ``command`` runs one of this package's modules (``… -m pytest_mxperf.…``): its
    process arms its parent-death signal itself (``parent_death.arm_from_environment``, run by
    the package's ``__init__``)."""
    args = [str(a) for a in command]
    return any(a == "-m" and b.startswith("pytest_mxperf.") for a, b in zip(args, args[1:]))


def start(command: Sequence[str], *, env: Optional[Mapping[str, str]] = None, log_path: Path,
          cwd: Optional[str] = None, pass_fds: Sequence[int] = ()) -> subprocess.Popen:
    """Start ``command`` in its own session, output to ``log_path``, dying with this process.
    Its environment is ``env`` (default ``os.environ``) as ``child_env`` passes it: never a
    credential. ``pass_fds``: descriptors the child keeps (a resident worker's control pipes).
    A child that runs one of this package's modules arms its parent-death signal itself
    (``arms_itself``): no ``preexec_fn``, so ``subprocess`` starts it by vfork."""
    from pytest_mxperf.proc.child_env import child_env
    env = child_env(env)
    if arms_itself(command):
        env[parent_death.PARENT_PID_VAR], preexec = str(os.getpid()), None
    else:
        env.pop(parent_death.PARENT_PID_VAR, None)
        preexec = parent_death.preexec(os.getpid())
    with open(log_path, "wb") as log:
        return subprocess.Popen(list(command), env=env, cwd=cwd,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, pass_fds=tuple(pass_fds),
                                preexec_fn=preexec)


def wait(proc: subprocess.Popen, timeout: Optional[float] = None) -> int:
    """``proc.wait(timeout)`` that returns as soon as the child exits. Popen.wait with a
    timeout polls, sleeping up to 50 ms between looks: every process the suite starts would
    end that much late (about 25 ms on average, a quarter of a stand-in worker's life). Here
    the kernel says when (a pidfd, Linux 5.3 and later: readable once the child has exited),
    then the child is reaped; elsewhere Popen.wait as it is. Raises subprocess.TimeoutExpired
    as Popen.wait does."""
    if timeout is None or proc.returncode is not None or not hasattr(os, "pidfd_open"):
        return proc.wait(timeout=timeout)
    try:
        fd = os.pidfd_open(proc.pid)
    except OSError:  # reaped already, or no pidfd here
        return proc.wait(timeout=timeout)
    try:
        ready, _, _ = select.select([fd], [], [], max(timeout, 0.0))
    finally:
        os.close(fd)
    if not ready:
        raise subprocess.TimeoutExpired(proc.args, timeout)
    return proc.wait()


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def describe_returncode(rc: Optional[int]) -> str:
    if rc is None:
        return "still running"
    if rc < 0:
        return f"killed by {signal_name(-rc)}"
    return f"exit code {rc}"


def tail(path: Path, n: int = TAIL_LINES) -> List[str]:
    """The last ``n`` non-blank lines of a log file (from its last 16 KiB)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 16384))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return lines[-n:]


def kill_process_tree(pid: int, pgid: Optional[int] = None, grace: float = 0.0) -> None:
    """Kill a child, its process group and any descendant that left the group."""
    try:
        import psutil
        try:
            descendants = psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            descendants = []
    except ImportError:  # pragma: no cover
        psutil, descendants = None, []
    if pgid is not None:
        try:
            os.killpg(pgid, signal.SIGTERM if grace else signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if grace:
            time.sleep(grace)
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for proc in descendants:
        try:
            proc.kill()
        except Exception:
            pass
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if psutil is not None and descendants:
        psutil.wait_procs(descendants, timeout=5)


class WorkDir:
    """A temporary directory owned by this process; removed on exit, swept if we are killed."""

    def __init__(self, prefix: str = WORKDIR_PREFIX, base: Optional[str] = None):
        self.path = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base))
        (self.path / OWNER_FILE).write_text(str(os.getpid()))

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def sweep_stale_workdirs(base: Optional[str] = None, prefix: str = WORKDIR_PREFIX) -> List[str]:
    """Remove work directories whose owner process is gone (a killed session's leftovers)."""
    base_dir = Path(base or tempfile.gettempdir())
    removed = []
    for d in base_dir.glob(prefix + "*"):
        owner = d / OWNER_FILE
        try:
            pid = int(owner.read_text().strip())
        except (OSError, ValueError):
            continue  # not ours, or not finished being created
        if pid != os.getpid() and not pid_alive(pid):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(str(d))
    return removed


def cache_dir(*parts: str) -> Path:
    """A persistent cache directory: ``$MXPERF_CACHE_DIR``, else ``pytest-mxperf`` in
    ``$XDG_CACHE_HOME`` (default ``~/.cache``)."""
    path = Path(cache_root()).joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def python_command(python: Optional[str], module: str) -> List[str]:
    return [python or sys.executable, "-m", module]
