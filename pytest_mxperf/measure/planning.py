"""The session's plan and its one cost model, without pytest: the order a deadline cuts
measuring tests in, what the selection will cost (the estimate said before anything is
measured), what a test, a process, a duet pair or a confirmation costs, and the share of the
deadline kept for the end of the session. Every cost constant of the suite is here. The
plugin hands it plain facts about each collected test (``Planned``) and keeps the hooks.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.judge import thresholds
from pytest_mxperf.model import kinds, stats

#: ``mxperf_priority(n)``: tests of lower n run first under --perf-deadline (unmarked: this)
DEFAULT_PRIORITY = 100
#: markers of cells that resident workers measure (duets in A/B mode), and of those whose
#: worker kind cannot be resident (process pairs), for the plan's estimate: each kind's marker
#: as ``model/kinds.py`` declares it (live views; none of the suite's own kinds is not resident)
DUET_MARKERS = kinds.RESIDENT_MARKERS
PROCESS_PAIR_MARKERS = kinds.PROCESS_PAIR_MARKERS


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the session expects, decided when collection ends: its measuring tests and cells,
    what one test takes, the pairs a cell gets in A/B mode, and the estimate said first."""

    tests: int = 0
    cells: int = 0
    estimate_seconds: Optional[float] = None
    test_seconds: Optional[float] = None
    ab_pairs: int = 0
    #: duet pairs a cell gets before its first look; one for the cells of ``one_pair_cells``
    #: (``first_pairs``)
    duet_pairs: int = 0
    one_pair_cells: Tuple[str, ...] = ()
    deselected_slow: int = 0
    #: what each measuring test is expected to take (node id -> seconds; baseline mode), for
    #: the progress line's time left
    test_estimates: Tuple[Tuple[str, float], ...] = ()
    #: the minimum effects set for some cells (``thresholds.Threshold``: the tests' markers,
    #: then pyproject.toml's patterns in order)
    thresholds: Tuple[Any, ...] = ()
    #: this machine's MXNet speed against the reference's (``Speed``), as the estimate used it
    speed: Any = None
    #: this machine's pooled spread of duet pair log ratios per kind of figure, from its history
    #: store's last sessions: (family, sum of squares, degrees of freedom); the pair-by-pair
    #: rule pools the session's own pairs with it (``comparators.history_spreads``)
    pair_spreads: Tuple[Tuple[str, float, int], ...] = ()

    def first_pairs_of(self, key: str, default: int) -> int:
        """The duet pairs cell ``key`` gets before its first look (``default``: the options'
        when the plan sets none)."""
        return FirstPairs(self.duet_pairs or default, cells=self.one_pair_cells).of(key)


@dataclasses.dataclass(frozen=True)
class Planned:
    """What the plan needs of one collected test."""

    measuring: bool                    # it uses the ``mxperf`` fixture
    priority: Optional[int] = None     # its ``mxperf_priority`` mark, if any
    group: Tuple[str, str] = ("", "")  # (test function, model): breadth first within a priority
    markers: frozenset = frozenset()   # the names of its markers
    #: a grid test's cell (model, batch size, device) and its function: the cells a worker
    #: process measures together (``Measurer._grid_cells``)
    cell: Optional[Tuple[str, int, str]] = None
    function: str = ""
    nodeid: str = ""


def by_priority(tests: Sequence[Planned]) -> List[int]:
    """The order (indices into ``tests``) a deadline should cut measuring tests in: by
    priority (lower first), then breadth first (the first cell of every test function and
    model before the second of any), then collection order; other tests keep their place
    at the front."""
    seen: dict = {}

    def key(i: int):
        t = tests[i]
        if not t.measuring:
            return (-1, 0, i)
        prio = DEFAULT_PRIORITY if t.priority is None else t.priority
        seen[t.group] = seen.get(t.group, -1) + 1
        return (prio, seen[t.group], i)
    ranked = [(key(i), i) for i in range(len(tests))]
    return [i for _, i in sorted(ranked)]


def duet_tests(tests: Sequence[Planned]) -> int:
    """Measuring tests whose cells run as duets in A/B mode."""
    return sum(1 for t in tests if t.measuring and t.markers & set(DUET_MARKERS)
               and not t.markers & set(PROCESS_PAIR_MARKERS))


def ab_pairs(measuring_tests: int) -> int:
    """Process pairs a cell gets in A/B mode: one cell among all of the session's can pass
    BH at its family's share of FDR_Q (outcome/ab_judging.family_q: q_family / n_family =
    FDR_Q / all cells)."""
    return stats.pairs_needed(measuring_tests, thresholds.FDR_Q)


class _MarkerCosts(Mapping):
    """A live view marker -> ``get(kind)`` over the kinds whose cells have processes of their
    own (``Kind.process_seconds``, ``model/kinds.py``), the first kind's for a marker two
    share; ``other``: the value of "" (a test of no such kind), if any."""

    def __init__(self, get, other=None):
        self._get, self._other = get, other
        self._at: Tuple[int, Dict[str, Any]] = (-1, {})

    def _table(self) -> Dict[str, Any]:
        """The table at the registry's version (made again only after it changed)."""
        if self._at[0] != kinds.version():
            out: Dict[str, Any] = {}
            for k in kinds.kinds():
                if k.marker and k.process_seconds is not None:
                    out.setdefault(k.marker, self._get(k))
            if self._other is not None:
                out[""] = self._other
            self._at = (kinds.version(), out)
        return self._at[1]

    def __getitem__(self, marker: str):
        return self._table()[marker]

    def __iter__(self):
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())


