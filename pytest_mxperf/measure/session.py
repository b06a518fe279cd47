"""The measuring session, without pytest, split by role:

* ``SessionContext``: frozen, made once when the session starts (the settled options, the
  machine, its baseline, the environment, how cells are compared) and once more with the
  plan when collection ends;
* ``Ledger``: append-only: the cells' records (``CellRecord``), what the tests decided of
  them (``FloorCheck``), figures shown (``Finding``), skips and the session's events (not
  reached, no GPU, a duet's fallback, slow tests deselected);
* ``Clock``: the deadline and the progress line, from the one cost model (``planning.py``);
* ``Scheduler`` (``scheduler.py``): how cells are measured: worker processes bracketed by
  the machine probe, cells shared between tests, workers of several cells, A/B pairs, and
  confirmation.

``PerfSession`` holds one of each. Each record keeps how to measure its cell again
(``remeasure``): the end of the session uses it to settle suspects, whatever kind of worker
measured the cell.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.measure import planning
from pytest_mxperf.measure.ledger import (  # noqa: F401 - the session's records, by their usual names
    DUET_FALLBACK,
    NO_GPU,
    NOT_REACHED,
    CellRecord,
    Event,
    Finding,
    FloorCheck,
    Ledger,
    merge_records,
)
from pytest_mxperf.measure.planning import Plan
from pytest_mxperf.measure.scheduler import Scheduler
from pytest_mxperf.model.measurement import RunResult
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.store.baseline_store import BaselineStore
from pytest_mxperf.store.baselines import Baseline

# ----------------------------------------------------------------------------- the context

@dataclasses.dataclass(frozen=True)
class RecordedSetup:
    """Baseline mode: the setup this machine's baseline recorded, rebuilt to settle suspects in
    a duet against it (``outcome/comparators.BaselineComparator``): its MXNet install (the
    recorded ``NAME==VERSION`` rebuilt in a cached venv, checked to be the recorded build) and,
    per cell, its recorded variables (``Baseline.recorded_env``). ``status``:

    * ``ready``: ``python`` runs it; suspects are settled against it;
    * ``unbuilt``: it could not be built (no package index, a failed install): suspects
      beyond the minimum effect fail as unresolved, never pass;
    * ``other-build``: the rebuilt install is not the recorded build; ``unrecorded``: the
      baseline names several installs or releases: no duet, the baseline's verdicts stand as
      they are;
    * ``unfit``: the baseline names no install and no published wheel fits the release and
      build features it recorded: suspects beyond the minimum effect fail as unresolved.

    ``build_recorded``: False when the baseline recorded no build to check the rebuilt install
    against (its requirement, or the wheel that fits its recorded release, from the package
    index stands for it: each verdict says so). ``line`` is what was said about it when the
    session started."""

    status: str
    requirement: Optional[str] = None
    python: Optional[str] = None
    line: str = ""
    build_recorded: bool = True

    @property
    def ready(self) -> bool:
        return self.status == "ready" and bool(self.python)

    def said(self, paired: bool) -> str:
        """``line`` as the session says it: on the paired path (``Comparison.from_start``) a ready
        setup is what every cell is paired with, not only what suspects are settled against."""
        if paired and self.line.startswith(SETTLED_SAID):
            return PAIRED_SAID + self.line[len(SETTLED_SAID):]
        return self.line


#: how a ready recorded setup's line begins (``measure/comparison.recorded_setup``), and on the paired path
SETTLED_SAID = "mxperf: suspects are settled in a duet against the recorded setup: "
PAIRED_SAID = "mxperf: every cell the baseline records is measured in pairs with the recorded setup from its first process: "


@dataclasses.dataclass(frozen=True)
class Comparison:
    """How the session's cells are compared, decided once (``outcome/comparators.choose``):
    against this machine's baseline (its recorded setup rebuilt, ``setup``, once the session
    knows it measures), or A/B against a reference install (its interpreter; ``requirement``:
    the install a baseline recorded, with ``--perf-reference baseline``)."""

    mode: str = "baseline"            # "baseline" | "ab"
    reference: Optional[str] = None   # the reference interpreter (A/B)
    requirement: Optional[str] = None
    setup: Optional[RecordedSetup] = None
    #: baseline mode: why every cell the baseline records is measured in pairs with the recorded
    #: setup from its first process (``planning.first_path``); "": the cheap path
    from_start: str = ""

    @property
    def ab(self) -> bool:
        return self.mode == "ab"

    @property
    def paired(self) -> bool:
        """Whether cells are measured in pairs from their first process: A/B mode, or a
        session against a baseline on the paired path."""
        return self.ab or bool(self.from_start and self.setup is not None and self.setup.ready)


@dataclasses.dataclass(frozen=True)
class SessionContext:
    """What a session knows before it measures, made once (``PerfSession.begin``; the plan
    laid on when collection ends): never changed while it measures."""

    options: PerfOptions
    environ: Mapping[str, str]
    machine: Mapping[str, Any] = dataclasses.field(default_factory=lambda: {"id": "unknown"})
    baseline: Optional[Baseline] = None
    comparison: Comparison = Comparison()
    plan: Plan = Plan()
    session_id: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)
    started: float = dataclasses.field(default_factory=time.time)

    @property
    def store(self) -> BaselineStore:
        return BaselineStore(self.options.baselines_dir)

    @property
    def kind(self) -> str:
        """The kind of session, as the history store keeps it and the estimate reads it: "ab"
        (two installs), "recording" (--perf-update-baselines), "paired" (against this machine's
        baseline, every cell in pairs with its recorded setup from the first process), "baseline" (against this
        machine's baseline: its suspects may be settled in duets, which an unchanged session on
        a shared VM spends most of its time on) or "suite" (nothing to compare with)."""
        if self.comparison.ab:
            return "ab"
        if self.options.update_baselines:
            return "recording"
        if self.comparison.paired:
            return "paired"
        return "baseline" if self.baseline is not None else "suite"

    @property
    def per_cell(self) -> int:
        """Processes (pairs: duet pairs) a cell gets in the first stage."""
        return (max(1, self.plan.duet_pairs or self.options.duet_pairs) if self.comparison.paired
                else self.options.processes)

    def per_cell_of(self, key: str) -> int:
        """``per_cell`` of cell ``key``: one duet pair for a cell whose own spread of pairs and its
        kind's this machine's history holds (``Plan.first_pairs_of``)."""
        return (max(1, self.plan.first_pairs_of(key, self.options.duet_pairs)) if self.comparison.paired
                else self.options.processes)


# ----------------------------------------------------------------------------- the clock

class Clock:
    """The session's time: the deadline (what is left for measuring), each measuring test's
    duration, the processes measured so far and the progress line. Its costs are the cost
    model's (``planning.py``)."""

    #: seconds between two progress lines
    PROGRESS_EVERY_S = 30.0

    def __init__(self, context: Callable[[], SessionContext], say: Callable[[str], None],
                 now: Callable[[], float] = time.time):
        self._context = context
        self._say = say
        self.now = now  # the wall clock (a replayed session's: the recorded processes' time)
        self._test_seconds: List[Tuple[str, float]] = []  # (node id, seconds) of each test that measured
        self.tests_done: List[Tuple[str, float]] = []  # (node id, seconds) of each measuring test
        self._running: Optional[Tuple[str, float]] = None  # the measuring test under way, since when
        self.runs_done = 0  # processes measured (a duet pair's two sides: one)
        self._runs_by_cell: Dict[str, int] = {}  # the same, by cell
        self._last_progress = time.monotonic()
        #: the measuring tests are over (the end of the session settles suspects, saying its own
        #: progress): what is measured then is not counted as the plan's cells
        self.settling = False
        #: the test functions of grids whose first test started under --perf-deadline: it
        #: measured every cell of the grid (``past_deadline``)
        self._grids_started: set = set()

    @property
    def started(self) -> float:
        return self._context().started

    def gone(self) -> float:
        return self.now() - self.started

    def measuring_left(self) -> Optional[float]:
        """Seconds left for measuring before --perf-deadline less its reserve (None: no deadline)."""
        deadline = self._context().options.deadline
        if deadline is None:
            return None
        return deadline * (1.0 - planning.DEADLINE_RESERVE) - self.gone()

    def past_deadline(self, nodeid: str = "", grid: bool = False) -> Optional[str]:
        """Why the measuring test ``nodeid`` must not start (it would end past the deadline,
        less DEADLINE_RESERVE), or None. It is expected to take the longest test of its own
        function so far (the other parameters of one test: a precision test's float16 after
        its int8), else the longest test so far, else the plan's estimate before any ran: the
        longest of all would keep a test that skips in seconds from its turn behind a
        training test of minutes. A test of a grid whose cells share worker processes
        (``grid``) is never late once a test of its grid started (that one measured every
        cell of it), and the first is expected to take the whole grid, what the plan expects
        of it when that is more (``planning.grid_seconds``)."""
        ctx = self._context()
        if ctx.options.deadline is None:
            return None
        function = planning.test_function(nodeid)
        if grid and function in self._grids_started:
            return None
        own = [t for n, t in self._test_seconds if function and planning.test_function(n) == function]
        expected = max(own or [t for _, t in self._test_seconds], default=ctx.plan.test_seconds or 0.0)
        if grid:
            expected = max(expected, planning.grid_seconds(ctx.plan, nodeid))
        elapsed = self.gone()
        budget = ctx.options.deadline * (1.0 - planning.DEADLINE_RESERVE)
        if elapsed + expected <= budget:
            if grid:
                self._grids_started.add(function)
            return None
        return (f"not reached before --perf-deadline: {elapsed:.0f} s gone, a test takes about {expected:.0f} s, "
                f"{budget:.0f} s of {ctx.options.deadline:g} s are for measuring")

    def test_started(self, nodeid: str, at: float) -> None:
        """A measuring test started at ``at`` (``time.monotonic``): the progress line counts
        its time so far against its estimate until ``test_took``."""
        self._running = (nodeid, at)

    def test_took(self, seconds: float, nodeid: str = "", measured: bool = True) -> None:
        """A measuring test ended after ``seconds`` (``measured``: it measured a cell)."""
        self._running = None
        if measured:
            self._test_seconds.append((nodeid, seconds))
        if nodeid:
            self.tests_done.append((nodeid, seconds))

    def progress_line(self) -> str:
        """How far the session is: cells measured (a cell's processes done over the processes
        a cell gets), cells left, and the time left (``planning.time_left``: the plan's
        estimate of the tests not done, scaled by how the tests done went against theirs)."""
        ctx = self._context()
        gone = self.gone()
        # a cell counts once it has the processes a cell gets: one that runs more (12 process
        # pairs of a distributed cell in A/B mode) is still one cell
        done = (sum(min(1.0, n / ctx.per_cell_of(k)) for k, n in self._runs_by_cell.items()) if self._runs_by_cell
                else self.runs_done / ctx.per_cell)
        expected = ctx.plan.cells
        parts = [f"mxperf: {done:.0f} of {expected} cell(s) measured" if expected
                 else f"mxperf: {done:.0f} cell(s) measured", f"{gone / 60:.1f} min gone"]
        running = (self._running[0], time.monotonic() - self._running[1]) if self._running else None
        left = planning.time_left(ctx.plan, self.tests_done, gone, running) if expected else None
        if left is not None:
            parts.append(f"about {left / 60:.1f} min left")
        return ", ".join(parts)

    def measured(self, results: Sequence[RunResult], paired: bool) -> None:
        """``results`` measured (``paired``: a duet or process pair's two sides count as one);
        the progress line, at most every PROGRESS_EVERY_S. Nothing once ``settling``."""
        if self.settling:
            return
        # paired: (candidate, reference) after one another, of one cell or several (one duet pair of a grid)
        self.runs_done += len(results[::2]) if paired else len(results)
        for r in results[::2] if paired else results:
            key = r.workload.key()
            self._runs_by_cell[key] = self._runs_by_cell.get(key, 0) + 1
        now = time.monotonic()
        if self._context().plan.cells and now - self._last_progress >= self.PROGRESS_EVERY_S:
            self.say_progress(now)

    def say_progress(self, now: Optional[float] = None) -> None:
        self._last_progress = time.monotonic() if now is None else now
        self._say(self.progress_line())



