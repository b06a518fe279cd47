"""The measuring session, without pytest: what one pytest session measured, and how.

``PerfSession`` holds the options, the machine's facts (gathered lazily), the baseline
store and the cells measured so far (``CellRecord``). ``measure`` runs one cell in fresh
worker processes, each one bracketed by the machine-state probe (``machine/state.py``);
in A/B mode (``--perf-reference``) it runs pairs of processes back to back, candidate and
reference interpreter, the order alternating pair by pair (AB, BA, AB, ...) so that drift
and order effects cancel.

Each record keeps how to measure its cell again (``remeasure``): the gate uses it to
confirm suspects at the end of the session, whatever kind of worker measured the cell.
"""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf import zoo
from pytest_mxperf.judge import floors
from pytest_mxperf.machine import hardware
from pytest_mxperf.measure import duet, runner
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.proc import worker
from pytest_mxperf.store.baseline_store import BaselineStore
from pytest_mxperf.store.baselines import Baseline

#: a probe younger than this is reused as the next process's "before" probe
PROBE_REUSE_SECONDS = 2.0

RunFn = Callable[[Optional[str], int], RunResult]  # (python, seed) -> one process
#: (candidate python, reference python, seed, candidate first) -> one duet pair's two sides
DuetFn = Callable[[Optional[str], Optional[str], int, bool], Tuple[RunResult, RunResult]]


@dataclasses.dataclass(frozen=True)
class CellRun:
    """How a cell's processes run: ``process`` runs one fresh worker process; ``duet``, for
    worker kinds that can be resident (``duet.resident``), runs one A/B duet pair, which A/B
    mode then uses instead of process pairs."""

    process: RunFn
    duet: Optional[DuetFn] = None


