"""Replay recorded processes through the product's own end of a session, to measure its
error rates: how often a session of N unchanged cells fails, and how often one changed cell
among them is caught.

Nothing here judges. A simulated session is a ``PerfSession`` begun and planned as the
plugin does it (``planning.plan_for``: the pairs a cell gets follow from N), on a clock
that moves by the recorded processes' wall time (so the confirmation budget is a real
session's of that size); each cell is recorded into its ledger and held to its floor by the
``mxperf`` fixture's own ``Measurer`` (``record``, ``check_floor``), with a ``remeasure``
callback that draws more recorded processes (or pairs) of the same cell; then the real
``outcome.finish.end_session`` chooses the comparator, labels the machine's state, judges,
settles suspects through ``remeasure`` and applies the failure policy at its defaults.
What is counted:

* **failed**: the session would exit 1: ``SessionOutcome.failed`` (its typed failures from
  ``outcome/policy.py``: a regression, an unresolved slowdown, a cell below its floor). The
  failing kinds are kept apart (regression, unresolved, floor).
* **caught**: the changed cell failed (its primary figure's verdict is failing, or its
  floor check failed).

Recorded processes stand in for workers in three places, nothing else: ``remeasure`` (more
processes of the same recording), the scheduler's MXNet probe and hardware facts
(``replay_session``: what the recording says the interpreter and machine were, instead of
probing this one: a replay is the same on any machine), and the operator profile of a failing cell
(``no_profile_worker``, as tests/stand_ins.py: a replayed session has no worker to profile).

Corpora (``load_*``): ``benchmarks/data/aa-corpus-*.json`` (``collect_aa_corpus.py``: A/A
duet pairs and fresh processes, this VM), the 12 A/A process pairs of the regime file
(``benchmarks/data/vm-regimes-amd-epyc-2vcpu.json``, also ``../shared/data/``) and the
baseline re-runs ``benchmarks/data/replay-*.json``.

How a session is built from a corpus (``ab_session``, ``baseline_session``):

* N simulated cells; cell i draws from the recorded cell ``pools[(offset + i) % P]``
  (``offset`` random per session), so every recorded cell serves N / P simulated ones; a
  replica gets its own key (``threads=<1000 + j>``, a label: no worker runs; the floor
  depends on model, batch and machine, which stay the recorded ones).
* cell 0 is the changed cell: its candidate's round times are divided by ``effect`` (and
  its judged rate figures multiplied by it), so its throughput is exactly x effect in
  every process; the others are unchanged.
* A/B: pairs stay pairs (a candidate run is judged against the reference run recorded with
  it). The first stage draws the plan's duet pairs (process pairs: the plan's ``ab_pairs``,
  ``stats.pairs_needed(N, FDR_Q)``); each cell draws its
  pairs from a fresh shuffle of its pool, without replacement until the pool is used up,
  then from a new shuffle (a second stage may ask for more pairs than were recorded); a
  drawn pair's sides change places with probability 1/2 (A/A: both sides are the same
  install, so the labels are exchangeable; without this a cell of a few recorded pairs
  would replay their chance mean as if it were a change).
* baseline mode: a recorded cell's fresh processes are in time order; a session picks a
  window of ``RECORDING_PROCESSES`` consecutive processes as the current session (fewer
  when the cell has fewer than twice that; the same place in time for every cell: a slow
  spell of the machine moves them all), and the processes before and after it, in time
  order, cut into recordings of ``RECORDING_PROCESSES`` each, are the baseline: the first
  recorded as ``--perf-update-baselines``, the others as ``=add``
  (``baseline_store.summarize_cell``, ``Baseline.add_recordings``, which keeps the newest
  ``HISTORY`` and states each cell's resolution: provisional when there is one recording).
  The current session draws its processes from its window (shuffled; re-drawn when the
  confirmation asks for more than the window holds).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import random
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple
from unittest import mock

from pytest_mxperf.machine.hardware import HardwareInfo
from pytest_mxperf.measure import profiling
from pytest_mxperf.measure.fixture import Fail, Measurer, Skip
from pytest_mxperf.measure.session import PerfSession, RecordedSetup
from pytest_mxperf.model import options as opts
from pytest_mxperf.model.measurement import METRICS, CellMeasurement, RunResult, cell_of
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.model.run_facts import Facts
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.measure import comparison
from pytest_mxperf.outcome import ab_judging, finish
from pytest_mxperf.store import baseline_store
from pytest_mxperf.store.baselines import Baseline

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "benchmarks" / "data"
SHARED_DATA_DIR = ROOT.parent / "shared" / "data"
REGIMES = "vm-regimes-amd-epyc-2vcpu.json"
#: the reference interpreter an A/B replay names (no process runs it)
REFERENCE = "/replayed/reference/bin/python"
RECORDING_PROCESSES = opts.RECORDING_PROCESSES
EFFECTS = (1.0, 0.95, 0.90, 0.80)
SIZES = (6, 24, 64)


# ----------------------------------------------------------------------------- corpora

@dataclasses.dataclass
class Pool:
    """One recorded cell: its duet or process pairs (candidate doc, reference doc) and its
    fresh processes in time order, as plain run documents (``collect_aa_corpus.run_doc``)."""

    workload: Workload
    pairs: List[Tuple[Dict[str, Any], Dict[str, Any]]]
    fresh: List[Dict[str, Any]]
    meta_common: Dict[str, Any]
    dropped: int = 0      # recorded pairs / processes left out: a side did not measure

    @property
    def key(self) -> str:
        return self.workload.key()

    @property
    def duet(self) -> bool:
        return bool(self.pairs) and all("duet" in c.get("meta", {}) for c, _ in self.pairs)


@dataclasses.dataclass
class Corpus:
    name: str
    machine_id: str
    cpu_model: str
    vcpus: int
    pools: List[Pool]
    source: str
    mxnet_version: Optional[str] = "1.9.1"
    features: Optional[List[str]] = None
    note: str = ""

    def with_pairs(self) -> "Corpus":
        return dataclasses.replace(self, pools=[p for p in self.pools if p.pairs])

    def with_fresh(self, at_least: int) -> "Corpus":
        return dataclasses.replace(self, pools=[p for p in self.pools if len(p.fresh) >= at_least])

    def describe(self) -> str:
        cells = ", ".join(f"{p.workload.model} b{p.workload.batch_size} ({len(p.pairs)} pairs, "
                          f"{len(p.fresh)} processes)" for p in self.pools)
        return f"{self.name} [{self.machine_id}, {self.cpu_model}, {self.vcpus} vCPUs]: {cells}"


def _shown(path: Path) -> str:
    """A data file's path as the table names it: from the repository's top, else relative."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return os.path.relpath(path, ROOT)