#: The constants below were measured on a 2-vCPU AMD EPYC family 25 model 1 (Zen 3), which was
#: the reference machine then; the reference is now a Zen 4 (``data/reference-costs.json``), and
#: the estimate scales every reference second by this machine's speed against the Zen 4's. A
#: Zen 3 second is this many Zen 4 seconds: the default session of one code (62261f8) took
#: 248.5 s on the Zen 4 (2026-11-28) and 347.8 s on the Zen 3 (the reference file of then).
ZEN3_SECOND = 248.5 / 347.8
#: What the estimate says before a session takes, in seconds, for tests the reference session
#: (``load_reference``) did not run: measured on the Zen 3 (mxnet 1.9.1, default options,
#: 2026-11-27), in the reference's seconds (``ZEN3_SECOND``) and, like its seconds, times this
#: machine's ``Speed.factor``.
#: A worker process of several cells: its start, ``import mxnet`` and the probe around it, then
#: each cell's bind, first batch, warm-up (1 s) and timed part (1.5 s): the scoring grid's 5
#: cells in 2 processes took 45.0 s, the latency grid's 2 cells 21.6 s.
SHARED_PROCESS_S = 3.0 * ZEN3_SECOND
SHARED_CELL_S = 3.9 * ZEN3_SECOND
#: a fresh worker process of a test that has processes of its own, by its marker (the first
#: kind's that applies): what its kind declares (``Kind.process_seconds``, model/kinds.py),
#: measured there: a ps-lite cluster launch 13.7 s, a time-to-accuracy run (``training``
#: without a grid) 14.6 s, the input pipeline 5.9 s (4.6-7.0), a multi-device test 5.6 s (weak
#: scaling 9-13 s, a data-parallel check 1.1-1.4 s); other 12.0 s (reduced precision 2-28 s,
#: training throughput 15.6 s, kvstore 6.5-7.9 s)
FRESH_PROCESS_S = _MarkerCosts(lambda k: k.process_seconds * ZEN3_SECOND)
FRESH_OTHER_S = 12.0 * ZEN3_SECOND
#: the session's own start and end (the MXNet probe, judging, reports)
SESSION_S = 5.0 * ZEN3_SECOND
#: markers of tests whose processes are their own, as the estimate names them
FRESH_NAMES = _MarkerCosts(lambda k: k.cost, other="other")


@dataclasses.dataclass(frozen=True)
class Known:
    """This machine's own costs: what its last sessions of the same kind took (the history
    store's ``durations``), as pytest-split keeps test durations."""

    tests: Tuple[Tuple[str, float], ...] = ()  # node id -> the median of its times in those sessions
    overhead: Optional[float] = None           # the median of a session's time outside its tests
    sessions: int = 0
    #: the reference's session was against a baseline: its time outside the tests holds the
    #: suspects it settled at the end (this machine's own sessions are of the session's kind,
    #: and the first line says so of them whatever this is)
    settles: bool = False
    #: whether those sessions ran this session's setup (``same_setup``): True, they all did;
    #: False, none of this machine's sessions of the kind did, and these are of other setups;
    #: None, this session's setup is not known (its MXNet probe failed), so none was asked
    of_setup: Optional[bool] = None

    @property
    def by_test(self) -> dict:
        return dict(self.tests)


def known_from(sessions: Sequence[Any]) -> Known:
    """``Known`` from the history store's ``durations`` rows (newest first). Pure."""
    times: dict = {}
    over = []
    for row in sessions:
        tests = row.get("tests") or {}
        for n, t in tests.items():
            times.setdefault(n, []).append(float(t))
        if row.get("wall_seconds") is not None and tests:
            over.append(max(0.0, float(row["wall_seconds"]) - sum(tests.values())))
    return Known(tuple((n, statistics.median(v)) for n, v in times.items()),
                 statistics.median(over) if over else None, len(sessions))


#: the variable the suite fills from the machine's cores when the user sets none
#: (``topology.worker_env``): a session's probe does not see it, its workers do
SUITE_FILLED = ("OMP_NUM_THREADS",)