@dataclasses.dataclass
class CellRecord:
    """One measured cell with what the test decided about it (floor, outcome)."""

    nodeid: str
    cell: CellMeasurement
    floor: Optional[floors.Floor] = None
    outcome: str = "measured"  # passed / failed / skipped / measured
    note: str = ""
    remeasure: Optional[Callable[[int], CellMeasurement]] = dataclasses.field(default=None, repr=False)
    #: every test whose processes this record holds (a merged cell: ``merge_records``)
    nodeids: Tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return self.cell.workload.key()

    def to_dict(self, verdicts: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        d = self.cell.to_dict()
        d["nodeid"] = self.nodeid
        d["nodeids"] = list(self.nodeids or (self.nodeid,))
        d["floor"] = dataclasses.asdict(self.floor) if self.floor else None
        d["outcome"] = self.outcome
        d["note"] = self.note
        if verdicts:
            key = self.cell.workload.key()
            d["verdicts"] = {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in verdicts.items()
                             if k == key or k.startswith(key + "#")}
            d["verdict"] = d["verdicts"].get(key)
        return d


#: what a merged cell's test outcome is when its tests disagree: the first of these found
_OUTCOME_ORDER = ("failed", "passed", "skipped", "measured")


def merge_records(records: Sequence[CellRecord]) -> Dict[str, CellRecord]:
    """The session's cells by key, each once: a cell that several tests measured (and the
    confirmation processes the end of the session added) is one new record holding every
    process of those records once, in the order they ran. Pure: the records and their
    measurements are left as they are, so any number of calls give the same cells. A cell
    that several tests share (``PerfSession.measure_cells``) is held by each of their records;
    its processes are counted once."""
    groups: Dict[str, List[CellRecord]] = {}
    for r in records:
        groups.setdefault(r.key, []).append(r)
    out: Dict[str, CellRecord] = {}
    for key, recs in groups.items():
        first = recs[0]
        # a cell two tests share is one measurement: its processes are counted once
        runs = list({id(run): run for r in recs for run in r.cell.runs}.values())
        paired = [r for r in recs if r.cell.reference is not None]
        reference = list({id(run): run for r in paired for run in r.cell.reference}.values()) if paired else None
        outcomes = [r.outcome for r in recs]
        outcome = next((o for o in _OUTCOME_ORDER if o in outcomes), first.outcome)
        notes = list(dict.fromkeys(r.note for r in recs if r.note))
        out[key] = CellRecord(
            nodeid=first.nodeid, cell=CellMeasurement(first.cell.workload, runs, reference),
            floor=next((r.floor for r in recs if r.floor is not None), None), outcome=outcome,
            note="; ".join(notes), remeasure=next((r.remeasure for r in recs if r.remeasure), None),
            nodeids=tuple(dict.fromkeys(n for r in recs for n in (r.nodeids or (r.nodeid,)))))
    return out


@dataclasses.dataclass
class Finding:
    """A figure that is shown, not judged (a derived figure, a study's table)."""

    nodeid: str
    name: str
    figures: Dict[str, Any]
    note: str = ""


class PerfSession:
    def __init__(self, options: PerfOptions, environ: Optional[Mapping[str, str]] = None, *,
                 on_results: Optional[Callable[[Dict[str, Any]], None]] = None,
                 say: Optional[Callable[[str], None]] = None,
                 given_machine_state: Optional[Callable[[str], Optional[Dict[str, Any]]]] = None):
        self.options = options
        self.environ = dict(os.environ if environ is None else environ)
        self.records: List[CellRecord] = []
        self.findings: List[Finding] = []
        self.skipped_reasons: List[str] = []
        self.started = time.time()
        self.session_id = uuid.uuid4().hex  # the session's id in results.json and the history store
        self.machine: Dict[str, Any] = {"id": "unknown"}
        self.store = BaselineStore(options.baselines_dir)
        self.baseline: Optional[Baseline] = None  # this machine's, loaded when the session starts
        self.end_messages: List[str] = []  # what the end of the session said (``ended``)
        self.deselected_slow = 0
        self.outcome = None  # the end of the session's outcome (``ended``)
        # --perf-reference baseline: the MXNet requirement the baseline was recorded with
        self.reference_requirement: Optional[str] = None
        self.ab_pairs = options.ab_pairs  # pairs per cell in A/B mode (set from the cell count)
        # duet pairs per cell in the first stage (verdict_duet.STAGE1_PAIRS; --perf-processes)
        self.duet_pairs = options.duet_pairs
        self._probe_cache: Dict[Optional[str], Dict[str, Any]] = {}
        self._hw: Optional[hardware.HardwareInfo] = None
        self._last_probe: Optional[tuple] = None
        self.probes: List[Dict[str, Any]] = []  # every machine probe of the session
        # measured peaks per "context/dtype" (fixture.machine_peak): each measured once,
        # lazily, the first time a cell's GFLOP/s is set against it
        self.peaks: Dict[str, Dict[str, Any]] = {}
        self.not_reached: List[str] = []     # measuring tests --perf-deadline left unstarted
        # no GPU can be used (machine/gpu_readiness.py, decided before any worker): the one
        # line its GPU tests skip with, and whether that fails the session
        self.no_gpu_reason: Optional[str] = None
        self.no_gpu_fails = False
        self.test_seconds: List[float] = []  # wall time of each measuring test so far
        self.planned_test_seconds: Optional[float] = None  # the plan's estimate of one test
        # the plugin's hook pytest_mxperf_update_results: the results document, changed in
        # place before it is written
        self.on_results: Callable[[Dict[str, Any]], None] = on_results or (lambda doc: None)
        # the terminal: a line said while the session runs (the second stage's cost)
        self.say: Callable[[str], None] = say or (lambda line: None)
        # the plugin's hook pytest_mxperf_machine_state: part ("probe" / "load") -> the
        # machine's state as given instead of measured, or None to measure it
        self._given_state: Callable[[str], Optional[Dict[str, Any]]] = given_machine_state or (lambda part: None)
        # cells whose two pools do not fit on one GPU (duet.NoRoomForTwo): key -> the line said;
        # their A/B pairs run as process pairs from then on
        self.duet_fallbacks: Dict[str, str] = {}
        # every cell measured so far, by what measured it (``shared_key``): a test that asks
        # for a cell another test measured gets that measurement, not a second one
        self._measured: Dict[Tuple, CellMeasurement] = {}
        # the plan's cells (``expect``) and how far the session is (``progress_line``)
        self.expected_cells = 0
        self.runs_done = 0  # processes measured (a duet pair's two sides: one)
        self.estimate_seconds: Optional[float] = None
        self._last_progress = time.monotonic()

    # -- the deadline ----------------------------------------------------------------------
    #: share of --perf-deadline kept for the end of the session (second stage, profiles, reports)
    DEADLINE_RESERVE = 0.15

    def past_deadline(self) -> Optional[str]:
        """Why the next measuring test must not start (it would end past the deadline, less
        DEADLINE_RESERVE), or None. A test is expected to take the longest one so far, or
        the plan's estimate before any ran."""
        if self.options.deadline is None:
            return None
        expected = max(self.test_seconds, default=self.planned_test_seconds or 0.0)
        elapsed = time.time() - self.started
        budget = self.options.deadline * (1.0 - self.DEADLINE_RESERVE)
        if elapsed + expected <= budget:
            return None
        return (f"not reached before --perf-deadline: {elapsed:.0f} s gone, a test takes about {expected:.0f} s, "
                f"{budget:.0f} s of {self.options.deadline:g} s are for measuring")

    # -- facts, gathered once and only when needed ------------------------------------
    def ended(self, messages: Sequence[str], outcome) -> None:
        """The end of the session (``outcome/finish.end_session``): its messages and outcome."""
        self.end_messages = list(messages)
        self.outcome = outcome

    def probe_mxnet(self, python: Optional[str] = None) -> Dict[str, Any]:
        """What MXNet a worker interpreter has (version, features, GPUs), asked once."""
        if python not in self._probe_cache:
            self._probe_cache[python] = worker.probe(python, env=self.environ)
        return self._probe_cache[python]

    @property
    def probe(self) -> Dict[str, Any]:
        return self.probe_mxnet(self.options.python)

    @property
    def num_gpus(self) -> int:
        return int(self.probe.get("num_gpus") or 0)

    @property
    def hardware(self) -> hardware.HardwareInfo:
        if self._hw is None:
            self._hw = hardware.hardware_info(self.environ)
        return self._hw

    def gpu_unavailable_reason(self, contexts: Sequence[str]) -> Optional[str]:
        """Why GPU contexts cannot run here, or None when they can (or are CPU)."""
        gpus = [c for c in contexts if c.startswith("gpu")]
        if not gpus:
            return None
        if self.no_gpu_reason:
            return self.no_gpu_reason
        have = self.num_gpus
        if self.probe.get("status") not in (None, "ok"):
            return f"cannot probe MXNet for GPUs: {self.probe.get('message')}"
        if have == 0:
            return "no GPU here: mx.context.num_gpus() is 0"
        top = max(int(c.split(":")[1]) for c in gpus)
        if top >= have:
            return f"{','.join(gpus)} requested but this machine has {have} GPU(s) (gpu:0..gpu:{have - 1})"
        return None

    # -- the machine-state probe around every process -----------------------------------
    def _machine_probe(self) -> Optional[Dict[str, Any]]:
        from pytest_mxperf.machine import state as machine_state
        now = time.monotonic()
        if self._last_probe and now - self._last_probe[0] < PROBE_REUSE_SECONDS:
            return self._last_probe[1]
        given = self._given_state("probe")
        p = dict(given) if given is not None else machine_state.run_probe(env=self.environ)
        self._last_probe = (time.monotonic(), p)
        return p

    def _with_machine_state(self, measure: Callable[[], Sequence[RunResult]]) -> List[RunResult]:
        """What ``measure`` ran (one process, or a duet pair's two sides, which ran inside the
        same window), each with the machine's state measured right before and after it."""
        if not self.options.machine_probe:
            results = list(measure())
            self._progress(results)
            return results
        from pytest_mxperf.machine import state as machine_state
        before = self._machine_probe()
        meter = machine_state.LoadMeter()
        meter.start()
        try:
            results = list(measure())
        except BaseException:  # e.g. duet.NoRoomForTwo: nothing measured, the meter stops
            meter.stop()
            raise
        load = meter.stop()
        given = self._given_state("load")
        if given is not None:
            load = dict(given)
        after = self._machine_probe()
        for r in results:
            r.record_machine_state(before, after, load)
        self.probes += [p for p in (before, after) if p]
        self._progress(results)
        return results

    def _bracketed(self, run: RunFn, python: Optional[str], seed: int) -> RunResult:
        """One process, with the machine's state measured right before and after it."""
        return self._with_machine_state(lambda: [run(python, seed)])[0]

    def _bracketed_pair(self, pair: DuetFn, candidate: Optional[str], reference: Optional[str], seed: int,
                        candidate_first: bool) -> Tuple[RunResult, RunResult]:
        """One duet pair, with the machine's state measured right before and after it (both
        sides carry the same state)."""
        c, r = self._with_machine_state(lambda: pair(candidate, reference, seed, candidate_first))
        return c, r

    def label_now(self, runs: Sequence[RunResult]) -> List[Optional[str]]:
        """Machine-state labels of ``runs`` against the session's probes so far (the gate
        relabels everything against one reference at the end of the session)."""
        from pytest_mxperf.judge import machine_states
        reference = machine_states.reference_from(self.probes)
        out = []
        for r in runs:
            ms = r.machine_state
            out.append(machine_states.label(ms.get("probe_before"), ms.get("probe_after"), ms.get("load"),
                                           reference).state if ms else None)
        return out

    # -- measuring ------------------------------------------------------------------------
    def run_processes(self, workload: Workload, how: CellRun, processes: Optional[int] = None) -> CellMeasurement:
        """``processes`` fresh processes of ``how`` (pairs with the reference in A/B mode:
        duet pairs when ``how`` has a duet, else process pairs)."""
        n = processes or self.options.processes
        runs: List[RunResult] = []
        run = how.process
        if self.options.reference:
            ref: List[RunResult] = []
            cand_py, ref_py = self.options.python, self.options.reference
            key = workload.key()
            duet_pair = how.duet if key not in self.duet_fallbacks else None
            i = 0
            while i < (processes or (self.duet_pairs if duet_pair is not None else self.ab_pairs)):
                paired = None
                if duet_pair is not None:  # resident workers taking turns (duet.py): the pair is one unit
                    try:
                        paired = self._bracketed_pair(duet_pair, cand_py, ref_py, i, bool(i % 2))
                    except duet.NoRoomForTwo as exc:  # one line, then process pairs for this cell
                        # said once, with the end of the session's lines (a test's output is captured)
                        self.duet_fallbacks[key] = f"mxperf: {key}: {exc}; its A/B pairs run as process pairs"
                        duet_pair = None
                        continue  # this pair again, as a process pair (and a process pair's count)
                if paired is not None:
                    runs.append(paired[0])
                    ref.append(paired[1])
                else:
                    order = ((cand_py, runs), (ref_py, ref)) if i % 2 else ((ref_py, ref), (cand_py, runs))
                    for py, out in order:
                        out.append(self._bracketed(run, py, i))
                        if key in self.duet_fallbacks:
                            out[-1].meta["duet_fallback"] = self.duet_fallbacks[key]
                i += 1
                if not (runs[-1].ok and ref[-1].ok):
                    break  # a side that fails will not succeed by repeating it
            return CellMeasurement(workload, runs, ref)
        for i in range(n):
            r = self._bracketed(run, self.options.python, i)
            runs.append(r)
            if not r.ok:
                break  # a crash, OOM or timeout will not go away by repeating it
        return CellMeasurement(workload, runs)

    def throughput_run(self, workload: Workload, extra_env: Optional[Mapping[str, str]] = None) -> CellRun:
        o = self.options

        def run(python: Optional[str], seed: int) -> RunResult:
            return runner.run_workload(workload, time_budget=o.time_budget, smoke=o.smoke, timeout=o.timeout,
                                       memory_limit=o.memory_limit, env=self.environ, extra_env=extra_env,
                                       python=python, seed=seed, warmup_timeout=o.warmup_timeout)

        def duet_pair(candidate: Optional[str], reference: Optional[str], seed: int, candidate_first: bool):
            return duet.run_pair(workload, candidate=candidate, reference=reference, seed=seed,
                                 candidate_first=candidate_first, time_budget=o.time_budget, smoke=o.smoke,
                                 timeout=o.timeout, warmup_timeout=o.warmup_timeout, memory_limit=o.memory_limit,
                                 env=self.environ, extra_env=extra_env,
                                 known_need_mib=self.gpu_memory_known(workload.key()))
        # A/B pairs of this worker kind run as a duet (resident workers alternating rounds)
        return CellRun(run, duet_pair)

    def gpu_memory_known(self, key: str) -> Optional[float]:
        """The most GPU memory one process of cell ``key`` held (``gpu_memory_mib``: the process's
        own), from this session's processes, else from the baseline's; None when unknown."""
        seen = [v for rec in self.records if rec.key == key
                for r in rec.cell.runs + list(rec.cell.reference or []) for v in [r.value("gpu_memory_mib")]
                if v is not None]
        if not seen and self.baseline is not None:
            seen = self.baseline.values(key, "gpu_memory_mib") or []  # None: no such figure recorded
        return max(seen) if seen else None

    def measure(self, workload: Workload, processes: Optional[int] = None,
                extra_env: Optional[Mapping[str, str]] = None) -> CellMeasurement:
        """Measure one throughput/latency cell in fresh worker processes."""
        return self.run_processes(workload, self.throughput_run(workload, extra_env), processes)

    @staticmethod
    def shared_key(workload: Workload, extra_env: Optional[Mapping[str, str]] = None,
                   processes: Optional[int] = None, how: str = "throughput") -> Tuple:
        """What makes two requests the same measurement: the cell, how it is measured (a
        worker kind and its spec), the environment laid over the session's and the processes."""
        return (how, workload, tuple(sorted((extra_env or {}).items())), processes)

    def measured(self, key: Tuple) -> Optional[CellMeasurement]:
        """The measurement of ``shared_key`` ``key`` if a test has made it, else None."""
        return self._measured.get(key)

    def keep(self, key: Tuple, cell: CellMeasurement) -> CellMeasurement:
        """``cell`` as the measurement of ``shared_key`` ``key`` for the rest of the session."""
        self._measured[key] = cell
        return cell

    def can_share_process(self, workload: Workload) -> bool:
        """Whether ``workload`` may be measured in a worker process with other cells: a CPU
        throughput cell outside A/B mode (a duet pairs one cell's two installs) and without
        --perf-deadline (whose plan starts one test at a time). GPU cells keep a process of
        their own: MXNet's GPU memory pool and cuDNN's autotune choices would carry over."""
        o = self.options
        return (workload.device == "cpu" and not o.reference and o.deadline is None
                and workload.mode in ("score", "train", "latency"))

    def measure_cells(self, workloads: Sequence[Workload], extra_env: Optional[Mapping[str, str]] = None,
                      processes: Optional[int] = None) -> Dict[str, CellMeasurement]:
        """Throughput cells, each measured once in the session: the ones not measured yet run
        together in worker processes of several cells (``runner.run_cells``) when there are
        two or more that ``can_share_process``; any other alone (``measure``). Returns every
        one of ``workloads`` by its key."""
        out: Dict[str, CellMeasurement] = {}
        todo = []
        for w in dict.fromkeys(workloads):
            known = self.measured(self.shared_key(w, extra_env, processes))
            if known is not None:
                out[w.key()] = known
            else:
                todo.append(w)
        shared = [w for w in todo if self.can_share_process(w)]
        if len(shared) < 2:
            shared = []
        for w in todo:
            if w not in shared:
                out[w.key()] = self.keep(self.shared_key(w, extra_env, processes), self.measure(w, processes, extra_env))
        for w, cell in self._measure_together(shared, extra_env, processes).items():
            out[w.key()] = self.keep(self.shared_key(w, extra_env, processes), cell)
        return out

    @staticmethod
    def process_order(items: Sequence[Any], i: int, n: int) -> List[Any]:
        """The order of ``items`` in the ``i``-th of ``n`` processes: rotated by a share of the
        list every second process, and reversed in every odd one, so that the same cell is not
        always at the same point of a process (nor of the session's slow spells)."""
        items = list(items)
        if not items:
            return items
        rot = ((i // 2) * max(1, len(items) // max(1, n))) % len(items)
        items = items[rot:] + items[:rot]
        return items[::-1] if i % 2 else items

    def _measure_together(self, workloads: Sequence[Workload], extra_env: Optional[Mapping[str, str]],
                          processes: Optional[int]) -> Dict[Workload, CellMeasurement]:
        """``workloads`` in ``processes`` worker processes, each measuring all of them in its own
        order (``process_order``) with the machine probe around it; process i's seed is i for
        every cell, as when a cell has processes of its own. A cell whose process failed in it
        is not measured again (a crash will not go away by repeating it); the cells that
        process did not reach run in a fresh one."""
        if not workloads:
            return {}
        o = self.options
        n = processes or o.processes
        runs: Dict[Workload, List[RunResult]] = {w: [] for w in workloads}
        done: set = set()  # cells that failed, or cannot run here: not measured again
        for i in range(n):
            todo = [w for w in self.process_order(workloads, i, n) if w not in done]
            while todo:
                got: List[Optional[RunResult]] = []

                def one_process(cells=tuple(todo), seed=i):
                    got[:] = runner.run_cells(cells, time_budget=o.time_budget, smoke=o.smoke, timeout=o.timeout,
                                              memory_limit=o.memory_limit, env=self.environ, extra_env=extra_env,
                                              python=o.python, seed=seed, warmup_timeout=o.warmup_timeout)
                    return [r for r in got if r is not None]
                self._with_machine_state(one_process)
                rest = []
                for w, r in zip(todo, got):
                    if r is None:
                        rest.append(w)
                        continue
                    runs[w].append(r)
                    if not r.ok:
                        done.add(w)
                if len(rest) == len(todo):  # nothing reached: never loop
                    break
                todo = rest
        if self.expected_cells:  # a grid done: where the session is
            self._last_progress = time.monotonic()
            self.say(self.progress_line())
        return {w: CellMeasurement(w, rs) for w, rs in runs.items()}

    #: seconds between two progress lines
    PROGRESS_EVERY_S = 30.0

    def progress_line(self) -> str:
        """How far the session is: cells measured (a cell's processes done over the processes
        a cell gets), cells left, and the time left: the plan's estimate of what is left,
        scaled by how the measured part went against its estimate."""
        gone = time.time() - self.started
        per_cell = max(1, self.duet_pairs if self.options.reference else self.options.processes)
        done = self.runs_done / per_cell
        parts = [f"mxperf: {done:.0f} of {self.expected_cells} cell(s) measured" if self.expected_cells
                 else f"mxperf: {done:.0f} cell(s) measured", f"{gone / 60:.1f} min gone"]
        if self.estimate_seconds and self.expected_cells:
            share = min(1.0, done / self.expected_cells)
            if share > 0:
                left = max(0.0, gone / share - gone)
            else:
                left = self.estimate_seconds
            parts.append(f"about {left / 60:.1f} min left")
        return ", ".join(parts)

    def _progress(self, results: Sequence[RunResult]) -> None:
        """``results`` measured (a duet pair's two sides count as one); the progress line, at
        most every PROGRESS_EVERY_S."""
        self.runs_done += min(1, len(results)) if self.options.reference else len(results)
        now = time.monotonic()
        if self.expected_cells and now - self._last_progress >= self.PROGRESS_EVERY_S:
            self._last_progress = now
            self.say(self.progress_line())

    def expect(self, cells: int, estimate_seconds: Optional[float]) -> None:
        """The plan: how many cells the session will measure and what it said it would take."""
        self.expected_cells = cells
        self.estimate_seconds = estimate_seconds

    def add(self, record: CellRecord) -> None:
        self.records.append(record)

    # -- what the session is told while it runs (the plugin and the fixture) -----------------
    def begin(self, machine: Dict[str, Any], baseline: Optional[Baseline], options: Optional[PerfOptions] = None,
              reference_requirement: Optional[str] = None) -> None:
        """The session's machine, its baseline, and the options as settled once the baseline is
        known (``--perf-reference baseline`` becomes the install it was recorded with)."""
        self.machine = machine
        self.baseline = baseline
        if options is not None:
            self.options = options
        self.reference_requirement = reference_requirement

    def plan(self, ab_pairs: int, planned_test_seconds: Optional[float]) -> None:
        """The pairs a process-pair cell gets in A/B mode and the plan's estimate of one test."""
        self.ab_pairs = ab_pairs
        self.planned_test_seconds = planned_test_seconds

    def deselected(self, slow: int) -> None:
        self.deselected_slow = slow

    def no_usable_gpu(self, reason: str, fails: bool) -> None:
        """No GPU can be used here (``gpu_readiness``): GPU contexts skip with ``reason``;
        the session fails when ``fails``."""
        self.no_gpu_reason = reason
        self.no_gpu_fails = fails

    def test_not_reached(self, nodeid: str) -> None:
        """A measuring test the deadline left unstarted."""
        self.not_reached.append(nodeid)

    def test_took(self, seconds: float) -> None:
        self.test_seconds.append(seconds)

    def skipped(self, reason: str) -> None:
        """Why a measuring test could not run here (no GPU, a build without a feature)."""
        self.skipped_reasons.append(reason)

    def show(self, finding: "Finding") -> None:
        """A figure shown, not judged."""
        self.findings.append(finding)

    def peak(self, key: str, measure: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
        """The machine's peak for ``key`` ("context/dtype"), measured by ``measure`` the first
        time it is asked for and kept for the session."""
        if key not in self.peaks:
            self.peaks[key] = measure()
        return self.peaks[key]

    def cells(self) -> Dict[str, CellRecord]:
        """Every cell measured so far, once (``merge_records``): a new value on every call."""
        return merge_records(self.records)

    def measured_cells(self) -> Dict[str, CellRecord]:
        """The cells with at least one process that measured: what the end of a session judges."""
        return {k: r for k, r in self.cells().items() if r.cell.ok_runs}

    def confirm(self, key: str, processes: int) -> Optional[CellMeasurement]:
        """Measure cell ``key`` again in ``processes`` more processes (pairs in A/B mode),
        through the worker kind that measured it (its record's ``remeasure``), and keep them as
        a record of their own; None when the cell cannot be measured again."""
        rec = self.cells().get(key)
        if rec is None or rec.remeasure is None or processes <= 0:
            return None
        extra = rec.remeasure(processes)
        self.add(CellRecord(rec.nodeid, extra, outcome="measured", note="", remeasure=rec.remeasure))
        return extra

    def floor_for(self, cell: CellMeasurement) -> floors.Floor:
        w = cell.workload
        mode = w.mode if w.mode in ("score", "train") else None
        if mode is None or w.num_devices != 1 or w.model not in zoo.MODELS:
            why = ("published tables are single-device" if mode and w.num_devices != 1
                   else f"no published table for {w.model}" if mode else f"no published table for mode {w.mode}")
            return floors.Floor(None, None, None, None, self.options.floor_tolerance, False, why)
        if w.dtype != "float32":
            return floors.Floor(None, None, None, None, self.options.floor_tolerance, False,
                                f"the published tables are float32; no floor for {w.dtype}")
        # a GPU cell is held to the table of the GPU it runs on (gpu:N as NVML names it)
        return floors.select_floor(hardware.for_contexts(self.hardware, w.contexts), mode, w.model,
                                   w.batch_size, w.device, tolerance=self.options.floor_tolerance)
