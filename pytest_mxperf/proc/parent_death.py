"""A child dies with the process that started it: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, then a
check that its parent is still the one that started it (a parent that died before the signal
was armed would never send it). Linux only; elsewhere nothing is armed.

Two places arm it (``spawn.start`` chooses):

* **the child itself**, for a command that runs one of this package's modules (``-m
  pytest_mxperf.…``: every worker, stand-ins that speak the protocol): ``spawn.start`` puts its
  own pid in ``PARENT_PID_VAR`` and the package's ``__init__``, the first code of the package
  the child runs, calls ``arm_from_environment`` (the variable is removed there, so the
  child's own children never inherit it). The child is then started without a ``preexec_fn``,
  which lets ``subprocess`` use vfork: a start held the parent 1.8 ms instead of 18-38 ms (a
  full fork of a parent of 120-420 MiB; 1.7 ms of its CPU instead of 8-18), medians on a
  2-vCPU Zen 3 (``benchmarks/results/spawn-vfork-zen3-2026-11-30.txt``); a session or a test
  run starts hundreds;
* **between fork and exec** (``preexec``) for any other command, as before.

Imports nothing but the standard library's ``os``, ``signal`` and ``ctypes``: every worker
imports this module."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
from typing import Callable, Optional

#: the variable through which ``spawn.start`` tells a child of this package its parent's pid
PARENT_PID_VAR = "MXPERF_PARENT_PID"
_PR_SET_PDEATHSIG = 1

try:  # Linux only; elsewhere children simply do not get the parent-death signal
    _PRCTL = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
except (OSError, AttributeError):  # pragma: no cover
    _PRCTL = None


def arm(parent_pid: int, prctl=None) -> None:
    """Arm the parent-death signal in this process and exit (status 1) at once if its parent
    is no longer ``parent_pid``. Safe between fork and exec: no allocation-heavy work."""
    prctl = _PRCTL if prctl is None else prctl
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        os._exit(1)


def preexec(parent_pid: int) -> Callable[[], None]:
    """``arm`` as a ``preexec_fn``: for a child that cannot arm itself."""
    prctl = _PRCTL

    def armed() -> None:  # runs in the child between fork and exec
        arm(parent_pid, prctl)
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
    arm(parent)
    return parent
