"""How a session's cells are measured (the scheduler of ``measure/session.py``): each worker
process bracketed by the machine-state probe (``machine/state.py``), a cell two tests ask for
measured once, a test's grid of CPU cells in worker processes of several cells, and in A/B
mode pairs of the two installs (duet pairs of resident workers taking turns, else process
pairs back to back, the order alternating pair by pair: AB, BA, AB, ... so that drift and
order effects cancel). ``confirm`` measures what the end of the session asks for more of
(``MoreToMeasure``). The session's context is read, never changed; what is measured goes to
the clock (progress) and the ledger (probes, events), and back to the caller as new values.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf import zoo
from pytest_mxperf.judge import floors
from pytest_mxperf.machine import hardware
from pytest_mxperf.measure import duet, runner
from pytest_mxperf.measure.ledger import DUET_FALLBACK, NO_GPU, CellRecord, Event, Ledger
from pytest_mxperf.model import kinds
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.proc import worker

#: a probe younger than this is reused as the next process's "before" probe
PROBE_REUSE_SECONDS = 2.0

RunFn = Callable[["Side", int], RunResult]  # (side, seed) -> one process
#: (candidate side, reference side, seed, candidate first) -> one duet pair's two sides
DuetFn = Callable[["Side", "Side", int, bool], Tuple[RunResult, RunResult]]


@dataclasses.dataclass(frozen=True)
class CellRun:
    """How a cell's processes run: ``process`` runs one fresh worker process; ``duet``, for
    worker kinds that can be resident (``duet.resident``), runs one A/B duet pair, which A/B
    mode then uses instead of process pairs."""

    process: RunFn
    duet: Optional[DuetFn] = None


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of a comparison: the interpreter whose MXNet install runs it (None: this
    session's ``--perf-python``, else this interpreter) and its environment: None, the
    session's as it is; else the recorded variables it runs with (a baseline's recorded
    setup), which replace every variable of the session's that a baseline records
    (``topology.RECORDED_ENV_PREFIXES``: threading, MXNet, oneDNN, ...); the others (e.g.
    ``LD_PRELOAD``) stay the session's."""

    python: Optional[str] = None
    environment: Optional[Tuple[Tuple[str, str], ...]] = None

    def environ(self, session: Mapping[str, str]) -> Dict[str, str]:
        """This side's base environment, from the ``session``'s (a new dict)."""
        if self.environment is None:
            return dict(session)
        from pytest_mxperf.machine import topology
        out = {k: v for k, v in session.items() if not k.startswith(topology.RECORDED_ENV_PREFIXES)}
        out.update(dict(self.environment))
        return out


@dataclasses.dataclass(frozen=True)
class MoreToMeasure:
    """What the end of a session asks to measure again of one cell: ``count`` more processes
    (``kind`` "processes": the candidate side alone) or pairs ("duet" or "process-pairs":
    ``candidate`` against ``reference``), expected to take ``seconds`` each, to settle a
    verdict at the cell's ``min_effect``."""

    key: str
    count: int
    kind: str = "processes"
    candidate: Side = Side()
    reference: Optional[Side] = None
    seconds: float = 0.0
    min_effect: float = 0.05

    @property
    def cost(self) -> float:
        return self.count * self.seconds


@dataclasses.dataclass(frozen=True)
class Remeasure:
    """How a recorded cell is measured again (a record's ``remeasure``, called as one):
    ``alone(more)`` in pairs or processes of its own; for a cell measured with the other cells
    of its ``grid`` (their keys; empty: measured alone) in processes or pairs they shared, the
    ``extra_env`` laid over the session's and ``finish``, what its test adds to every
    measurement of it (derived figures), so that a round's cells of one grid share their pairs
    again (``confirm_all``), and no cell shares a pair it was not measured in."""

    alone: Callable[[MoreToMeasure], CellMeasurement]
    grid: FrozenSet[str] = frozenset()
    extra_env: Tuple[Tuple[str, str], ...] = ()
    finish: Callable[[CellMeasurement], CellMeasurement] = lambda cell: cell

    def __call__(self, more: MoreToMeasure) -> CellMeasurement:
        return self.alone(more)