def _ok(doc: Dict[str, Any]) -> bool:
    return doc.get("status") == "ok" and bool(doc.get("round_seconds") or doc.get("figures"))


def load_aa_corpus(path) -> Corpus:
    """A corpus written by ``benchmarks/collect_aa_corpus.py``."""
    path = Path(path)
    d = json.loads(path.read_text())
    pools = []
    for key, c in d["cells"].items():
        w = Workload.from_dict(c["workload"])
        pairs = [(p["candidate"], p["reference"]) for p in c["pairs"]]
        fresh = [f["run"] for f in sorted(c["fresh"], key=lambda f: f["t"])]
        ok_pairs = [(a, b) for a, b in pairs if _ok(a) and _ok(b)]
        ok_fresh = [f for f in fresh if _ok(f)]
        pools.append(Pool(w, ok_pairs, ok_fresh, c.get("meta_common") or {},
                          dropped=len(pairs) - len(ok_pairs) + len(fresh) - len(ok_fresh)))
    m = d["machine"]
    return Corpus(path.stem, m["id"], m.get("cpu_model") or "unknown CPU", int(m.get("logical_cpus") or 2), pools,
                  _shown(path), d.get("mxnet_version"),
                  d.get("features"), d.get("note", ""))


def _one_round(w: Workload, img_s: float) -> Dict[str, Any]:
    """A run document whose one timed round gives exactly this process's figure (img/s):
    what a recording that kept only per-process figures can replay."""
    return {"status": "ok", "batches_per_round": 1, "round_seconds": [w.total_batch / img_s], "figures": {},
            "meta": {}}


def load_regime_pairs(path=None) -> Corpus:
    """The 12 back-to-back A/A pairs of fresh processes (AlexNet b8, order alternated) of the
    regime file: A/B process pairs (no duet: ``judge/ab_pairs.py``'s rule), and their 24
    processes in the order they ran as fresh processes. No process was slowed by another
    (the file says so), and none was probed: they carry no machine state."""
    path = Path(path) if path else _regimes_path()
    d = json.loads(path.read_text())
    aa = d["aa_pairs_alexnet_b8"]
    w = Workload("alexnet", batch_size=8)
    pairs = [(_one_round(w, a), _one_round(w, b)) for a, b in zip(aa["A"], aa["B"])]
    # pair i ran A then B when i is even, B then A when odd ("order alternated per pair")
    fresh = [doc for i, (a, b) in enumerate(pairs) for doc in ((a, b) if i % 2 == 0 else (b, a))]
    return Corpus(f"{path.stem} (12 A/A process pairs)", "amd-epyc-2vcpu", "AMD EPYC", 2,
                  [Pool(w, pairs, fresh, {"env": {"OMP_NUM_THREADS": "2"}})], _shown(path), note=d.get("what", ""))


def _regimes_path() -> Path:
    for p in (DATA_DIR / REGIMES, SHARED_DATA_DIR / REGIMES):
        if p.exists():
            return p
    raise FileNotFoundError(REGIMES)


