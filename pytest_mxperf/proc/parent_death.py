"""A child dies with the process that started it: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, then a
check that its parent is still the one that started it (a parent that died before the signal
was armed would never send it). Linux only; elsewhere nothing is armed.

Two places arm it (``spawn.start`` chooses):

* **the child itself**, for a command that runs one of this package's modules (``-m
  pytest_mxperf.…``: every worker, stand-ins that speak the protocol): ``spawn.start`` puts its
  own pid in ``PARENT_PID_VAR`` and the package's ``__init__``, the first code of the package
  the child runs, calls ``arm_from_environment`` (the variable is removed there, so the
  child's own children never inherit it). The child is then started without a ``preexec_fn``,
  which lets ``subprocess`` use vfork instead of a full fork of the parent, a tenth or less of
  the parent's time a start (docs/how-it-measures.md, "What a run does", *Failures are cells
  too*); a session or a test run starts hundreds;
* **between fork and exec** (``preexec``) for any other command, as before.

A worker interpreter may be a wrapper that runs Python without ``exec`` (a shell script that
sets a variable, then calls python): the worker's parent is then the wrapper, not the process
that started it. Armed from the environment, a worker whose named parent is still one of its
ancestors arms the signal for its own parent and also watches the named one (a pidfd, in a
daemon thread that waits in ``select``: no CPU while it waits), killing itself when it ends;
one whose named parent is no ancestor (it died, and the worker was adopted) exits at once.

Imports nothing but the standard library (and, where there is no pidfd, the package's own
``pid_alive``): every worker imports this module."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
from typing import Callable, List, Optional

#: the variable through which ``spawn.start`` tells a child of this package its parent's pid
PARENT_PID_VAR = "MXPERF_PARENT_PID"
_PR_SET_PDEATHSIG = 1

try:  # Linux only; elsewhere children simply do not get the parent-death signal
    _PRCTL = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover
    _PRCTL = None


def arm(parent_pid: int, *, through_wrapper: bool = False) -> None:
    """Arm the parent-death signal in this process and exit (status 1) at once if its parent
    is no longer ``parent_pid``; with ``through_wrapper``, a ``parent_pid`` that is a further
    ancestor (a wrapper between them) is watched instead (``_killed_when_gone``). Safe between
    fork and exec without ``through_wrapper``: no allocation-heavy work."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == parent_pid:
        return
    if through_wrapper and parent_pid in ancestors():
        _killed_when_gone(parent_pid)
        return
    os._exit(1)  # the parent died before the signal was armed


def ancestors(limit: int = 16) -> List[int]:
    """This process's parent, its parent's parent, ... up to init (excluded), from ``/proc``;
    as far as it can be read."""
    out: List[int] = []
    pid = os.getppid()
    while pid > 1 and len(out) < limit:
        out.append(pid)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def _killed_when_gone(pid: int) -> None:
    """SIGKILL this process when ``pid`` ends: a daemon thread waits on its pidfd (Linux 5.3
    and later), else looks every half second."""
    import threading
    try:
        fd: Optional[int] = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None

    def watch() -> None:
        if fd is not None:
            import select
            select.select([fd], [], [])
        else:
            import time

            from pytest_mxperf.model.jsonio import pid_alive
            while pid_alive(pid):
                time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=watch, name="mxperf-parent-watch", daemon=True).start()


def preexec(parent_pid: int) -> Callable[[], None]:
    """``arm`` as a ``preexec_fn``: for a child that cannot arm itself."""
    def armed() -> None:  # runs in the child between fork and exec
        arm(parent_pid)
    return armed


def arm_from_environment() -> Optional[int]:
    """Arm for the parent ``PARENT_PID_VAR`` names, removing the variable; the pid armed for,
    or None where the variable is not set (a process no ``spawn.start`` started to arm itself)."""
    value = os.environ.pop(PARENT_PID_VAR, None)
    if value is None:
        return None
    try:
        parent = int(value)
    except ValueError:
        return None
    arm(parent, through_wrapper=True)
    return parent