def session_setup(probe: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """What decides a session's costs besides the machine and its selection, from its MXNet
    probe (``protocol.runtime_info``): the MXNet version, the Python, and the recorded
    variables the worker interpreter starts with (a wrapper's own included). None when the
    probe read none of it. Pure."""
    if not isinstance(probe, Mapping) or probe.get("status") != "ok" or not probe.get("mxnet_version"):
        return None
    env = probe.get("worker_env")
    return {"mxnet_version": str(probe["mxnet_version"]), "python": probe.get("python"),
            "environment": {str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else None}


def same_setup(stored: Mapping[str, Any], setup: Mapping[str, Any]) -> bool:
    """Whether a stored session (the history store's ``durations`` "setup": its workers'
    recorded variables) ran ``setup`` (``session_setup``): the same MXNet version and Python,
    and the same value of every recorded variable either has, except one the suite fills
    (``SUITE_FILLED``) when this session's interpreter does not set it. A session that fails
    faster or slower (fusion off, one thread, another release) takes other minutes; its
    minutes are not this setup's. Pure."""
    if stored.get("mxnet_version") != setup.get("mxnet_version"):
        return False
    if setup.get("python") and stored.get("python") and stored["python"] != setup["python"]:
        return False
    mine = setup.get("environment")
    if mine is None:
        return True
    theirs = {k: str(v) for k, v in (stored.get("environment") or {}).items() if v is not None}
    return all(mine.get(name) == theirs.get(name) for name in set(mine) | set(theirs)
               if name in mine or name not in SUITE_FILLED)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What the session will take, said before it starts (baseline mode; an A/B session from
    this machine's own A/B sessions: ``ab_estimate``)."""

    seconds: float
    shared_cells: int       # cells measured in worker processes of several cells
    shared_seconds: float
    fresh_tests: int        # tests whose processes are their own
    fresh_seconds: float
    fresh_kinds: Tuple[str, ...]  # what they are (distributed launches, input pipeline, ...)
    #: each measuring test's share (node id -> seconds)
    per_test: Tuple[Tuple[str, float], ...] = ()
    #: tests whose time is this machine's own (its last sessions), and how many sessions
    known_tests: int = 0
    known_sessions: int = 0
    #: whether those sessions ran this session's setup (``Known.of_setup``)
    known_of_setup: Optional[bool] = None
    #: tests at what they took on the reference machine, times this machine's ``Speed.factor``
    scaled_tests: int = 0
    #: the reference's session was against a baseline: its time outside the tests (the start,
    #: settling suspects, the end) is in ``seconds``
    reference_settles: bool = False


def test_function(nodeid: str) -> str:
    """The test function of a node id: the id without its parameters."""
    return nodeid.split("[", 1)[0]


def _usable(source: dict, tests: Sequence[Planned], can_share: bool) -> set:
    """The node ids whose seconds ``source`` (node id -> seconds) can give: any test it holds,
    but a grid's (a test with a CPU cell, when processes are shared) only when ``source`` holds
    exactly this session's tests of its function (its first test carried the whole grid, which
    another selection changes)."""
    grid: dict = {}
    for t in tests:
        if t.measuring and can_share and t.cell is not None and t.cell[2] == "cpu":
            grid.setdefault(t.function, set()).add(t.nodeid)
    out = set()
    for t in tests:
        if not (t.measuring and t.nodeid in source):
            continue
        members = next((m for m in grid.values() if t.nodeid in m), set())
        names = {test_function(m) for m in members}
        if not members or members == {n for n in source if test_function(n) in names}:
            out.add(t.nodeid)
    return out


def estimate(tests: Sequence[Planned], processes: int, can_share: bool = True,
             known: Optional[Known] = None, reference: Optional[Known] = None,
             speed: Optional["Speed"] = None) -> Estimate:
    """The session's duration from its measuring tests. A test this machine ran in its last
    sessions of the kind (``known``) takes what it took there, and the session's own start
    and end what they took; else a test the reference machine ran in its session of the kind
    (``reference``: ``load_reference``'s) takes that times ``speed.factor`` (this machine's
    speed against the reference's: ``speed_from``); any other: grid tests of one function on CPU share
    ``processes`` worker processes (when ``can_share``: not A/B), every other test
    has ``processes`` fresh processes of its own, at the constants above times the factor. Pure."""
    factor = speed.factor if speed else 1.0
    took = known.by_test if known else {}
    mine_ids = _usable(took, tests, can_share)
    ref = reference.by_test if reference else {}
    ref_ids = _usable(ref, tests, can_share) - mine_ids
    groups: dict = {}
    fresh: List[Planned] = []
    per: dict = {}
    mine, own, scaled = 0, 0.0, 0
    for t in tests:
        if not t.measuring:
            continue
        if t.nodeid in mine_ids:
            per[t.nodeid] = took[t.nodeid]
            mine += 1
            own += took[t.nodeid]
        elif t.nodeid in ref_ids:
            per[t.nodeid] = ref[t.nodeid] * factor
            scaled += 1
            own += per[t.nodeid]
        elif can_share and t.cell is not None and t.cell[2] == "cpu" and kind_shares(t.markers):
            groups.setdefault(t.function, []).append(t)
        else:
            fresh.append(t)
    shared_s, shared_n = 0.0, 0
    for members in groups.values():
        if len(members) < 2:
            fresh += members
            continue
        shared_n += len(members)
        group_s = processes * (SHARED_PROCESS_S + SHARED_CELL_S * len(members)) * factor
        shared_s += group_s
        # the first test of a grid measures every cell of it (``Measurer._grid_cells``); the
        # others find theirs measured
        per.update((t.nodeid, group_s if i == 0 else 0.0) for i, t in enumerate(members))
    fresh_s, names = 0.0, []
    for t in fresh:
        k = kinds.of_test(t.markers, t.cell is not None)  # its kind's cost, else "other"'s
        kind = k.marker if k is not None and k.process_seconds is not None else ""
        test_s = processes * (kind_process_seconds(k, t) or dict(FRESH_PROCESS_S).get(kind, FRESH_OTHER_S)) * factor
        fresh_s += test_s
        per[t.nodeid] = test_s
        names.append(FRESH_NAMES[kind])
    settles = False  # whether the time outside the tests is the reference's, suspects settled included
    if known and mine and known.overhead is not None:
        start_end = known.overhead
    elif reference and scaled and reference.overhead is not None:
        start_end, settles = reference.overhead * factor, reference.settles
    else:
        start_end = SESSION_S * factor
    return Estimate(start_end + own + shared_s + fresh_s, shared_n, shared_s, len(fresh), fresh_s,
                    tuple(dict.fromkeys(names)), tuple(per.items()), mine, known.sessions if known and mine else 0,
                    known.of_setup if known and mine else None, scaled_tests=scaled, reference_settles=settles)


def ab_estimate(tests: Sequence[Planned], options, pairs: int, known: Optional[Known],
                speed: Optional["Speed"] = None, reference: Optional[Known] = None) -> Optional[Estimate]:
    """An A/B session's duration when this machine ran some of its tests in its last A/B
    sessions (``known``, kind "ab") or the reference machine ran them in its A/B session
    (``reference``: ``reference_known(.., "ab", ..)``). A test of this machine's takes what it
    took here; else one of the reference's takes that times this machine's ``Speed.factor``;
    any other its first stage at the constants (``planned_test_seconds``) times the factor.
    The session's start and end (its second stage with them) are this machine's when any of
    its tests is, else the reference's times the factor when any of the reference's is and it
    recorded them (``Estimate.reference_settles``), else the constant start and end. None when
    neither holds any of the tests: the first line then says the constants' first stage and
    their most. A duet pair's cost is the cell's own (an AlexNet b64 training pair took 2
    minutes on a 2-vCPU Zen 3 where the constants say 17 s), which only a run of the cell
    knows. Pure."""
    took = known.by_test if known else {}
    ref = reference.by_test if reference else {}
    measuring = [t for t in tests if t.measuring]
    mine = sum(t.nodeid in took for t in measuring)
    scaled = sum(t.nodeid not in took and t.nodeid in ref for t in measuring)
    if not mine and not scaled:
        return None
    factor = speed.factor if speed else 1.0
    per = {}
    for t in measuring:
        per[t.nodeid] = (took[t.nodeid] if t.nodeid in took else ref[t.nodeid] * factor if t.nodeid in ref else
                         ab_constants([t], options, options.duet_pairs, pairs)[0] * factor)
    settles = False
    if mine and known is not None and known.overhead is not None:
        start_end = known.overhead
    elif not mine and reference is not None and reference.overhead is not None:
        start_end, settles = reference.overhead * factor, True
    else:
        start_end = SESSION_S * factor
    return Estimate(start_end + sum(per.values()), 0, 0.0, 0, 0.0, (), tuple(per.items()), mine,
                    known.sessions if mine and known is not None else 0,
                    known.of_setup if mine and known is not None else None, scaled_tests=scaled,
                    reference_settles=settles)


# ----------------------------------------------------------------------------- this machine's speed

#: the share of a session's time that follows the CPU's speed, when the convolution figure is
#: all there is to go by (a reference or a probe without the import figure): MXNet's import,
#: binds, first batches, warm-ups beyond their 1-s floor, the runs of a fixed number of steps.
#: The rest is clocked by the options (the timed rounds, the warm-ups' floor, the probes'
#: timing). Measured on a Zen 3's default session, where a third of the tests' time was
#: clocked (docs/how-it-measures.md, "What a run does").
CPU_SHARE = 0.66
#: the share of the reference's seconds that the options clock, when the speed is read from
#: MXNet's import: the timed rounds and the warm-ups of the reference's default session. The
#: rest (the imports, binds, the processes' starts and ends, the kinds of worker that run a
#: fixed number of steps, the parent's work around them) follows the import's CPU seconds: a
#: CPU that runs the convolution faster can run a session slower, and the import's ratio
#: foretells it (docs/how-it-measures.md, "What a run does").
CLOCKED_SHARE = 0.53
#: the range a speed ratio is held to: a figure beyond it is a broken probe, not a CPU
SPEED_RATIO_RANGE = (0.25, 4.0)


@dataclasses.dataclass(frozen=True)
class Speed:
    """This machine's speed against the reference machine's (``load_reference``): the MXNet
    probe's figures (``workers/protocol.mxnet_speed``: the import's CPU seconds, the
    convolution's GFLOP/s) and what they make of the reference's seconds (``factor``; 1.0
    when no figure could be compared). ``figure``: which one the factor came from ("import",
    "convolution", or "" for none)."""

    factor: float = 1.0
    conv_gflops: Optional[float] = None
    reference_gflops: Optional[float] = None
    reference_cpu: str = ""
    import_cpu_s: Optional[float] = None
    reference_import_cpu_s: Optional[float] = None
    figure: str = ""


def _positive(v) -> Optional[float]:
    """A figure as a JSON answer holds it: a finite positive number, else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if 0 < v < float("inf") else None


def speed_from(mxnet_probe: Optional[dict], reference: Optional[dict]) -> Speed:
    """``Speed`` from the MXNet probe's answer and the reference (``load_reference``). When
    both hold the import figure (``import_cpu_s``: what a worker's ``import mxnet`` from the
    cache costs in CPU seconds), a second of the reference's is ``CLOCKED_SHARE + (1 -
    CLOCKED_SHARE) * ratio`` here, ``ratio`` this machine's import against the reference's.
    Else the convolution figure: ``1 - CPU_SHARE + CPU_SHARE * ratio``, ``ratio`` how much
    slower this machine's convolution is. A shared VM slows a whole probe process now and then
    (on a Zen 3 reference 9 probes read 53-80 GFLOP/s, median 79; sessions' probes read 56 and
    57): a convolution figure within what the reference itself read (``conv_gflops_seen``) says
    nothing of another CPU, and is ratio 1; one above the reference's median is that much
    faster (a slow spell never speeds a probe up); one below the slowest reference reading is
    slower by at least its distance from it. Ratios are held to ``SPEED_RATIO_RANGE``. Pure."""
    cpu = str((reference or {}).get("cpu") or "")
    figures = (mxnet_probe or {}).get("mxnet_speed") or {}
    figures = figures if isinstance(figures, dict) else {}
    lo, hi = SPEED_RATIO_RANGE
    this_gf, ref_gf = _positive(figures.get("conv_gflops")), _positive((reference or {}).get("conv_gflops"))
    this_imp, ref_imp = _positive(figures.get("import_cpu_s")), _positive((reference or {}).get("import_cpu_s"))
    seen = {"conv_gflops": this_gf, "reference_gflops": ref_gf, "import_cpu_s": this_imp,
            "reference_import_cpu_s": ref_imp, "reference_cpu": cpu}
    if this_imp is not None and ref_imp is not None:
        ratio = min(hi, max(lo, this_imp / ref_imp))
        return Speed(CLOCKED_SHARE + (1.0 - CLOCKED_SHARE) * ratio, figure="import", **seen)
    if this_gf is None or ref_gf is None:
        return Speed(**seen)
    try:
        slowest = min([float(v) for v in (reference or {}).get("conv_gflops_seen") or () if float(v) > 0] + [ref_gf])
    except (TypeError, ValueError):
        return Speed(**seen)
    ratio = ref_gf / this_gf if this_gf > ref_gf else slowest / this_gf if this_gf < slowest else 1.0
    ratio = min(hi, max(lo, ratio))
    return Speed(1.0 - CPU_SHARE + CPU_SHARE * ratio, figure="convolution", **seen)


#: the reference machine's sessions (``data/reference-costs.json``): what each test of the
#: default selection took there, by kind of session, with the MXNet speed figure it read
REFERENCE_FILE = "reference-costs.json"


def load_reference() -> Optional[dict]:
    """The reference costs shipped with the package, or None when the file is missing or
    cannot be read (the constants then stand alone)."""
    import json
    from importlib import resources
    try:
        return json.loads(resources.files("pytest_mxperf").joinpath("data", REFERENCE_FILE).read_text())
    except (OSError, ValueError):
        return None


def reference_known(reference: Optional[dict], kind: str, options) -> Optional[Known]:
    """The reference's session of ``kind`` (``SessionContext.kind``: "suite", "baseline",
    "recording", "ab") as a ``Known``, when it ran with this session's options of the kind
    (else its seconds say nothing of this one's): the processes a cell and the time budget; for
    "ab" the duet pairs a cell and the time budget, and its time outside the tests (its second
    stage, which a deadline cuts) only when it ran with this session's ``--perf-deadline``. A
    session against a baseline the reference does not hold is its "suite" session: what such a
    session measures before it settles suspects. An A/B session it does not hold is None: a
    session of one install says nothing of a duet's cost."""
    sessions = (reference or {}).get("sessions") or {}
    if kind == "baseline" and kind not in sessions:
        kind = "suite"
    s = sessions.get(kind)
    if not isinstance(s, dict) or not isinstance(s.get("tests"), dict):
        return None
    if s.get("time_budget") != options.time_budget:
        return None
    if kind == "ab" and s.get("duet_pairs") != options.duet_pairs:
        return None
    if kind != "ab" and s.get("processes") != options.processes:
        return None
    tests = {str(n): float(t) for n, t in s["tests"].items()}
    over = max(0.0, float(s["wall_seconds"]) - sum(tests.values())) if s.get("wall_seconds") is not None else None
    if kind == "ab" and s.get("deadline") != options.deadline:
        over = None
    return Known(tuple(tests.items()), over, 1, settles=kind == "baseline")


# ----------------------------------------------------------------------------- costs of processes

#: seconds a worker process costs besides its timed part (interpreter, import mxnet, bind,
#: warm-up, the machine probe around it); used only for the duration estimate printed first.
#: Measured here: an A/B session of 2 ResNet-50 v2 cells (1.8.0.post0 vs 1.9.1, 72 processes
#: at the default 1.5 s budget) took 533 s, 7.4 s a process.
PROCESS_OVERHEAD_S = 4.0
PROBE_OVERHEAD_S = 2.0
# a duet pair: two workers importing MXNet, binding and warming up at once, then finishing
# (measured: 7-8 s for ResNet-50 v2 b2 here), and its rounds, sized to at least half of
# duet.ROUND_SECONDS and rounded up to whole batches (measured: 0.2 s for a 0.15-s target)
DUET_STARTUP_S = 7.5
DUET_ROUND_S = 0.2
#: duet pairs a second stage typically adds to a cell: the median over the cells of a real
#: session with oneDNN fusion off on the candidate (AMD EPYC, 2 vCPUs, 2026-11-23: 0 to 9, median 5)
SECOND_STAGE_PAIRS = 5
#: starting a worker process and reading its result, beside MXNet's import (measured: 0.2-0.4 s)
SPAWN_S = 0.5
#: what confirming suspects may take after a first stage shorter than this (seconds)
CONFIRM_FLOOR_S = 60.0
#: share of --perf-deadline kept for the end of the session (second stage, profiles, reports)
DEADLINE_RESERVE = 0.15


def duet_pair_seconds(options) -> float:
    """What one duet pair costs: both workers start and warm up together (two processes on
    the machine's cores), then the settling and timed rounds of both sides, one at a time."""
    from pytest_mxperf.measure import duet
    rounds = 1 if options.smoke else duet.rounds_for(options.time_budget)
    return DUET_STARTUP_S + 2 * (rounds + duet.SETTLE_ROUNDS + 1) * DUET_ROUND_S


def kind_process_seconds(k: Optional[kinds.Kind], t: Planned) -> Optional[float]:
    """What one process of test ``t`` (of kind ``k``) takes at the constants, in the reference's
    seconds, where its kind declares its model's own (``Kind.model_seconds``: a ResNet-50 v2
    serving run lasts many LeNet ones); None otherwise (the kind's marker's cost stands)."""
    s = dict(k.model_seconds).get(t.group[1]) if k is not None else None
    return None if s is None else s * ZEN3_SECOND


def kind_pair_seconds(k: Optional[kinds.Kind], t: Planned, options) -> Optional[float]:
    """A duet pair of test ``t`` (of kind ``k``) at the constants when its kind's rounds are its
    measured work (``Kind.whole_runs``: that many whole runs a side, one side at a time;
    ``Kind.to_the_end``: each side's whole run, steps taking turns), from what one of its
    processes takes (``Kind.seconds_for`` its model), both workers' start beside; None for a
    kind of short timed rounds (``duet_pair_seconds``), or one without a process cost."""
    if k is None or not (k.whole_runs or k.to_the_end) or k.process_seconds is None:
        return None
    runs = 1 if options.smoke or k.to_the_end else k.whole_runs
    return DUET_STARTUP_S + 2 * runs * k.seconds_for(t.group[1]) * ZEN3_SECOND


def ab_constants(tests: Sequence[Planned], options, duet_pairs: int, ab_pairs: int) -> Tuple[float, float]:
    """An A/B session's tests at the constants, in the reference's seconds: (their first
    stage, and that with a second stage of ``SECOND_STAGE_PAIRS`` duet pairs a cell, at most
    its kind's cap at that pair, ``Kind.pair_budget``). A duet test's pair is its kind's (``kind_pair_seconds``)
    where its rounds are whole runs, else ``duet_pair_seconds``; a test of a kind that cannot
    be resident runs ``ab_pairs`` process pairs."""
    first = most = 0.0
    for t in tests:
        if not t.measuring:
            continue
        if t.markers & set(PROCESS_PAIR_MARKERS):
            test_s = planned_test_seconds(options, True, duet_pairs, ab_pairs, duet=False)
            first, most = first + test_s, most + test_s
            continue
        k = kinds.of_test(t.markers, t.cell is not None)
        pair = kind_pair_seconds(k, t, options) or duet_pair_seconds(options)
        cap = duet_pairs + SECOND_STAGE_PAIRS if k is None else k.most_pairs(pair, duet_pairs + SECOND_STAGE_PAIRS)
        first += min(duet_pairs, cap) * pair
        most += cap * pair
    return first, most


def planned_test_seconds(options, ab: bool, duet_pairs: int = 3, ab_pairs: int = 8, duet: bool = True) -> float:
    """The plan's estimate of one measuring test (one cell); in A/B mode (``ab``) a duet
    cell's or, with ``duet=False``, a cell of process pairs."""
    per_process = options.time_budget + PROCESS_OVERHEAD_S + (PROBE_OVERHEAD_S if options.machine_probe else 0.0)
    if ab:
        return duet_pairs * duet_pair_seconds(options) if duet else 2 * ab_pairs * per_process
    return options.processes * per_process


def process_seconds(runs: Sequence[Any], options) -> float:
    """What one more fresh process of a cell is expected to take, from its processes so far:
    the median of their wall times (else the time budget and a process's overhead), plus
    MXNet's import and a process start when they were measured among other cells (a fresh
    process imports MXNet too, which a shared one did once for all its cells), plus the probe."""
    walls = sorted(r.wall_seconds for r in runs if r.wall_seconds)
    per = walls[len(walls) // 2] if walls else options.time_budget + PROCESS_OVERHEAD_S
    shared = [r for r in runs if r.meta.process_cells]
    if shared:
        per += max(r.meta.import_seconds or 0.0 for r in shared) + SPAWN_S
    return per + (PROBE_OVERHEAD_S if options.machine_probe else 0.0)


def pair_seconds(cell: Any, first: Optional[int] = None) -> Optional[float]:
    """What one pair of this cell took so far (the median over its pairs; a duet pair's two
    workers run side by side, so the longer of the two); over its ``first`` pairs only where
    given: the cost its kind's pair budget is reckoned at (``kinds.PairBudget``), the same at
    every look once its first stage is in, so the rule's boundaries stay where its first look
    put them. A cell whose first look comes after one pair (``Plan.one_pair_cells``) has that
    read again at its second and third: its first two looks' boundaries are for the caps their
    pairs gave."""
    walls = [max(c.wall_seconds, r.wall_seconds) for c, r in cell.pairs()[:first]]
    walls = [w for w in walls if w > 0]
    return statistics.median(walls) if walls else None


def setup_pair_seconds(record: Any, options) -> float:
    """What one pair against a baseline's recorded setup is expected to cost a cell measured
    without pairs so far, from this machine's own figures of the cell: a duet pair when its
    worker can be resident (``duet_pair_from``), else two of its processes back to back. Under
    a neighbour the cell's processes took longer, and so is the pair expected to: a deadline
    keeps only the pairs it can hold at that cost."""
    runs = record.cell.ok_runs
    if record.duets:
        return duet_pair_from(runs, options) if runs else duet_pair_seconds(options)
    return 2 * process_seconds(runs, options)


def _outside_timed(run: Any) -> float:
    """What one of a cell's processes spent outside its timed rounds: MXNet's import (in the
    process's wall, or the shared process's own), binding, warming up and ending, and its start."""
    timed = run.meta.timed_seconds or sum(run.round_seconds)
    own = max(0.0, run.wall_seconds - timed)
    return own + ((run.meta.import_seconds or 0.0) if run.meta.process_cells else 0.0) + SPAWN_S


def _batch_seconds(run: Any) -> Optional[float]:
    """One batch's seconds in a process's timed rounds (the mean of its ``seconds_per_batch``),
    or None (a worker kind without batches)."""
    return statistics.fmean(run.seconds_per_batch) if run.round_seconds and run.batches_per_round > 0 else None


def _probe_seconds(runs: Sequence[Any], options) -> float:
    """The machine-state probe a pair is bracketed by: what the cell's probes took here
    (``process_seconds`` of the probe processes around its processes), else the constant."""
    if not options.machine_probe:
        return 0.0
    took = [p["process_seconds"] for r in runs for p in ((r.meta.machine_state or {}).get(side) for side in
                                                         ("probe_before", "probe_after"))
            if isinstance(p, Mapping) and isinstance(p.get("process_seconds"), (int, float))]
    return statistics.median(took) if took else PROBE_OVERHEAD_S


def duet_pair_from(runs: Sequence[Any], options) -> float:
    """A duet pair of the cell whose processes are ``runs``, from what they took on this
    machine: both workers start at once (as long as one of its processes spent outside its
    timed rounds: import, bind, warm-up, end), then the settling and timed rounds of both
    sides one at a time, each round as long as ``duet.ROUND_SECONDS`` or one of its batches
    where that is longer (``duet.rounds_for``: fewer rounds then), and the probe around it.
    A cell whose sides warm up one at a time (``duet.warms_up_alone``: a GPU cell): its start
    counts twice. Worked out from each cell's own processes, not from constants, which priced a
    first round of pairs too high (docs/how-it-measures.md, "What a run does")."""
    from pytest_mxperf.measure import duet
    start = statistics.median(_outside_timed(r) for r in runs)
    if duet.warms_up_alone(runs[0].workload):
        start *= 2
    batches = [b for b in map(_batch_seconds, runs) if b]
    round_s = max(duet.ROUND_SECONDS, statistics.median(batches)) if batches else duet.ROUND_SECONDS
    rounds = 1 if options.smoke else duet.rounds_for(options.time_budget, round_s)
    return start + 2 * (rounds + duet.SETTLE_ROUNDS) * round_s + _probe_seconds(runs, options)


# ----------------------------------------------------------------------------- collected tests

def planned(item) -> Planned:
    """What the plan needs of a collected test, read from pytest's item."""
    mark = item.get_closest_marker("mxperf_priority")
    params = getattr(getattr(item, "callspec", None), "params", {})
    # a grid left empty by the options (a model or device it does not have) is pytest's
    # NOTSET, and its test skips: it has no cell
    model, batch, ctx = params.get("model"), params.get("batch_size") or 0, params.get("ctx")
    has_cell = isinstance(model, str) and hasattr(batch, "__index__") and isinstance(ctx, (list, tuple)) and ctx
    return Planned(
        measuring="mxperf" in getattr(item, "fixturenames", ()),
        priority=int(mark.args[0]) if mark and mark.args else None,
        group=(getattr(item, "originalname", item.name), str(params.get("model", ""))),
        markers=frozenset(m.name for m in item.iter_markers()),
        cell=(model, int(batch), str(ctx[0]).split(":")[0]) if has_cell else None,
        function="::".join(grid_key(item)), nodeid=item.nodeid)


#: the parameters of the plugin's grid (``collection.parametrize``): a test's cell
GRID_PARAMS = ("model", "batch_size", "ctx")


def grid_params(item) -> dict:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return {k: params[k] for k in GRID_PARAMS if k in params}


def grid_key(item) -> Tuple[str, str]:
    return (item.nodeid.split("::")[0], getattr(item, "originalname", item.name))


def kind_shares(markers) -> bool:
    """Whether the cells of a grid test with these markers are measured in worker processes of
    several cells (``Scheduler.can_share_process``), as far as its kind decides: the kind its
    markers name for a test with a grid cell (``kinds.of_test``) shares a worker, or it names
    none (a grid of no kind's marker measures throughput cells)."""
    own = kinds.of_test(markers, True)
    return own is None or own.shares_process


def grid_shares_workers(item, grid: Sequence[Any]) -> bool:
    """Whether a grid test's first test measures its whole grid in shared worker processes,
    which the deadline expects of it (``Clock.past_deadline``): two or more cells, all on CPU
    contexts, of a kind that shares a worker (``kind_shares``)."""
    ctx = grid_params(item).get("ctx", ("cpu",))
    return (len(grid) >= 2 and all(str(c).startswith("cpu") for c in ctx)
            and kind_shares(m.name for m in item.iter_markers()))


def grid_seconds(plan: Any, nodeid: str) -> float:
    """What the plan expects the grid of test ``nodeid`` to take (the grid's first test measures
    every cell of it, ``Measurer._grid_cells``): the plan's seconds for the tests of its
    function, whichever of them the plan put the grid's cost on. Pure."""
    function = test_function(nodeid)
    return sum(t for n, t in getattr(plan, "test_estimates", ()) if test_function(n) == function)


def grids(items) -> dict:
    """(module, test function) -> the grid parameters of each of its selected tests, in
    collection order: the cells a grid test measures together (``Measurer._grid_cells``).
    Tests that will skip (a mark added before they run) are left out."""
    out: dict = {}
    for it in items:
        p = grid_params(it)
        if p and not it.get_closest_marker("skip"):
            out.setdefault(grid_key(it), []).append(p)
    return out


#: baseline mode: a session measures every cell the baseline records in pairs with its recorded
#: setup from the first process (``first_path``) when the baseline alone is expected to clear
#: less than this share of its cells. A baseline pass whose cells nearly all go on to the duet
#: measures what the duet measures again: on the Intel Xeon of the unchanged session of
#: 2026-12-01 (../shared/data/unchanged-session-2026-12-01), 24 of 24 cells went on to it
PAIRED_BELOW = 0.5


@dataclasses.dataclass(frozen=True)
class FirstPath:
    """How a session against a baseline measures from its first process: ``paired``, every
    cell in pairs with the recorded setup (judged by the pairs, the baseline's figures beside
    them), else the cheap path (the cells alone, the duet only for what the baseline cannot
    settle); ``why``, said on the first line."""

    paired: bool
    why: str


def first_path(summary: Mapping[str, Any], duet_shares: Sequence[float], provisional_clears: bool
               ) -> FirstPath:
    """The path of a session against a baseline whose recorded setup is ready, from what the
    baseline says of its resolution (``Baseline.resolution_summary``: its cells and how many
    rest on one session, which clear nothing alone unless ``provisional_clears``) and from
    this machine's last sessions against it (``duet_shares``: the share of each one's cells
    that went on to the duet, newest first): paired when the baseline alone is expected to
    clear less than ``PAIRED_BELOW`` of its cells. Pure."""
    cells = int(summary.get("cells") or 0)
    provisional = 0 if provisional_clears else int(summary.get("provisional") or 0)
    if cells and (cells - provisional) / cells < PAIRED_BELOW:
        return FirstPath(True, f"{provisional} of the baseline's {cells} cells rest on one recorded session, "
                               "whose resolution clears no cell alone")
    shares = [float(s) for s in duet_shares if s is not None]
    if shares and 1.0 - statistics.median(shares) < PAIRED_BELOW:
        return FirstPath(True, f"this machine's last {len(shares)} session(s) against its baseline sent "
                               f"{100 * statistics.median(shares):.0f}% of their cells on to the duet")
    if not cells:
        return FirstPath(False, "the baseline states no resolution for its cells")
    said = (f"; its last {len(shares)} session(s) sent {100 * statistics.median(shares):.0f}% of their cells on "
            "to the duet" if shares else "")
    return FirstPath(False, f"the baseline clears cells alone here ({cells - provisional} of its {cells} cells with a "
                            f"resolution of up to {int(summary.get('sessions') or 0)} recorded sessions{said})")


#: the degrees of freedom this machine's history must hold of each kind of figure a kind of
#: cell has (its rounds figure, ``rounds/<kind>``, or a latency cell's percentiles) for a paired
#: or A/B session's cells of that kind to get one duet pair before their first look instead of
#: ``options.DUET_PAIRS``: the pair-by-pair rule judges a figure at its kind's pooled spread, so
#: a cell's own first pairs only add to what is known; at 12 df the boundary is widened by
#: Student's t (``sequential.widened``). Why one: three pairs a cell were 13 of an unchanged
#: session's 17-34 minutes on the Zen 4, one pair 7.4-7.7; a cell not called after it gets up to
#: three at its first look (evidence: docs/baselines.md, the Zen 4 rows). Decided per cell
#: (``first_pairs``): a kind of two cells (the distributed ones, kvstore) keeps three pairs
#: until its history is long enough, and does not hold the other kinds to three
ONE_PAIR_DF = 12


@dataclasses.dataclass(frozen=True)
class FirstPairs:
    """The duet pairs each cell gets before its first look, and why (said on the first line):
    ``pairs`` for any cell but those of ``cells`` (cell keys), which get one."""

    pairs: int
    why: str = ""
    cells: Tuple[str, ...] = ()

    def of(self, key: str) -> int:
        """The pairs cell ``key`` (or a figure key of it) gets before its first look."""
        return 1 if key.partition("#")[0] in self.cells else self.pairs


def first_pairs(default: int, kind_df: Mapping[str, Mapping[str, int]], own_df: Mapping[str, int],
                min_own_df: int) -> FirstPairs:
    """How many duet pairs a cell gets before its first look: one for a cell whose own figures
    this machine's history holds at least ``min_own_df`` degrees of freedom of (``own_df``: cell
    key -> the least over its figures) and whose kind of cell's figures' kinds (``kind_df``: kind
    of cell -> the degrees of freedom per kind of figure, ``ab_judging.spread_family``) all hold
    at least ``ONE_PAIR_DF``; else ``default``. Its own spread is what keeps a noisy cell of a
    quiet kind from being judged at its kind's after one pair (replayed: unchanged sessions of 6
    cells failed in 4 of 59 with the kind's alone, docs/baselines.md). Pure."""
    if default <= 1:
        return FirstPairs(default)
    known = {kind: {f: int(df) for f, df in fams.items()} for kind, fams in kind_df.items() if fams}
    kinds = {kind for kind, fams in known.items() if min(fams.values()) >= ONE_PAIR_DF}
    cells = tuple(sorted(c for c, df in own_df.items() if c.split("/", 1)[0] in kinds and df >= min_own_df))
    if not cells:
        return FirstPairs(default)
    said = ", ".join(f"{kind} {min(known[kind].values())} df" for kind in sorted(kinds))
    return FirstPairs(default, f"1 for the {len(cells)} cell(s) whose own spread of duet pairs and their kind's this "
                               f"machine's history holds: {said}", cells)


def first_stage_late(plan: "Plan", deadline: Optional[float]) -> str:
    """Why a paired session's first stage (each measuring test's pairs, as the plan guesses one
    before any ran) would not end within ``deadline`` less its reserve, or "" (no deadline, or it
    would): a deadline that cannot hold one test's pairs would leave every test not reached,
    where the cheap path's processes measure first. Pure."""
    if deadline is None or not plan.tests or not plan.test_seconds:
        return ""
    budget = deadline * (1.0 - DEADLINE_RESERVE)
    if plan.test_seconds <= budget:
        return ""
    return (f"a test's pairs take about {plan.test_seconds:.0f} s and --perf-deadline {deadline:g} s holds "
            f"{budget:.0f} s of measuring")


@dataclasses.dataclass(frozen=True)
class Made:
    """The plan for the session (``session.Plan``), with the estimate and the duet tests said
    first; in A/B mode ``constants``: its tests' first stage and most at the constants
    (``ab_constants``), times this machine's speed."""

    plan: Any
    estimate: Optional[Estimate]
    duet_tests: int
    constants: Optional[Tuple[float, float]] = None


def plan_for(tests: Sequence[Planned], options, ab: bool, explicit_pairs: bool = False,
             deselected_slow: int = 0, known: Optional[Known] = None, reference: Optional[Known] = None,
             speed: Optional["Speed"] = None) -> Made:
    """The session's plan from its runnable collected tests: how many measure, the pairs a
    cell gets in A/B mode (from the number of cells, unless --perf-processes set them), one
    test's expected time and the session's estimate (``known``: this machine's own costs;
    ``reference``, ``speed``: the reference machine's, and this machine's speed against it).
    Pure."""
    n = sum(t.measuring for t in tests)
    duets = duet_tests(tests)
    pairs = options.ab_pairs
    if ab and not options.smoke and not explicit_pairs and n:
        pairs = ab_pairs(n)
    if not n:
        estimate_ = None
    elif ab:  # this machine's own A/B sessions, the reference's, else the constants (said by the first line)
        estimate_ = ab_estimate(tests, options, pairs, known, speed, reference) if known or reference else None
    else:
        estimate_ = estimate(tests, options.processes, can_share=True, known=known, reference=reference, speed=speed)
    # what one test takes before any ran (the deadline's first guess), at this machine's speed
    test_s = (planned_test_seconds(options, ab, options.duet_pairs, pairs, duet=duets == n)
              * (speed.factor if speed else 1.0))
    return Made(Plan(tests=n, cells=n, estimate_seconds=estimate_.seconds if estimate_ else None, test_seconds=test_s,
                     ab_pairs=pairs, duet_pairs=options.duet_pairs, deselected_slow=deselected_slow,
                     test_estimates=estimate_.per_test if estimate_ else (), speed=speed),
                estimate_, duets,
                tuple(x * (speed.factor if speed else 1.0) for x in ab_constants(tests, options, options.duet_pairs,
                                                                                    pairs)) if ab else None)


#: seconds of the plan's own estimate the progress line weighs against the tests measured so
#: far: early on it trusts the plan, later what the tests took
PROGRESS_PRIOR_S = 60.0


def time_left(plan: Plan, done: Sequence[Tuple[str, float]], gone: float,
              running: Optional[Tuple[str, float]] = None) -> Optional[float]:
    """What is left of the session: the plan's estimate of the tests not done yet and of its
    end, scaled by how the tests done so far (node id, seconds they took) went against their
    estimate (``PROGRESS_PRIOR_S`` of the plan's own weigh in, so the first test does not
    decide it alone). ``running``: the test under way (node id, seconds since it started),
    whose estimate counts less what it has spent (never below nothing): a line in the middle
    of a test of several cells (a precision test's two, a grid's) would otherwise count the
    whole test still to come and its time so far as the session's own. None without an
    estimate. Pure."""
    if not plan.estimate_seconds:
        return None
    est = dict(plan.test_estimates)
    done_ids = {n for n, _ in done}
    planned_done = sum(est.get(n, 0.0) for n in done_ids)
    took = sum(t for n, t in done if n in est)
    ratio = (took + PROGRESS_PRIOR_S) / (planned_done + PROGRESS_PRIOR_S)
    run_id, run_spent = running if running and running[0] not in done_ids else ("", 0.0)
    # the plan's time outside the tests (the start and the end of the session) is what is
    # left of it once the tests done so far, and the one under way, are counted
    outside = max(0.0, plan.estimate_seconds - sum(est.values()))
    started_part = max(0.0, gone - took - run_spent)  # the session's time outside its tests so far
    left_tests = sum(v for n, v in est.items() if n not in done_ids and n != run_id) * ratio
    if run_id in est:
        left_tests += max(0.0, est[run_id] * ratio - run_spent)
    return max(0.0, left_tests + max(0.0, outside - started_part))