def load_replay_reruns(*paths) -> Corpus:
    """Baseline re-runs (``collect_replay_data.py``) of one machine: per cell, fresh
    processes in the order they ran (the files by their date, then ``round``), each kept
    as its median only. Recorded before the machine-state probe existed: they carry no
    machine state (the judge sees every process)."""
    docs = sorted((json.loads(Path(p).read_text()) for p in paths), key=lambda d: d["date"])
    pools: Dict[str, Pool] = {}
    for d in docs:
        for key, c in d["cells"].items():
            w = Workload.from_dict(c["workload"])
            procs = sorted(c["processes"], key=lambda p: p.get("round", 0))
            ok = [p for p in procs if p.get("status") == "ok" and p.get("median")]
            pool = pools.setdefault(key, Pool(w, [], [], {"env": d.get("env") or {}}))
            pool.fresh += [_one_round(w, p["median"]) for p in ok]
            pool.dropped += len(procs) - len(ok)
    m = docs[0]["machine"]
    hw = m.get("hardware", {})
    return Corpus(" + ".join(Path(p).stem for p in paths), m["id"], hw.get("cpu_model") or "unknown CPU",
                  int(hw.get("logical_cpus") or 2), list(pools.values()), ", ".join(_shown(Path(p)) for p in paths),
                  docs[0].get("mxnet_version"), note=docs[0].get("note", ""))


def replay_reruns() -> List[Corpus]:
    """The baseline re-runs in benchmarks/data: per machine, all its files as one timeline
    (a baseline pooled from several recordings), and each file that is too short for that
    on its own (one recording: a provisional resolution)."""
    by_machine: Dict[str, List[Path]] = {}
    for p in sorted(DATA_DIR.glob("replay-*.json")):
        by_machine.setdefault(json.loads(p.read_text())["machine"]["id"], []).append(p)
    out = []
    for paths in by_machine.values():
        out.append(load_replay_reruns(*paths))
        if len(paths) > 1:
            out += [c for c in (load_replay_reruns(p) for p in paths)
                    if all(len(pool.fresh) < 3 * RECORDING_PROCESSES for pool in c.pools)]
    return out


def baseline_corpora() -> List[Corpus]:
    """Every corpus baseline mode can replay (cells with at least ``MIN_FRESH`` fresh
    processes): this VM's A/A corpora, the baseline re-runs, the regime file's processes."""
    out = []
    for c in aa_corpora() + replay_reruns() + [load_regime_pairs()]:
        usable = c.with_fresh(MIN_FRESH)
        if usable.pools:
            out.append(usable)
    return out


def aa_corpora() -> List[Corpus]:
    return [load_aa_corpus(p) for p in sorted(DATA_DIR.glob("aa-corpus-*.json"))]


# ----------------------------------------------------------------------------- runs

def make_run(w: Workload, doc: Dict[str, Any], common: Dict[str, Any], effect: float = 1.0,
             env: Optional[Dict[str, str]] = None) -> RunResult:
    """A RunResult from a recorded run document, its throughput x ``effect``: round times
    divided by it, figures judged by the processes rule moved by it in their better
    direction (derived figures, shown only, and memory as recorded); ``env``: recorded
    variables the process ran with besides its recorded ones (a setup changed visibly)."""
    status, message, batches, rounds, figures, wall = _fields(doc, effect)
    return RunResult(w, status, message=message, batches_per_round=batches, round_seconds=rounds,
                     figures=figures, meta=_facts(doc, common, env), wall_seconds=wall)


def _once(table: Dict[tuple, Tuple[tuple, Any]], key: tuple, held: tuple, make: Callable[[], Any]) -> Any:
    """``make()``, made once per ``key`` in ``table``. The keys name documents by identity
    (``id``): each entry holds ``held``, those documents, so that no id is reused while it stands."""
    hit = table.get(key)
    if hit is None:
        hit = table[key] = (held, make())
    return hit[1]


#: a recorded run's fields at an effect, worked out once (a study draws the same recorded run
#: thousands of times); each RunResult made from them is a new process (its own ``process``
#: id), and copies the figures it is given
_FIELDS: Dict[tuple, Tuple[tuple, tuple]] = {}


def _fields(doc: Dict[str, Any], effect: float) -> tuple:
    return _once(_FIELDS, (id(doc), effect), (doc,), lambda: _worked_out(doc, effect))


def _worked_out(doc: Dict[str, Any], effect: float) -> tuple:
    figures = {}
    for k, v in (doc.get("figures") or {}).items():
        m = METRICS.get(k)
        if m is not None and m.rule == "processes" and effect != 1.0:
            v = v * effect if m.higher_is_better else v / effect
        figures[k] = v
    return (doc["status"], doc.get("message", ""), int(doc.get("batches_per_round") or 0),
            tuple(s / effect for s in doc.get("round_seconds") or []), figures,
            float(doc.get("wall_seconds") or 0.0))


#: a recorded run's facts, made once: Facts is immutable and copies what it is given, and a
#: study draws the same recorded run thousands of times (copying its facts each time was a
#: sixth of a study's time)
_FACTS: Dict[tuple, Tuple[tuple, Facts]] = {}


def _facts(doc: Dict[str, Any], common: Dict[str, Any], env: Optional[Dict[str, str]]) -> Facts:
    return _once(_FACTS, (id(doc), id(common), tuple(sorted((env or {}).items()))), (doc, common),
                 lambda: _made_facts(doc, common, env))


