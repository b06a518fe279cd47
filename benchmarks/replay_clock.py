"""A replay whose verdicts do not depend on how fast this machine replays.

The end of a session reads the wall clock in two places that change what it decides:

* ``outcome/judging.py judge_baseline``: confirming suspects may take
  ``budget = max(CONFIRM_FLOOR_S, time.time() - session.started)`` less what confirming
  took so far (``spent``); ``confirmation_plan`` cuts the suspects' processes to it;
* ``outcome/ab_judging.py within_deadline``: the second stage is cut to what is left of
  ``--perf-deadline`` (only with a deadline; replays run without one).

A replayed session is a fraction of a second to a few seconds of CPU, so the budget is
CONFIRM_FLOOR_S on a fast machine and could be more on a slow one, and ``spent`` is a few
milliseconds that vary from run to run. ``fixed_clock()`` stands a clock that never moves
in for the ``time`` module those modules (and ``measure/session.py``, which stamps
``session.started``) see: the session starts at 0, no time passes while it confirms, so the
budget is exactly CONFIRM_FLOOR_S (60 s) and ``spent`` stays 0, on any machine. Nothing
else is changed: ``monotonic``, ``perf_counter`` and the rest are the real ``time`` module's.

The names may move (the session API is being refactored): a module or attribute that is
not there is skipped, with one line saying so (``fixed_clock(say=print)``), and the
patches that were made are listed in ``FixedClock.patched``. ``budgets`` holds every budget
``judging.confirmation_plan`` was given while the clock was held (watched, not changed),
so a run can show that it was CONFIRM_FLOOR_S.
"""

from __future__ import annotations

import contextlib
import importlib
import time as _time
import types
from typing import Callable, Iterator, List, Optional, Tuple
from unittest import mock

#: (module, attribute) pairs whose clock is held: where the product reads time.time()
TARGETS: Tuple[Tuple[str, str], ...] = (
    ("pytest_mxperf.measure.session", "time"),      # PerfSession.started
    ("pytest_mxperf.outcome.judging", "time"),      # judge_baseline's confirmation budget
    ("pytest_mxperf.outcome.ab_judging", "time"),   # within_deadline (with --perf-deadline)
)
#: what the held clock reads (seconds since the epoch): the session starts there and stays
FROZEN_AT = 0.0


class _FrozenTime(types.ModuleType):
    """The ``time`` module with ``time()`` (and ``time_ns()``) held at FROZEN_AT."""

    def __init__(self):
        super().__init__("time")

    @staticmethod
    def time() -> float:
        return FROZEN_AT

    @staticmethod
    def time_ns() -> int:
        return int(FROZEN_AT * 1e9)

    def __getattr__(self, name):
        return getattr(_time, name)


class FixedClock:
    def __init__(self):
        self.patched: List[str] = []
        self.skipped: List[str] = []
        self.budgets: List[float] = []


def _stand_in(current):
    """What replaces ``current``: the held module for a module, the held function for a
    ``from time import time``."""
    if isinstance(current, types.ModuleType):
        return _FrozenTime()
    if callable(current) and getattr(current, "__name__", "") == "time":
        return _FrozenTime.time
    return None


@contextlib.contextmanager
def fixed_clock(say: Optional[Callable[[str], None]] = None, targets=TARGETS) -> Iterator[FixedClock]:
    clock = FixedClock()
    with contextlib.ExitStack() as stack:
        for module_name, attr in targets:
            where = f"{module_name}.{attr}"
            try:
                module = importlib.import_module(module_name)
            except ImportError as e:
                clock.skipped.append(f"{where}: no module ({e})")
                continue
            current = getattr(module, attr, None)
            stand_in = _stand_in(current) if current is not None else None
            if stand_in is None:
                clock.skipped.append(f"{where}: not there" if current is None
                                     else f"{where}: not a clock ({current!r})")
                continue
            stack.enter_context(mock.patch.object(module, attr, stand_in))
            clock.patched.append(where)
        # watch the confirmation budget (the call is passed on unchanged)
        try:
            judging = importlib.import_module("pytest_mxperf.outcome.judging")
        except ImportError:
            judging = None
        plan = getattr(judging, "confirmation_plan", None) if judging is not None else None
        if plan is not None:
            def watched(suspects, budget_s, *args, **kwargs):
                clock.budgets.append(budget_s)
                return plan(suspects, budget_s, *args, **kwargs)
            stack.enter_context(mock.patch.object(judging, "confirmation_plan", watched))
        else:
            clock.skipped.append("pytest_mxperf.outcome.judging.confirmation_plan: not there (budget not watched)")
        if say is not None:
            for s in clock.skipped:
                say(f"replay_clock: clock not held at {s}; skipped")
        yield clock