# ----------------------------------------------------------------------------- the session

class PerfSession:
    """One pytest session's measuring, by role: ``context`` (frozen; replaced, never changed,
    when the session begins and when it is planned), ``ledger`` (append-only), ``clock`` and
    ``scheduler``. ``say``: a line on the terminal now; ``on_results``: the plugin's hook on
    the results document."""

    def __init__(self, options: PerfOptions, environ: Optional[Mapping[str, str]] = None, *,
                 on_results: Optional[Callable[[Dict[str, Any]], None]] = None,
                 say: Optional[Callable[[str], None]] = None,
                 given_machine_state: Optional[Callable[[str], Optional[Dict[str, Any]]]] = None):
        self.context = SessionContext(options, dict(os.environ if environ is None else environ))
        self.ledger = Ledger()
        self.say: Callable[[str], None] = say or (lambda line: None)
        self.on_results: Callable[[Dict[str, Any]], None] = on_results or (lambda doc: None)
        self.clock = Clock(lambda: self.context, self.say)
        self.scheduler = Scheduler(lambda: self.context, self.ledger, self.clock,
                                   given_machine_state or (lambda part: None))

    def begin(self, machine: Mapping[str, Any], baseline: Optional[Baseline], options: PerfOptions,
              comparison: Comparison) -> None:
        """The context as the session starts: the machine, its baseline, the options as settled
        once the baseline is known, and how cells are compared."""
        self.context = dataclasses.replace(self.context, machine=dict(machine), baseline=baseline, options=options,
                                           comparison=comparison)

    def planned(self, plan: Plan, setup: Optional[RecordedSetup] = None, from_start: str = "") -> None:
        """The plan, when collection ends (before any test measures), and in baseline mode the
        recorded setup, rebuilt then (``measure/comparison.recorded_setup``), and why every cell is
        measured in pairs with it from the first process ("": the cheap path)."""
        comparison = self.context.comparison
        if setup is not None:
            comparison = dataclasses.replace(comparison, setup=setup, from_start=from_start)
        self.context = dataclasses.replace(self.context, plan=plan, comparison=comparison)