def _made_facts(doc: Dict[str, Any], common: Dict[str, Any], env: Optional[Dict[str, str]]) -> Facts:
    meta = dict(common)
    meta.update(doc.get("meta") or {})
    if env:
        meta["env"] = dict(meta.get("env") or {}, **env)
    return Facts(meta)


class Drawer:
    """Indices of a pool, drawn without replacement from a shuffle; a new shuffle when it
    is used up."""

    def __init__(self, indices: Sequence[int], rng: random.Random):
        self.indices, self.rng, self.left = list(indices), rng, []

    def __call__(self) -> int:
        if not self.left:
            self.left = self.indices[:]
            self.rng.shuffle(self.left)
        return self.left.pop()


def replica(w: Workload, j: int) -> Workload:
    """The j-th simulated cell drawn from one recorded cell: its own key, nothing else."""
    return w if j == 0 else dataclasses.replace(w, threads=str(1000 + j))


# ----------------------------------------------------------------------------- the session

#: hold the confirmation budget at what every replay had before the session's clock was
#: simulated (``CONFIRM_FLOOR_S``: 60 s), to compare verdicts with the old code's
#: (``benchmarks/replay_verdicts.py``); False: the budget a real session of this size has
FIXED_BUDGET = False


class ReplayClock:
    """A replayed session's wall clock: it starts at 0 and moves on by each recorded process's
    wall time as the session draws it (a pair: the longer side), so the confirmation budget
    is what a real session of this size would have (``max(CONFIRM_FLOOR_S, the first stage's
    time)``). With FIXED_BUDGET it stands still (the budget is CONFIRM_FLOOR_S)."""

    def __init__(self, fixed: bool, per_process: float):
        self.t = 0.0
        self.fixed = fixed
        self.per_process = per_process

    def __call__(self) -> float:
        return self.t

    def ran(self, cell: CellMeasurement) -> None:
        if self.fixed:
            return
        refs = list(cell.reference or [])
        for i, r in enumerate(cell.runs):
            wall = max([r.wall_seconds] + ([refs[i].wall_seconds] if i < len(refs) else []))
            self.t += wall if wall > 0 else self.per_process


def replay_session(options: PerfOptions, corpus: Corpus, baseline: Optional[Baseline], clock: ReplayClock
                   ) -> PerfSession:
    """A PerfSession begun as the plugin begins one (its machine, baseline and comparison),
    whose interpreters and machine are the recording's (the MXNet probe and the hardware
    facts answered from the corpus, so no probe worker starts and the floors are this
    corpus's machine's, on any machine), on a simulated clock."""
    session = PerfSession(options, environ={})
    session.clock.now = clock
    session.context = dataclasses.replace(session.context, started=0.0)
    session.begin({"id": corpus.machine_id}, baseline, options,
                  comparison.comparison_for(options.reference))
    probe = {"status": "ok", "mxnet_version": corpus.mxnet_version, "features": corpus.features, "num_gpus": 0}
    sched = session.scheduler
    sched._probe_cache.update({options.python: probe, options.reference: probe})   # stand-ins for the probe
    sched._hw = HardwareInfo(cpu_model=corpus.cpu_model, vcpus=corpus.vcpus)      # and the machine's facts
    return session


@contextlib.contextmanager
def no_profile_worker():
    """The profile of a failing cell: "unavailable" (no worker), as tests/stand_ins.py does."""
    def unavailable(*args, **kwargs):
        return {"status": "unavailable", "message": "replayed session: no worker to profile", "operators": []}
    with mock.patch.object(profiling, "run_profile", unavailable):
        yield


@dataclasses.dataclass
class SessionResult:
    failed: bool
    kinds: Tuple[str, ...]              # what failed the session: regression, unresolved, floor
    changed_kind: Optional[str]         # the changed cell's verdict (primary figure), "floor" if its floor failed
    caught: bool                        # the changed cell failed
    cell_kinds: List[str] = dataclasses.field(default_factory=list)  # every cell's, in order (cell 0 changed)
    resolution: Optional[float] = None  # baseline mode: the resolution the baseline states for the changed cell
    units: int = 0                      # pairs (A/B) or current processes (baseline) measured in all
    second_stage: int = 0               # cells re-measured
    setup_cells: int = 0                # baseline mode: cells measured again against the recorded setup
    setup_pairs: int = 0                # ... the pairs they took, all cells
    setup_seconds: float = 0.0          # ... what they cost at the cost model's duet pair
    changed_key: str = ""               # the changed cell's key
    #: the session's duet pair spreads as the history store keeps them (``ab_judging.session_spreads``:
    #: figure key or kind, sum of squares, degrees of freedom)
    spreads: Tuple[Tuple[str, float, int], ...] = ()
    first_pairs: int = 0                # the most duet pairs a cell got before its first look
    one_pair_cells: int = 0             # the cells that got one duet pair before their first look