class Scheduler:
    """How the session's cells are measured. ``context()``: the session's frozen context
    (``session.SessionContext``); ``clock``: its ``session.Clock``."""

    def __init__(self, context: Callable[[], Any], ledger: Ledger, clock: Any,
                 given_machine_state: Callable[[str], Optional[Dict[str, Any]]]):
        self._context = context
        self.ledger = ledger
        self.clock = clock
        # the plugin's hook pytest_mxperf_machine_state: part ("probe" / "load") -> the
        # machine's state as given instead of measured, or None to measure it
        self._given_state = given_machine_state
        self._probe_cache: Dict[Optional[str], Dict[str, Any]] = {}
        self._hw: Optional[hardware.HardwareInfo] = None
        self._last_probe: Optional[tuple] = None
        # measured peaks per "context/dtype" (fixture.machine_peak): each measured once,
        # lazily, the first time a cell's GFLOP/s is set against it
        self._peaks: Dict[str, Dict[str, Any]] = {}
        # every cell measured so far, by what measured it (``shared_key``): a test that asks
        # for a cell another test measured gets that measurement, not a second one
        self._measured: Dict[Tuple, CellMeasurement] = {}

    @property
    def context(self):
        """The session's context (``session.SessionContext``), as it is now."""
        return self._context()

    @property
    def options(self):
        return self._context().options

    @property
    def environ(self) -> Mapping[str, str]:
        return self._context().environ

    # -- facts, gathered once and only when needed ------------------------------------
    def probe_mxnet(self, python: Optional[str] = None) -> Dict[str, Any]:
        """What MXNet a worker interpreter has (version, features, GPUs), asked once."""
        if python not in self._probe_cache:
            self._probe_cache[python] = worker.probe(python, env=dict(self.environ))
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
            self._hw = hardware.hardware_info(dict(self.environ))
        return self._hw

    def gpu_unavailable_reason(self, contexts: Sequence[str]) -> Optional[str]:
        """Why GPU contexts cannot run here, or None when they can (or are CPU)."""
        gpus = [c for c in contexts if c.startswith("gpu")]
        if not gpus:
            return None
        no_gpu = self.ledger.events(NO_GPU)
        if no_gpu:
            return no_gpu[0].text
        have = self.num_gpus
        if self.probe.get("status") not in (None, "ok"):
            return f"cannot probe MXNet for GPUs: {self.probe.get('message')}"
        if have == 0:
            return "no GPU here: mx.context.num_gpus() is 0"
        top = max(int(c.split(":")[1]) for c in gpus)
        if top >= have:
            return f"{','.join(gpus)} requested but this machine has {have} GPU(s) (gpu:0..gpu:{have - 1})"
        return None

    def peak(self, key: str, measure: Callable[[], Dict[str, Any]]) -> Dict[str, Any]:
        """The machine's peak for ``key`` ("context/dtype"), measured by ``measure`` the first
        time it is asked for and kept for the session."""
        if key not in self._peaks:
            self._peaks[key] = measure()
        return self._peaks[key]

    def floor_for(self, cell: CellMeasurement) -> floors.Floor:
        w = cell.workload
        tolerance = self.options.floor_tolerance
        mode = w.mode if w.mode in kinds.FLOOR_MODES else None
        if mode is None or w.num_devices != 1 or w.model not in zoo.MODELS:
            why = ("published tables are single-device" if mode and w.num_devices != 1
                   else f"no published table for {w.model}" if mode else f"no published table for mode {w.mode}")
            return floors.Floor(None, None, None, None, tolerance, False, why)
        if w.dtype != "float32":
            return floors.Floor(None, None, None, None, tolerance, False,
                                f"the published tables are float32; no floor for {w.dtype}")
        # a GPU cell is held to the table of the GPU it runs on (gpu:N as NVML names it)
        return floors.select_floor(hardware.for_contexts(self.hardware, w.contexts), mode, w.model,
                                   w.batch_size, w.device, tolerance=tolerance)

    # -- the machine-state probe around every process -----------------------------------
    def _machine_probe(self) -> Optional[Dict[str, Any]]:
        from pytest_mxperf.machine import state as machine_state
        now = time.monotonic()
        if self._last_probe and now - self._last_probe[0] < PROBE_REUSE_SECONDS:
            return self._last_probe[1]
        given = self._given_state("probe")
        p = dict(given) if given is not None else machine_state.run_probe(env=dict(self.environ))
        self._last_probe = (time.monotonic(), p)
        return p

    def _with_machine_state(self, measure: Callable[[], Sequence[RunResult]]) -> List[RunResult]:
        """What ``measure`` ran (one process, or a duet pair's two sides, which ran inside the
        same window), each a new value with the machine's state measured right before and
        after it."""
        paired = self.context.comparison.paired
        if not self.options.machine_probe:
            results = list(measure())
            self.clock.measured(results, paired)
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
        results = [r.with_machine_state(before, after, load) for r in results]
        self.ledger.probed([before, after])
        self.clock.measured(results, paired)
        return results

    def _bracketed(self, run: RunFn, side: Side, seed: int) -> RunResult:
        """One process, with the machine's state measured right before and after it."""
        return self._with_machine_state(lambda: [run(side, seed)])[0]

    def _bracketed_pair(self, pair: DuetFn, candidate: Side, reference: Side, seed: int,
                        candidate_first: bool) -> Tuple[RunResult, RunResult]:
        """One duet pair, with the machine's state measured right before and after it (both
        sides carry the same state)."""
        c, r = self._with_machine_state(lambda: pair(candidate, reference, seed, candidate_first))
        return c, r

    def label_now(self, runs: Sequence[RunResult]) -> List[Optional[str]]:
        """Machine-state labels of ``runs`` against the session's probes so far (the end of
        the session labels everything against one reference)."""
        from pytest_mxperf.judge import machine_states
        reference = machine_states.reference_from(self.ledger.probes)
        out = []
        for r in runs:
            ms = r.machine_state
            out.append(machine_states.label(ms.get("probe_before"), ms.get("probe_after"), ms.get("load"),
                                           reference).state if ms else None)
        return out

    # -- measuring ------------------------------------------------------------------------
    def _fallback(self, key: str) -> Optional[str]:
        """Why cell ``key``'s A/B pairs run as process pairs (its duet's two pools did not fit)."""
        said = [e.text for e in self.ledger.events(DUET_FALLBACK) if e.subject == key]
        return said[0] if said else None

    def run_processes(self, workload: Workload, how: CellRun, processes: Optional[int] = None) -> CellMeasurement:
        """``processes`` fresh processes of ``how`` (pairs with the reference in A/B mode, and
        with the recorded setup on a baseline's paired path for a cell the baseline records:
        duet pairs when ``how`` has a duet, else process pairs)."""
        ctx = self.context
        reference = self.paired_with(workload)
        if reference is not None:
            return self._pairs(workload, how, Side(ctx.options.python), reference, processes)
        return self._processes(workload, how, Side(ctx.options.python), processes or ctx.options.processes)

    def paired_with(self, workload: Workload) -> Optional[Side]:
        """The side a cell's first processes are paired with: the reference install in A/B mode;
        on a baseline's paired path (``Comparison.from_start``) the recorded setup (its install,
        the cell's recorded variables) for a cell the baseline records; else None (the cell's
        processes are its own)."""
        ctx = self.context
        if ctx.comparison.ab:
            return Side(ctx.comparison.reference)
        if not ctx.comparison.paired or ctx.baseline is None:
            return None
        env = ctx.baseline.recorded_env(workload.key())
        if env is None:
            return None
        return Side(ctx.comparison.setup.python, tuple(sorted(env.items())))

    def _processes(self, workload: Workload, how: CellRun, side: Side, n: int) -> CellMeasurement:
        runs: List[RunResult] = []
        for i in range(n):
            r = self._bracketed(how.process, side, i)
            runs.append(r)
            if not r.ok:
                break  # a crash, OOM or timeout will not go away by repeating it
        return CellMeasurement(workload, runs)

    def _pairs(self, workload: Workload, how: CellRun, candidate: Side, reference: Side,
               processes: Optional[int]) -> CellMeasurement:
        ctx = self.context
        runs: List[RunResult] = []
        ref: List[RunResult] = []
        key = workload.key()
        duet_pair = how.duet if self._fallback(key) is None else None
        i = 0
        while i < (processes or (ctx.plan.first_pairs_of(key, ctx.options.duet_pairs) if duet_pair is not None
                                 else ctx.plan.ab_pairs or ctx.options.ab_pairs)):
            paired = None
            if duet_pair is not None:  # resident workers taking turns (duet.py): the pair is one unit
                try:
                    paired = self._bracketed_pair(duet_pair, candidate, reference, i, bool(i % 2))
                except duet.NoRoomForTwo as exc:  # one line, then process pairs for this cell
                    # said once, with the end of the session's lines (a test's output is captured)
                    self.ledger.event(Event(DUET_FALLBACK, f"{key}: {exc}; its A/B pairs run as process pairs", key))
                    duet_pair = None
                    continue  # this pair again, as a process pair (and a process pair's count)
            if paired is None:
                fallback = self._fallback(key)
                order = ((candidate, runs), (reference, ref)) if i % 2 else ((reference, ref), (candidate, runs))
                done = {}
                for side, out in order:
                    r = self._bracketed(how.process, side, i)
                    done[id(out)] = r.with_facts(duet_fallback=fallback) if fallback else r
                paired = done[id(runs)], done[id(ref)]
            runs.append(paired[0])
            ref.append(paired[1].with_facts(pair_of=paired[0].process))  # which process it was paired with
            i += 1
            if not (runs[-1].ok and ref[-1].ok):
                break  # a side that fails will not succeed by repeating it
        return CellMeasurement(workload, runs, ref)

    def throughput_run(self, workload: Workload, extra_env: Optional[Mapping[str, str]] = None) -> CellRun:
        o = self.options
        environ = dict(self.environ)

        def run(side: Side, seed: int) -> RunResult:
            return runner.run_workload(workload, time_budget=o.time_budget, smoke=o.smoke, timeout=o.timeout,
                                       memory_limit=o.memory_limit, env=side.environ(environ), extra_env=extra_env,
                                       python=side.python, seed=seed, warmup_timeout=o.warmup_timeout)

        def duet_pair(candidate: Side, reference: Side, seed: int, candidate_first: bool):
            return duet.run_pair(workload, candidate=candidate.python, reference=reference.python, seed=seed,
                                 candidate_first=candidate_first, time_budget=o.time_budget, smoke=o.smoke,
                                 timeout=o.timeout, warmup_timeout=o.warmup_timeout, memory_limit=o.memory_limit,
                                 env=candidate.environ(environ), reference_env=reference.environ(environ),
                                 extra_env=extra_env, known_need_mib=self.gpu_memory_known(workload.key()))
        # A/B pairs of this worker kind run as a duet (resident workers alternating rounds)
        return CellRun(run, duet_pair)

    def gpu_memory_known(self, key: str) -> Optional[float]:
        """The most GPU memory one process of cell ``key`` held (``gpu_memory_mib``: the process's
        own), from this session's processes, else from the baseline's; None when unknown."""
        seen = [v for rec in self.ledger.records if rec.key == key
                for r in rec.cell.runs + (rec.cell.reference or ()) for v in [r.value("gpu_memory_mib")]
                if v is not None]
        baseline = self.context.baseline
        if not seen and baseline is not None:
            seen = baseline.values(key, "gpu_memory_mib") or []  # None: no such figure recorded
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

    def can_share_process(self, workload: Workload) -> bool:
        """Whether ``workload`` may be measured in a worker process with other cells: a CPU
        throughput cell; when its processes are paired (``paired_with``: in A/B mode and on a
        baseline's paired path) a zoo cell whose duet pairs serve a grid's cells in turn
        (``duet.run_cells_pair``, ``duet.shares_a_pair``), with or
        without --perf-deadline (a baseline records how its cells' processes were had, and a
        figure measured one way is not judged against one measured the other: a deadline that
        kept processes of their own judged no grid cell against a baseline the default command
        recorded; the deadline expects a grid's first test to take the grid,
        ``Clock.past_deadline``). GPU cells keep a process of their own: MXNet's GPU memory
        pool and cuDNN's autotune choices would carry over. Which kinds may: ``Kind.shares_process``."""
        return (workload.device == "cpu" and kinds.kind(workload.mode).shares_process
                and (self.paired_with(workload) is None or duet.shares_a_pair(workload)))

    def measure_cells(self, workloads: Sequence[Workload], extra_env: Optional[Mapping[str, str]] = None,
                      processes: Optional[int] = None) -> Dict[str, CellMeasurement]:
        """Throughput cells, each measured once in the session: the ones not measured yet run
        together in worker processes of several cells (``runner.run_cells``) when there are
        two or more that ``can_share_process``; any other alone (``measure``). Returns every
        one of ``workloads`` by its key."""
        out: Dict[str, CellMeasurement] = {}
        todo = []
        for w in dict.fromkeys(workloads):
            known = self._measured.get(self.shared_key(w, extra_env, processes))
            if known is not None:
                out[w.key()] = known
            else:
                todo.append(w)
        shared = [w for w in todo if self.can_share_process(w)]
        if len(shared) < 2:
            shared = []
        for w in todo:
            if w not in shared:
                out[w.key()] = self._keep(self.shared_key(w, extra_env, processes), self.measure(w, processes, extra_env))
        for w, cell in self._measure_together(shared, extra_env, processes).items():
            out[w.key()] = self._keep(self.shared_key(w, extra_env, processes), cell)
        return out

    def _keep(self, key: Tuple, cell: CellMeasurement) -> CellMeasurement:
        """``cell`` as the measurement of ``shared_key`` ``key`` for the rest of the session."""
        self._measured[key] = cell
        return cell

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
        environ = dict(self.environ)
        pairing: Dict[Side, List[Workload]] = {}
        for w in workloads:
            side = self.paired_with(w)
            if side is not None:
                pairing.setdefault(side, []).append(w)
        out: Dict[Workload, CellMeasurement] = {}
        for reference, cells in pairing.items():
            n = {w: processes or self.context.plan.first_pairs_of(w.key(), o.duet_pairs) for w in cells}
            out.update(self._pairs_together(cells, Side(o.python), reference, extra_env, n))
        workloads = [w for w in workloads if w not in out]
        if not workloads:
            return out
        n = processes or o.processes

        def once(cells: Tuple[Workload, ...], seed: int) -> List[Optional[Tuple[RunResult, ...]]]:
            got: List[Optional[RunResult]] = []

            def one_process():
                got[:] = runner.run_cells(cells, time_budget=o.time_budget, smoke=o.smoke, timeout=o.timeout,
                                          memory_limit=o.memory_limit, env=environ, extra_env=extra_env,
                                          python=o.python, seed=seed, warmup_timeout=o.warmup_timeout)
                return [r for r in got if r is not None]
            stamped = iter(self._with_machine_state(one_process))  # new values: with the machine's state
            return [None if r is None else (next(stamped),) for r in got]
        runs = self._in_turn(workloads, dict.fromkeys(workloads, n), once)
        if self.context.plan.cells:  # a grid done: where the session is
            self.clock.say_progress()
        out.update((w, CellMeasurement(w, [r for (r,) in rs])) for w, rs in runs.items())
        return out

    def _in_turn(self, workloads: Sequence[Workload], counts: Mapping[Workload, int],
                 once: Callable[[Tuple[Workload, ...], int], List[Optional[Tuple[RunResult, ...]]]],
                 on_done: Optional[Callable[[Workload], None]] = None) -> Dict[Workload, List[Tuple[RunResult, ...]]]:
        """Cells measured together, ``counts[w]`` times each: ``once(cells, i)`` measures the
        cells once in the i-th process (or pair), in ``process_order``, and returns what each
        got (None: not reached). A cell whose process failed is not measured again (a crash
        will not go away by repeating it); the cells a process did not reach run in a fresh
        one. ``on_done(w)``: said once a cell has all it will get."""
        got: Dict[Workload, List[Tuple[RunResult, ...]]] = {w: [] for w in workloads}
        failed: set = set()
        told: set = set()

        def tell(w: Workload) -> None:
            if on_done is not None and w not in told:
                told.add(w)
                on_done(w)
        n = max(counts.values(), default=0)
        for i in range(n):
            todo = [w for w in self.process_order(workloads, i, n) if w not in failed and counts[w] > i]
            while todo:
                rest = []
                for w, r in zip(todo, once(tuple(todo), i)):
                    if r is None:
                        rest.append(w)
                        continue
                    got[w].append(r)
                    if not all(x.ok for x in r):
                        failed.add(w)
                    if w in failed or len(got[w]) >= counts[w]:
                        tell(w)
                if len(rest) == len(todo):  # nothing reached: never loop
                    break
                todo = rest
        for w in workloads:
            tell(w)
        return got

    def _pairs_together(self, workloads: Sequence[Workload], candidate: Side, reference: Side,
                        extra_env: Optional[Mapping[str, str]], counts: Mapping[Workload, int],
                        on_done: Optional[Callable[[Workload], None]] = None) -> Dict[Workload, CellMeasurement]:
        """A grid's paired cells in duet pairs that serve them all in turn (``duet.run_cells_pair``),
        ``counts[w]`` pairs each (``_in_turn``): pair i's cells in ``process_order`` and its
        candidate first in every odd pair, as one cell's pairs (``_pairs``); the machine probe
        around each pair; a cell left alone in a pair runs in a pair of its own."""
        o = self.options
        environ = dict(self.environ)

        def once(cells: Tuple[Workload, ...], seed: int) -> List[Optional[Tuple[RunResult, ...]]]:
            if len(cells) == 1:
                pair = self.throughput_run(cells[0], extra_env).duet
                return [self._bracketed_pair(pair, candidate, reference, seed, bool(seed % 2))]
            got: List[Optional[Tuple[RunResult, RunResult]]] = []

            def one_pair():
                got[:] = duet.run_cells_pair(
                    cells, candidate=candidate.python, reference=reference.python, seed=seed,
                    candidate_first=bool(seed % 2), time_budget=o.time_budget, smoke=o.smoke,
                    timeout=o.timeout, warmup_timeout=o.warmup_timeout, memory_limit=o.memory_limit,
                    env=candidate.environ(environ), reference_env=reference.environ(environ),
                    extra_env=extra_env)
                return [r for p in got if p is not None for r in p]
            stamped = iter(self._with_machine_state(one_pair))  # new values: with the machine's state
            return [None if p is None else (next(stamped), next(stamped)) for p in got]
        pairs = self._in_turn(workloads, counts, once, on_done)
        # the reference side says which process it was paired with
        return {w: CellMeasurement(w, [c for c, _ in ps], [r.with_facts(pair_of=c.process) for c, r in ps])
                for w, ps in pairs.items()}

    # -- what the end of the session asks for ----------------------------------------------
    def run_more(self, workload: Workload, how: CellRun, more: MoreToMeasure) -> CellMeasurement:
        """``more.count`` more processes of one side, or pairs of its two sides, of ``how``, each
        side with its own interpreter and environment: what a record's ``remeasure`` runs."""
        if more.kind == "processes" or more.reference is None:
            return self._processes(workload, how, more.candidate, more.count)
        pairs_how = how if more.kind == "duet" else CellRun(how.process)
        return self._pairs(workload, pairs_how, more.candidate, more.reference, more.count)

    def confirm(self, more: MoreToMeasure) -> Optional[CellMeasurement]:
        """Measure cell ``more.key`` again: ``more.count`` more processes or pairs, through the
        worker kind that measured it (its record's ``remeasure``), kept as a record of its own;
        None when the cell cannot be measured again."""
        rec = self.ledger.cell(more.key)
        if rec is None or rec.remeasure is None or more.count <= 0:
            return None
        return self._kept_again(rec, rec.remeasure(more))

    def _kept_again(self, rec: CellRecord, extra: CellMeasurement) -> CellMeasurement:
        """``extra``, what cell ``rec`` was measured again, kept as a record of its own."""
        self.ledger.add(CellRecord(rec.nodeid, extra, outcome="measured", note="", remeasure=rec.remeasure,
                                   duets=rec.duets))
        return extra

    def confirm_all(self, wanted: Sequence[MoreToMeasure],
                    said: Callable[[MoreToMeasure], None] = lambda more: None) -> None:
        """What one round of the end of the session asks for, in its order: each cell
        ``confirm``-ed, except that the duet cells of one grid against the same two sides (a
        record's ``Remeasure.grid``, its cell ``duet.shares_a_pair``) share pairs that serve them in
        turn, each cell its own count (``_pairs_together``): a look of six cells of the scoring
        grid starts one worker pair per pair, not six. ``said(more)`` once a cell has what it
        will get."""
        groups: Dict[Tuple, List[Tuple[MoreToMeasure, CellRecord]]] = {}
        for more in wanted:
            rec = self.ledger.cell(more.key)
            how = rec.remeasure if rec is not None else None
            if (more.kind == "duet" and more.count > 0 and more.reference is not None and isinstance(how, Remeasure)
                    and how.grid and duet.shares_a_pair(rec.cell.workload) and self._fallback(more.key) is None):
                groups.setdefault((more.candidate, more.reference, how.extra_env, how.grid), []).append((more, rec))
        together = {more.key: group for group in groups.values() if len(group) > 1 for more, _ in group}
        done: set = set()
        for more in wanted:
            if more.key in done:
                continue
            group = together.get(more.key)
            if group is None:
                self.confirm(more)
                said(more)
                done.add(more.key)
                continue
            by_cell = {rec.cell.workload: (m, rec) for m, rec in group}
            first = group[0][0]
            extra_env = dict(group[0][1].remeasure.extra_env)
            cells = self._pairs_together(list(by_cell), first.candidate, first.reference, extra_env,
                                         {w: m.count for w, (m, _) in by_cell.items()},
                                         on_done=lambda w: said(by_cell[w][0]))
            for w, cell in cells.items():
                m, rec = by_cell[w]
                self._kept_again(rec, rec.remeasure.finish(cell))
                done.add(m.key)