def run_session(corpus: Corpus, measures: Sequence[Callable[..., CellMeasurement]], *, ab: bool,
                duet: Sequence[bool] = (), baseline: Optional[Baseline] = None,
                setup: Optional[RecordedSetup] = None, changed_cells: int = 1,
                known: Sequence[Tuple[str, float, int]] = (),
                say: Optional[Callable[[object], None]] = None) -> SessionResult:
    """One session through the product's wiring. ``measures[i](n, paired)`` gives n more pairs
    (``ab``, or ``paired``: baseline mode's pairs against the recorded ``setup``) or processes
    of cell i (cell 0 is the changed one; the first ``changed_cells`` cells when more changed). The
    session is planned as the plugin plans it (``planning.plan_for`` over N measuring tests: the pairs a cell gets
    in A/B mode follow from N); each cell's first stage is the plan's (``duet[i]``: duet
    pairs, else process pairs; baseline mode: ``options.processes``), recorded and held to
    its floor by the ``mxperf`` fixture's ``Measurer`` (``record``, ``check_floor``), with
    ``measures[i]`` as its ``remeasure``; then ``finish.end_session``, on the session's
    simulated clock. ``known``: this machine's history of duet pair spreads (rows as
    ``HistoryStore.pair_spreads`` gives them), read into the plan as the plugin reads it, with
    the pairs a cell gets before its first look that follow from it (``known.first_pairs``).
    ``say``: given what the end of the session says while it settles (``finish.end_session``'s)."""
    from pytest_mxperf.measure import known as known_history
    from pytest_mxperf.measure import planning
    options = PerfOptions(reference=REFERENCE) if ab else PerfOptions()
    clock = ReplayClock(FIXED_BUDGET, options.time_budget + planning.PROCESS_OVERHEAD_S)
    session = replay_session(options, corpus, baseline, clock)
    markers = [frozenset({"scoring"} if (duet[i] if i < len(duet) else True) else {"distributed"})
               for i in range(len(measures))]
    made = planning.plan_for([planning.Planned(measuring=True, markers=m) for m in markers], options, ab)
    plan = made.plan
    if known:
        first = known_history.first_pairs(options, known) if ab else planning.FirstPairs(plan.duet_pairs)
        plan = dataclasses.replace(plan, pair_spreads=tuple(known), duet_pairs=first.pairs, one_pair_cells=first.cells)
    session.planned(plan, setup)
    plan = session.context.plan
    measurer = Measurer(session.scheduler, session.ledger, "replay")
    floor_failed: Dict[str, bool] = {}
    keys = []
    firsts: List[int] = []
    for i, measure in enumerate(measures):
        def remeasure(more, measure=measure) -> CellMeasurement:
            n = more if isinstance(more, int) else more.count
            cell = measure(n, not isinstance(more, int) and more.reference is not None)
            clock.ran(cell)
            for r in list(cell.runs) + list(cell.reference or []):
                ms = r.machine_state
                session.ledger.probed([ms.get("probe_before"), ms.get("probe_after")])
            return cell

        workload = getattr(measure, "workload", None)  # the plan's pairs before a cell's first look, by cell
        duet_pairs = plan.first_pairs_of(workload.key(), options.duet_pairs) if workload else plan.duet_pairs
        in_duet = ab and (duet[i] if i < len(duet) else True)
        n_first = duet_pairs if in_duet else plan.ab_pairs if ab else options.processes
        if in_duet:
            firsts.append(n_first)
        first = remeasure(n_first)
        key = first.workload.key()
        keys.append(key)
        measurer.record(first, remeasure, duets=duet[i] if i < len(duet) else True)
        try:
            measurer.check_floor(first)
            floor_failed[key] = False
        except Fail:
            floor_failed[key] = True
        except Skip:
            floor_failed[key] = False
    with no_profile_worker():
        out = finish.end_session(session, say)
    kinds = {f.kind for f in out.failures if f.judged}

    def kind(key: str) -> Optional[str]:
        v = out.verdicts.get(key)
        return "floor" if floor_failed.get(key) else (v.kind if v else None)

    changed_keys, changed = keys[:changed_cells], keys[0]
    v = out.verdicts.get(changed)
    # the resolution the session states for the changed cell (its verdict's: for one of the
    # session's N tested figures), else the baseline's for the figure alone
    resolution = None
    stated = (v.resolution or {}).get("value") if v is not None else None
    if isinstance(stated, (int, float)):
        resolution = float(stated)
    elif baseline is not None:
        res = baseline.resolution(changed)
        resolution = res.fraction(True) if res is not None else None
    pairs = sum(len(r.cell.reference or ()) for r in session.ledger.records)
    paired_cells = len({r.key for r in session.ledger.records if r.cell.reference})
    return SessionResult(failed=out.failed, kinds=tuple(sorted(kinds)),
                         changed_kind=kind(changed),
                         # the changed cell failed: any of its figures (a latency cell's p99 is judged
                         # at the tail's own minimum effect; its p50 at the session's)
                         caught=any(bool(floor_failed.get(c)) for c in changed_keys) or any(
                             x.failed for k, x in out.verdicts.items() if cell_of(k) in changed_keys),
                         cell_kinds=[kind(k) for k in keys], resolution=resolution,
                         units=sum(len(r.cell.runs) for r in session.ledger.records), second_stage=out.confirmed,
                         setup_cells=0 if ab else paired_cells, setup_pairs=0 if ab else pairs,
                         setup_seconds=0.0 if ab else pairs * planning.duet_pair_seconds(options),
                         changed_key=changed,
                         spreads=tuple((k, ss, df) for k, (ss, df) in ab_judging.session_spreads(out.cells).items()),
                         first_pairs=max(firsts, default=plan.duet_pairs), one_pair_cells=firsts.count(1))


def ab_session(corpus: Corpus, n_cells: int, effect: float, rng: random.Random, swap: bool = True,
               known: Sequence[Tuple[str, float, int]] = (),
               say: Optional[Callable[[object], None]] = None) -> SessionResult:
    """One A/B session of ``n_cells`` cells drawn from the corpus's pairs (cell 0 x ``effect``).
    ``swap``: each drawn A/A pair's two sides change places with probability 1/2 (the same
    interpreter ran both, so which one is called the candidate is arbitrary): the replayed
    unchanged cell is then unchanged on average whatever its few recorded pairs' mean, as an
    A/A cell is, while each pair keeps its two processes and the rounds they ran side by
    side."""
    pools = [p for p in corpus.pools if p.pairs]
    offset = rng.randrange(len(pools))
    measures, duet = [], []
    for i in range(n_cells):
        pool = pools[(offset + i) % len(pools)]
        w = replica(pool.workload, i // len(pools))
        draw = Drawer(range(len(pool.pairs)), random.Random(rng.random()))

        def measure(n: int, paired: bool = True, w=w, pool=pool, draw=draw,
                    scale=effect if i == 0 else 1.0) -> CellMeasurement:
            runs, refs = [], []
            for _ in range(n):
                c, r = pool.pairs[draw()]
                if swap and draw.rng.random() < 0.5:
                    c, r = r, c
                runs.append(make_run(w, c, pool.meta_common, scale))
                refs.append(make_run(w, r, pool.meta_common))
            return CellMeasurement(w, runs, refs)

        measure.workload = w
        measures.append(measure)
        duet.append(pool.duet)
    return run_session(corpus, measures, ab=True, duet=duet, known=known, say=say)


def baseline_plan(n: int, u: float, per: int = RECORDING_PROCESSES) -> Tuple[List[int], List[List[int]]]:
    """(the current session's process indices, the baseline's recordings' indices) for a
    pool of ``n`` processes in time order: the current window of ``per`` consecutive
    processes (fewer when the pool holds less than two recordings' worth, never fewer than a
    session's ``processes``) starts at ``u`` (in [0, 1)) of the way along; the processes
    before and after it, in order, make recordings of ``per`` (a short remainder joins the
    last one)."""
    window = min(per, n - per)
    if window < opts.PROCESSES:
        raise ValueError(f"{n} processes are too few for a recording of {per} and a session of {opts.PROCESSES}")
    start = min(n - window, int(u * (n - window + 1)))
    current = list(range(start, start + window))
    rest = [i for i in range(n) if i < start or i >= start + window]
    k = len(rest) // per
    recs = [rest[j * per:(j + 1) * per] for j in range(k)]
    if recs and len(rest) > k * per:
        recs[-1] += rest[k * per:]
    return current, recs


#: the fewest fresh processes of a recorded cell that baseline mode can replay
MIN_FRESH = RECORDING_PROCESSES + opts.PROCESSES


#: the build a replayed baseline records and its recorded setup is (no process runs it)
REPLAY_BUILD = {"name": "mxnet", "version": "1.9.1", "direct_url": None, "libmxnet": "mxnet/libmxnet.so",
                "libmxnet_sha256": "0" * 64, "numpy_version": "1.23.5", "features": None}
#: the recorded setup's interpreter a replay names (no process runs it)
SETUP = "/replayed/recorded-setup/bin/python"


#: the variable a replayed session whose setup changed visibly runs with (its every process,
#: not the baseline's nor the recorded setup's side of a pair)
VISIBLE_CHANGE = {"MXNET_SUBGRAPH_BACKEND": "NONE"}


def _host_probes(rec: Dict[str, Any], factor: float) -> Dict[str, Any]:
    """A summarized recording whose machine probe readings are x ``factor`` (a host that much
    faster): a new value (its probe records are the recorded processes' own, which every other
    replayed session reads too)."""
    import copy
    rec = dict(rec, process_probes=copy.deepcopy(rec.get("process_probes")))
    for ms in rec.get("process_probes") or []:
        for part in ("probe_before", "probe_after"):
            probe = (ms or {}).get(part)
            for fig in ("gemm_gflops", "stream_gbps"):
                if isinstance((probe or {}).get(fig), (int, float)):
                    probe[fig] *= factor
    return rec


def baseline_session(corpus: Corpus, n_cells: int, effect: float, rng: random.Random,
                     setup: bool = False, visible: bool = False, changed_cells: int = 1,
                     host: float = 1.0, host_probes: bool = True) -> SessionResult:
    """One baseline-mode session of ``n_cells`` cells (cell 0 x ``effect``) against a
    baseline recorded from the same corpus at other times (``baseline_plan``). ``setup``:
    its suspects settled against the recorded setup (``RecordedSetup`` ready), whose pairs are
    the corpus's A/A pairs of the cell (duet pairs; each drawn pair's sides exchanged with
    probability 1/2, the candidate's x ``effect``), as ``ab_session`` draws them. ``visible``:
    the session's processes ran with a recorded variable the baseline's did not
    (``VISIBLE_CHANGE``): a change of the setup that the suite sees, on every cell, of which
    cell 0 alone is x ``effect``. ``changed_cells``: the first this many cells are x ``effect``
    (a change of the setup that slows many cells: fewer threads slow every one), and the
    session's result counts the change caught when any of them failed. ``host``: the baseline
    was recorded on a host that much faster (its processes' figures moved by it in their better
    direction, as ``make_run`` moves a changed cell's), and with ``host_probes`` its recorded
    machine probe readings x ``host`` too (issue 75: another host of the same machine type)."""
    extra = VISIBLE_CHANGE if visible else None
    pools = [p for p in corpus.pools if len(p.fresh) >= MIN_FRESH and (p.pairs or not setup)]
    baseline = Baseline.new(corpus.machine_id)
    requirement = f"mxnet=={corpus.mxnet_version}" if corpus.mxnet_version else None
    offset = rng.randrange(len(pools))
    u = rng.random()   # where in the recording's time this session ran: the same for every cell
    measures = []
    for i in range(n_cells):
        pool = pools[(offset + i) % len(pools)]
        w = replica(pool.workload, i // len(pools))
        current, recordings = baseline_plan(len(pool.fresh), u)
        for s, idx in enumerate(recordings):
            cell = CellMeasurement(w, [make_run(w, pool.fresh[k], pool.meta_common, host) for k in idx])
            rec = baseline_store.summarize_cell(cell, pool="replace" if s == 0 else "add", requirement=requirement,
                                                install=REPLAY_BUILD)
            if host != 1.0 and host_probes:
                rec = _host_probes(rec, host)
            baseline.add_recordings({w.key(): rec}, {w.key(): w.to_dict()})
        draw = Drawer(current, random.Random(rng.random()))
        pair_draw = Drawer(range(len(pool.pairs)), random.Random(rng.random()))

        def measure(n: int, paired: bool = False, w=w, pool=pool, draw=draw, pair_draw=pair_draw,
                    scale=effect if i < changed_cells else 1.0) -> CellMeasurement:
            if not paired:
                return CellMeasurement(w, [make_run(w, pool.fresh[draw()], pool.meta_common, scale, extra)
                                           for _ in range(n)])
            runs, refs = [], []
            for _ in range(n):
                c, r = pool.pairs[pair_draw()]
                if pair_draw.rng.random() < 0.5:
                    c, r = r, c
                runs.append(make_run(w, c, pool.meta_common, scale, extra))
                refs.append(make_run(w, r, pool.meta_common).with_facts(pair_of=runs[-1].process))
            return CellMeasurement(w, runs, refs)

        measures.append(measure)
    ready = RecordedSetup("ready", requirement, SETUP) if setup else None
    return run_session(corpus, measures, ab=False, baseline=baseline, setup=ready, changed_cells=changed_cells,
                       duet=[p.duet for p in (pools[(offset + i) % len(pools)] for i in range(n_cells))])


# ----------------------------------------------------------------------------- rates

@dataclasses.dataclass
class Rates:
    mode: str
    corpus: str
    n_cells: int
    effect: float
    sessions: int
    failed: int
    caught: int
    kinds: Dict[str, int]               # sessions failed by each failing kind
    changed_kinds: Dict[str, int]       # the changed cell's verdicts
    beyond_resolution: int = 0          # baseline mode: sessions whose stated resolution < the change
    caught_beyond: int = 0              # ... of which the changed cell was caught
    units: float = 0.0                  # pairs / processes per cell, mean
    first_pairs: int = 0                # the duet pairs a cell got before its first look (A/B), the most
    one_pair_cells: float = 0.0         # ... the cells that got one, a session
    seconds: float = 0.0
    to_setup: float = 0.0               # mode "setup": cells measured again against the recorded setup, a session
    setup_pairs: float = 0.0            # ... the pairs they took, a session
    setup_seconds: float = 0.0          # ... and what those cost at the cost model's duet pair, a session
    #: sessions that would fail were "system-differs" (both setups agree, the machine's probes
    #: did not move with the change) not failing: the other rule of docs/baselines.md
    failed_unless_system: int = 0

    @property
    def failed_rate(self) -> float:
        return self.failed / self.sessions

    @property
    def caught_rate(self) -> float:
        return self.caught / self.sessions

    @property
    def caught_beyond_rate(self) -> Optional[float]:
        return self.caught_beyond / self.beyond_resolution if self.beyond_resolution else None


def rates(mode: str, corpus: Corpus, n_cells: int, effect: float, sessions: int, seed: int,
          history_from: Optional[Corpus] = None) -> Rates:
    """``sessions`` sessions of one mode ("ab" or "baseline"), N cells, one of them x effect.
    ``history_from``: in mode "ab-history", the corpus this machine's history is replayed from
    (default ``corpus``: the same machine in the same state; another, a history of another
    state of the machine)."""
    rng = random.Random(f"{seed}-{mode}-{corpus.name}-{n_cells}-{effect}")
    if mode == "ab-history":  # this machine's last sessions first: unchanged, as the history store keeps them
        known = history_of(history_from or corpus, n_cells, rng)
        return _rates_of(mode, corpus, n_cells, effect, sessions,
                         lambda *a: ab_session(*a, known=known), rng)
    one = {"ab": ab_session, "baseline": baseline_session,
           "setup": lambda *a: baseline_session(*a, setup=True),
           "setup-visible": lambda *a: baseline_session(*a, setup=True, visible=True)}[mode]
    return _rates_of(mode, corpus, n_cells, effect, sessions, one, rng)


#: the sessions an "ab-history" replay's history holds before it: as many as the plugin reads
#: (``measure/known.KNOWN_SESSIONS``)
HISTORY_SESSIONS = 3


def history_of(corpus: Corpus, n_cells: int, rng: random.Random) -> Tuple[Tuple[str, float, int], ...]:
    """This machine's history of duet pair spreads before a replay: ``HISTORY_SESSIONS``
    unchanged A/B sessions of ``n_cells`` cells, each session's spreads summed per figure and
    kind as ``HistoryStore.pair_spreads`` sums its last sessions'."""
    total: Dict[str, Tuple[float, int]] = {}
    for _ in range(HISTORY_SESSIONS):
        for k, ss, df in ab_session(corpus, n_cells, 1.0, rng).spreads:
            a, b = total.get(k, (0.0, 0))
            total[k] = (a + ss, b + df)
    return tuple((k, ss, df) for k, (ss, df) in sorted(total.items()))


def _rates_of(mode: str, corpus: Corpus, n_cells: int, effect: float, sessions: int,
              one: Callable[..., SessionResult], rng: random.Random) -> Rates:
    t0 = time.process_time()
    r = Rates(mode, corpus.name, n_cells, effect, sessions, 0, 0, {}, {})
    units = 0
    for _ in range(sessions):
        s = one(corpus, n_cells, effect, rng)
        r.failed += s.failed
        r.caught += s.caught
        units += s.units
        r.first_pairs = max(r.first_pairs, s.first_pairs)
        r.one_pair_cells += s.one_pair_cells / sessions
        r.to_setup += s.setup_cells / sessions
        r.setup_pairs += s.setup_pairs / sessions
        r.setup_seconds += s.setup_seconds / sessions
        for k in s.kinds:
            r.kinds[k] = r.kinds.get(k, 0) + 1
        r.failed_unless_system += bool(set(s.kinds) - {"system-differs"})
        r.changed_kinds[s.changed_kind] = r.changed_kinds.get(s.changed_kind, 0) + 1
        # a resolution of 100% or more resolves no slowdown at all
        if s.resolution is not None and s.resolution < 1.0 and -math.log(effect) > -math.log1p(-s.resolution):
            r.beyond_resolution += 1
            r.caught_beyond += s.caught
    r.units = units / (sessions * n_cells)
    r.seconds = time.process_time() - t0
    return r


def format_row(r: Rates) -> str:
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(r.kinds.items())) or "-"
    txt = (f"{r.mode:<8} N={r.n_cells:<3d} x{r.effect:.2f}  sessions {r.sessions:4d}  "
           f"failed {100 * r.failed_rate:5.1f}% ({kinds})")
    if r.kinds.get("system-differs"):
        txt += f"  [{100 * r.failed_unless_system / r.sessions:.1f}% were system-differs to pass]"
    if r.effect != 1.0:
        txt += f"  caught {100 * r.caught_rate:5.1f}%"
        if r.mode in ("baseline", "setup", "setup-visible"):
            b = r.caught_beyond_rate
            txt += (f"  beyond resolution {r.beyond_resolution}/{r.sessions}, caught there "
                    + (f"{100 * b:5.1f}%" if b is not None else "  -  "))
        changed = ", ".join(f"{k} {v}" for k, v in sorted(r.changed_kinds.items(), key=lambda kv: -kv[1]))
        txt += f"  [changed cell: {changed}]"
    txt += f"  {'pairs' if r.mode.startswith('ab') else 'processes'}/cell {r.units:.1f}"
    if r.mode == "ab-history":
        txt += (f" (first look after {r.first_pairs})" if r.first_pairs <= 1 or not r.one_pair_cells else
                f" (first look after 1 for {r.one_pair_cells:.1f} cells a session, else {r.first_pairs})")
    if r.mode.startswith("setup"):
        txt += (f"  to the duet: {r.to_setup:.2f} cell(s)/session, {r.setup_pairs:.1f} pairs, "
                f"{r.setup_seconds / 60:.1f} min")
    return txt
