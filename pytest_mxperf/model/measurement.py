"""Samples: what one worker process measured (a Run), and a cell made of several processes.

Every kind of measurement yields *figures*, each of a known ``Metric`` with a unit and a
direction (higher or lower is better) and a rule that judges it:

* ``processes``: a noisy figure, one value per worker process; judged by a rank test
  between processes (baseline mode) or on paired ratios (A/B mode), with a minimum effect.
* ``growth``: a near-deterministic figure (peak memory); a change is called only when at
  least half the processes of one side are beyond the other side's worst process by more
  than a stated allowance (``judge/growth.py``).
* ``discrete``: a small integer (epochs to a target accuracy) that ties too often for a
  rank test; judged by a stated step rule.
* ``derived``: computed from other figures (bandwidth from seconds, efficiency, ratios);
  shown, never judged a second time.

Rounds inside one process are not independent (they share the process's memory layout,
thread placement and neighbours), so the *process* is the unit of replication: a cell's
figure is the median of its per-process figures, its spread is taken between processes.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
from types import MappingProxyType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.model.kinds import (  # noqa: F401 (the registry's views, read from here too)
    FLOP_MODES, INFERENCE_MODES, METRICS, PRIMARY, RULES, SECONDARY, SEEDED_MODES, Metric, UnknownFigure)
from pytest_mxperf.model.run_facts import Facts
from pytest_mxperf.model.stats import iqr_spread
from pytest_mxperf.workers.pipeline import HEAP_KEPT_LOADERS
from pytest_mxperf.workers.precision import CONVERTED_DTYPES
from pytest_mxperf.model.workload import Workload

OK = "ok"
# Outcomes a measurement can have; everything but "ok" carries a one-line message.
STATUSES = ("ok", "error", "crash", "timeout", "oom", "unavailable", "unsupported")


#: how the suite measures a cell's figures: raised whenever a change of pytest-mxperf changes
#: what a figure measures (the rounds, the warm-up, what a worker times), so that a baseline
#: recorded another way says so beside a change (baselines record it with the suite's version).
#: 2: the input-pipeline ndarray loaders' worker keeps freed memory in glibc's heap
#: (``workers/pipeline.keep_heap``), so that its batches no longer fault in again at random.
#: 3: the throughput worker's untimed warm-up is half a second, not a second
#: (``workers/throughput.WARMUP_SECONDS``), which reads the same figures within one process
#: (docs/how-it-measures.md, "What a run does", *Isolated measurement*)
MEASURING_METHOD = 3
#: how the memory figure is read: 2 = the peak resident set less the resident pages that map
#: files (``rss_file_bytes``: libraries, whose resident share follows the page cache: the same
#: install read 279 and 202 MiB in one A/A pair); 1 (or none recorded) = the whole resident set.
#: 3 = as 2, in a worker whose ``import mxnet`` leaves the modules it does not use unloaded
#: until used (``workers/deferred_imports.py``: scipy.stats, requests, setuptools), which
#: lowers the figure by what they held (docs/how-it-measures.md, "What is measured, and how
#: each figure is judged", the deferred imports). A baseline's memory figure is compared only
#: when it was read the same way.
MEMORY_METHOD = 3
#: 4 = as 3, in a worker that keeps freed memory in glibc's heap (the input-pipeline ndarray
#: loaders': ``workers/pipeline.keep_heap``): it holds a few of its batches' freed buffers
#: (3x224x224 b32: 849 against 780 MiB). Per cell (``memory_method``): the other cells' memory
#: stays comparable with the baselines recorded before it
MEMORY_METHOD_HEAP_KEPT = 4
#: 5 = an input-pipeline loader-alone cell (``io/LOADER-...``) read as 3 is, less the pages
#: that map files: its test read the whole resident set before (``perf_tests/
#: test_input_pipeline.loader_figures``), which followed the page cache's huge pages of
#: libmxnet.so (the imagerecord loader's same install: 261 MiB in one session, 339 in the
#: next; 182 less the files in both), and failed an unchanged daily session; the ndarray
#: loaders' worker keeps the heap as in 4
MEMORY_METHOD_IO_LOADER = 5
#: 6 = as 3, for a cell measured among other cells in worker processes (``CellMeasurement.
#: sharing`` "shared"): glibc gives back what it holds freed before each cell
#: (``workers/throughput._give_back_freed``). Read as 3, a cell's figure held what the cells
#: before it in its process had freed: AlexNet b1 670 MiB first in its process, 848-863 last;
#: LeNet latency b1 73 first, 210-214 second, so its allowance (3 x the spread) was 421 MiB
MEMORY_METHOD_SHARED = 6
#: 7 = as 3, for a CPU cell reached by converting the float32 network (int8, bfloat16:
#: ``workers/precision.CONVERTED_DTYPES``): its high-water mark starts again after the
#: conversion, so its figure is what the converted network holds running. Read as 3 it held
#: the float32 network and the int8 calibration's transient (docs/how-it-measures.md, "What is
#: measured, and how each figure is judged": a converted cell's memory, and the calibration);
#: 8 = as 7, for such a cell among other cells in worker processes (as 6)
MEMORY_METHOD_CONVERTED = 7
MEMORY_METHOD_CONVERTED_SHARED = 8


def memory_mib(peak_rss_bytes: Optional[int], rss_file_bytes: Optional[int],
               carried_rss_bytes: Optional[int] = None) -> Optional[float]:
    """A process's memory figure (MiB, ``MEMORY_METHOD``): its peak resident set less the
    pages that map files where those were read, and in a process that measured several cells
    less what the cells before this one left resident (``MEMORY_METHOD_SHARED``); None
    without a positive peak."""
    rss = peak_rss_bytes
    if rss is not None and rss_file_bytes is not None:
        rss -= rss_file_bytes
    if rss is not None and carried_rss_bytes:
        rss -= carried_rss_bytes
    return rss / 2 ** 20 if rss is not None and rss > 0 else None


#: how an input-pipeline cell's name starts when its loader's worker keeps the heap
_HEAP_KEPT_PREFIXES = tuple(f"{loader}-" for loader in HEAP_KEPT_LOADERS)


def memory_method(key: str, processes: Optional[str] = None) -> int:
    """How the memory figure of the cell ``key`` is read when its processes were had as
    ``processes`` (``CellMeasurement.sharing``; None: unknown, read as "own"):
    ``MEMORY_METHOD``; ``MEMORY_METHOD_SHARED`` among other cells; ``MEMORY_METHOD_IO_LOADER``
    for an input-pipeline loader alone (``io/LOADER-...``); ``MEMORY_METHOD_HEAP_KEPT`` for
    one feeding a trainer (``io/MODEL+LOADER-...``) whose worker keeps the heap
    (``workers/pipeline.HEAP_KEPT_LOADERS``)."""
    kind, _, rest = key.partition("/")
    parts = rest.split("/", 1)[0].split("+")
    if kind == "io" and len(parts) == 1:
        return MEMORY_METHOD_IO_LOADER
    if kind == "io" and parts[-1].startswith(_HEAP_KEPT_PREFIXES):
        return MEMORY_METHOD_HEAP_KEPT
    segments = key.split("/")
    if kind in INFERENCE_MODES and len(segments) > 4 and segments[4] in CONVERTED_DTYPES:
        return MEMORY_METHOD_CONVERTED_SHARED if processes == "shared" else MEMORY_METHOD_CONVERTED
    return MEMORY_METHOD_SHARED if processes == "shared" else MEMORY_METHOD

# Every figure's Metric and each kind's primary and judged figures are declared once, in
# ``model/kinds.py``: these names are its live views (METRICS, PRIMARY, SECONDARY, SEEDED_MODES).


class CellNotMeasured(Exception):
    """Raised by ``CellMeasurement.median`` of a cell that did not measure (a crash, a
    timeout, an error in the worker, ...): the message carries the cell, its status and its
    one-line reason, so ``assert cell.median > x`` in your test says why instead of failing
    on ``None``. ``from pytest_mxperf import CellNotMeasured``."""

    def __init__(self, key: str, status: str, reason: str):
        self.key, self.status, self.reason = key, status, reason
        super().__init__(f"{key} did not measure: {status}: {reason}" if reason else
                         f"{key} did not measure: {status}")


def metric_key(cell_key: str, metric: str, mode: str) -> str:
    """The id a figure is judged under: the cell key for the primary figure (so existing
    baselines keep their keys), ``<cell key>#<metric>`` for the others."""
    return cell_key if metric == PRIMARY.get(mode) else f"{cell_key}#{metric}"


def split_metric_key(key: str) -> Tuple[str, Optional[str]]:
    """(cell key, metric or None for the primary figure): ``metric_key`` undone."""
    cell, _, metric = key.partition("#")
    return cell, (metric or None)


def cell_of(key: str) -> str:
    """The cell key of a figure's key (``metric_key``)."""
    return split_metric_key(key)[0]


def _process_id() -> str:
    # 64 random bits as 16 hex digits (what uuid4().hex[:16] gave, without making a UUID:
    # a replayed error-rate study makes a quarter of a million of these)
    return os.urandom(8).hex()


class _once:
    """A figure computed on first use and kept in the instance (functools.cached_property
    without its lock: a result is made and read by one thread)."""

    def __init__(self, fn):
        self.fn, self.name = fn, fn.__name__
        self.__doc__ = fn.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = self.fn(obj)
        obj.__dict__[self.name] = value  # found before this (non-data) descriptor from now on
        return value


#: what a RunResult computes once from its status, rounds and figures alone (never from its
#: facts): a copy with other facts keeps them
_FROM_ROUNDS = frozenset({"_seconds_per_batch", "_throughput", "ok"})


@dataclasses.dataclass(frozen=True)
class RunResult:
    """One worker process: its figures plus what it actually ran with. Immutable: made once
    from what the worker returned (``measure/runner.run_result``); a fact the parent learns
    later (the machine's state around it, its label, TF32) or a derived figure (GFLOP/s) makes
    a new value (``with_facts``, ``labelled``, ``with_figures``) that keeps its ``process`` id.

    Throughput cells carry per-round timings (``round_seconds`` of ``batches_per_round``
    batches each); their throughput is computed from the median time per batch. Other
    kinds carry their figures directly in ``figures``.
    """

    workload: Workload
    status: str
    message: str = ""
    batches_per_round: int = 0
    round_seconds: Tuple[float, ...] = ()
    figures: Mapping[str, float] = dataclasses.field(default_factory=dict)
    meta: Facts = dataclasses.field(default_factory=Facts)
    stderr_tail: Tuple[str, ...] = ()
    returncode: Optional[int] = None
    wall_seconds: float = 0.0
    #: which process this is: a result and the new values made from it share it (a cell two
    #: tests share, a labelled copy), so a process is counted once (``merge_records``)
    process: str = dataclasses.field(default_factory=_process_id)

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "round_seconds", tuple(map(float, self.round_seconds)))
        set_(self, "figures", MappingProxyType(dict(self.figures)))
        set_(self, "meta", self.meta if isinstance(self.meta, Facts) else Facts(self.meta))
        set_(self, "stderr_tail", tuple(self.stderr_tail))

    def with_facts(self, **facts: Any) -> "RunResult":
        """This process with more facts (each declared in run_facts.py): a new value."""
        # every other field is this value's own, checked when it was made: copied as it is,
        # with the figures computed from its rounds alone (any other, the memory figure
        # among them, reads the facts: made again when asked)
        cls = type(self)
        new = object.__new__(cls)
        new.__dict__.update({k: v for k, v in self.__dict__.items()
                             if k in _FROM_ROUNDS or not isinstance(getattr(cls, k, None), _once)})
        new.__dict__["meta"] = self.meta.with_facts(**facts)
        return new

    def with_figures(self, **figures: float) -> "RunResult":
        """This process with more figures (derived ones: GFLOP/s): a new value."""
        return dataclasses.replace(self, figures={**self.figures, **figures})

    def labelled(self, state: str, reason: str) -> "RunResult":
        """This process with its machine-state label (judge/machine_states.py): a new value."""
        return self.with_facts(machine_state={**self.machine_state, "state": state, "reason": reason})

    @_once
    def ok(self) -> bool:
        # computed once: its status, rounds and figures never change (a replayed study asks
        # about ten million times)
        return self.status == OK and bool(self.round_seconds or self.figures)

    @property
    def seconds_per_batch(self) -> List[float]:
        return list(self._seconds_per_batch)

    @_once
    def _seconds_per_batch(self) -> tuple:
        # computed once, like _throughput: a process's rounds never change after its worker
        k = max(1, self.batches_per_round)
        return self.round_seconds if k == 1 else tuple([s / k for s in self.round_seconds])

    @property
    def samples(self) -> List[float]:
        """Per-round throughput, images (samples) per second."""
        n = self.workload.total_batch
        return [n / s for s in self.seconds_per_batch if s > 0]

    @_once
    def _throughput(self) -> float:
        # computed once: a process's rounds are what its worker returned, never changed after
        # (the replayed error-rate studies ask for it millions of times)
        return self.workload.total_batch / statistics.median(self._seconds_per_batch)

    @_once
    def _memory_mib(self) -> Optional[float]:
        # computed once, like _throughput: a process's facts never change after its worker
        return memory_mib(self.meta.peak_rss_bytes, self.meta.rss_file_bytes, self.meta.carried_rss_bytes)

    def value(self, metric: str) -> Optional[float]:
        """This process's figure for ``metric`` (None when it has none)."""
        if not self.ok:
            return None
        if metric == "throughput" and self.round_seconds:
            return self._throughput
        if metric == "peak_rss_mib" and "peak_rss_mib" not in self.figures:
            return self._memory_mib
        v = self.figures.get(metric)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    # -- the facts the parent reads (model/run_facts.py declares every fact in ``meta``) --

    @property
    def machine_state(self) -> Dict[str, Any]:
        """The probes before / after and the load around this process, and its label
        ("state", "reason") once judged; {} when the machine was not probed (a copy)."""
        v = self.meta.machine_state
        return dict(v) if v else {}

    def with_machine_state(self, probe_before: Optional[Dict[str, Any]], probe_after: Optional[Dict[str, Any]],
                           load: Optional[Dict[str, Any]]) -> "RunResult":
        """This process with the machine's state measured around it: a new value."""
        return self.with_facts(machine_state={"probe_before": probe_before, "probe_after": probe_after,
                                              "load": load})

    @property
    def state(self) -> Optional[str]:
        """The machine-state label of this process (None when not labelled)."""
        v = self.meta.machine_state
        return v.get("state") if v else None

    @property
    def utilisation(self) -> Optional[Dict[str, Any]]:
        v = self.meta.utilisation
        return v if v else None

    @property
    def env(self) -> Optional[Dict[str, str]]:
        """The threading and MXNet variables the process ran with (None when not recorded)."""
        v = self.meta.env
        return dict(v) if v is not None else None

    @property
    def cuda_runtime(self) -> Optional[str]:
        """The CUDA runtime version the worker loaded ("11.7"; None on CPU or when unknown)."""
        v = self.meta.cuda_runtime
        return str(v) if v else None

    @property
    def tf32(self) -> Optional[Dict[str, Any]]:
        """Whether this float32 GPU process's GEMMs ran as TF32: {"in_use": True / False / None,
        "why", ...} (machine/tensor_math.py); None for other cells."""
        v = self.meta.tf32
        return dict(v) if v is not None else None

    @property
    def openmp_threads(self) -> Optional[int]:
        v = (self.meta.threads or {}).get("openmp")
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    @property
    def mxnet_version(self) -> Optional[str]:
        return self.meta.mxnet_version or None

    @property
    def answers(self) -> Optional[Dict[str, Any]]:
        """The answer record of this process (``workers/answers.py``), None when it kept none."""
        v = self.meta.answers
        return v if v is not None and isinstance(v.get("seed"), int) else None

    @property
    def macs_per_sample(self) -> Optional[float]:
        v = self.meta.macs_per_sample
        return float(v) if v is not None and v > 0 else None

    @property
    def median(self) -> Optional[float]:
        """The primary figure (for throughput cells: from the median time per batch)."""
        return self.value(PRIMARY.get(self.workload.mode, "throughput"))

    def to_dict(self) -> Dict[str, Any]:
        return {
            "workload": self.workload.to_dict(),
            "status": self.status,
            "message": self.message,
            "batches_per_round": self.batches_per_round,
            "round_seconds": list(self.round_seconds),
            "figures": dict(self.figures),
            "samples": self.samples,
            "median": self.median,
            "meta": self.meta.to_dict(),
            "stderr_tail": list(self.stderr_tail),
            "returncode": self.returncode,
            "wall_seconds": self.wall_seconds,
            "process": self.process,
        }

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "RunResult":
        return cls(
            workload=Workload.from_dict(d["workload"]),
            status=d["status"],
            message=d.get("message", ""),
            batches_per_round=int(d.get("batches_per_round", 0)),
            round_seconds=[float(x) for x in d.get("round_seconds", [])],
            figures={str(k): float(v) for k, v in (d.get("figures") or {}).items()
                     if isinstance(v, (int, float)) and not isinstance(v, bool)},
            meta=dict(d.get("meta", {})),
            stderr_tail=list(d.get("stderr_tail", [])),
            returncode=d.get("returncode"),
            wall_seconds=float(d.get("wall_seconds", 0.0)),
            **({"process": str(d["process"])} if d.get("process") else {}),
        )


def _runs_from(items) -> List[RunResult]:
    return [RunResult.from_dict(r) for r in items or []]


@dataclasses.dataclass(frozen=True)
class CellMeasurement:
    """All worker processes of one cell in one session (and, in A/B mode, the reference
    interpreter's processes, paired with them in order: ``runs[i]`` ran next to
    ``reference[i]``). Immutable: ``with_runs`` makes a new value."""

    workload: Workload
    runs: Tuple[RunResult, ...]
    reference: Optional[Tuple[RunResult, ...]] = None

    def __post_init__(self):
        object.__setattr__(self, "runs", tuple(self.runs))
        if self.reference is not None:
            object.__setattr__(self, "reference", tuple(self.reference))

    def with_runs(self, runs: Sequence[RunResult], reference: Optional[Sequence[RunResult]] = None
                  ) -> "CellMeasurement":
        """The same cell with these processes: a new value."""
        return CellMeasurement(self.workload, tuple(runs), None if reference is None else tuple(reference))

    def mapped(self, f) -> "CellMeasurement":
        """The same cell with ``f(run)`` in place of each of its processes (both sides): a new value."""
        return self.with_runs([f(r) for r in self.runs],
                              None if self.reference is None else [f(r) for r in self.reference])

    @property
    def primary(self) -> Metric:
        return METRICS[PRIMARY.get(self.workload.mode, "throughput")]

    @property
    def ok_runs(self) -> List[RunResult]:
        return list(self._ok_runs)

    @_once
    def _ok_runs(self) -> Tuple[RunResult, ...]:
        # computed once: a cell's processes never change (with_runs makes a new cell)
        return tuple(r for r in self.runs if r.ok)

    @property
    def sharing(self) -> str:
        """How its processes were had: "shared" when a process measured it among
        other cells (a grid's worker), "own" when each process measured it alone. Baselines
        record it; a figure measured one way is not judged against one measured the other."""
        return "shared" if any(r.meta.process_cells for r in self.ok_runs) else "own"

    @property
    def status(self) -> str:
        """ok if any process measured; otherwise the first failure's status."""
        if self.ok_runs:
            return OK
        return self.runs[0].status if self.runs else "error"

    @property
    def message(self) -> str:
        for r in self.runs:
            if not r.ok:
                return r.message
        return ""

    def values(self, metric: str) -> List[float]:
        return list(self._values(metric))

    def _values(self, metric: str) -> Tuple[float, ...]:
        # kept per metric in the instance: a cell's processes never change, and the judgement,
        # the recording and the report each ask again (a replayed study, millions of times)
        return self._kept("_values_of", metric, lambda: tuple(
            v for v in (r.value(metric) for r in self._ok_runs) if v is not None))

    def _kept(self, slot: str, metric: str, make: Callable[[], tuple]) -> tuple:
        """``make()`` for ``metric``, made once and kept in the instance's dict ``slot``."""
        known = self.__dict__.get(slot)
        if known is None:
            known = {}
            object.__setattr__(self, slot, known)
        if metric not in known:
            known[metric] = make()
        return known[metric]

    def metrics(self) -> List[Metric]:
        """The metrics this cell has figures for, primary first."""
        names = [self.primary.name] + list(SECONDARY.get(self.workload.mode, ()))
        names += sorted({k for r in self.ok_runs for k in r.figures} - set(names))
        return [METRICS[n] for n in names if n in METRICS and self.values(n)]

    def figure(self, metric: str) -> Optional[float]:
        vals = self.values(metric)
        return statistics.median(vals) if vals else None

    def reference_figure(self, metric: str) -> Optional[float]:
        """In A/B mode, the reference side's figure: the median over its processes."""
        vals = [v for v in (r.value(metric) for r in self.reference or [] if r.ok) if v is not None]
        return statistics.median(vals) if vals else None

    @property
    def process_medians(self) -> List[float]:
        return self.values(self.primary.name)

    @property
    def median_or_none(self) -> Optional[float]:
        """The primary figure, None when the cell did not measure (what internal code reads)."""
        return self.figure(self.primary.name)

    @property
    def median(self) -> float:
        """The primary figure (median of the per-process figures); raises ``CellNotMeasured``
        with the reason when the cell did not measure."""
        m = self.median_or_none
        if m is None:
            if self.status != OK:
                raise CellNotMeasured(self.workload.key(), self.status, self.message)
            raise CellNotMeasured(self.workload.key(), "no figure", f"no process gave a {self.primary.name} figure")
        return m

    @property
    def spread(self) -> Optional[Dict[str, Any]]:
        """Between-process IQR when there are >= 2 processes, else the rounds' IQR:
        {"basis": "processes"|"rounds", "n", "q1", "q3", "rel"}, rel = (q3 - q1) / median."""
        if not self.ok_runs:
            return None
        if len(self.process_medians) >= 2:
            basis, values = "processes", self.process_medians
        elif self.ok_runs[0].samples:
            basis, values = "rounds", self.ok_runs[0].samples
        else:
            return None
        return dict(iqr_spread(values), basis=basis)

    def pairs(self) -> List[Tuple[RunResult, RunResult]]:
        """(candidate, reference) runs that both measured, in the order they ran: a reference
        process with the ``pair_of`` fact with the candidate process it names (a cell whose
        first processes ran alone, then pairs against a reference: baseline mode's duet
        against the recorded setup), else position by position."""
        return list(self._pairs)

    def pairs_of(self, metric: str) -> Tuple[Tuple[RunResult, RunResult], ...]:
        """The pairs (``pairs``) whose two runs both have a figure for ``metric``; kept per
        metric in the instance, as ``values`` is (each look judges every cell's pairs again)."""
        return self._kept("_pairs_of", metric, lambda: tuple(
            (c, r) for c, r in self._pairs if c.value(metric) is not None and r.value(metric) is not None))

    @_once
    def _pairs(self) -> Tuple[Tuple[RunResult, RunResult], ...]:
        # computed once: a cell's processes never change (each judgement asks again)
        if not self.reference:
            return ()
        by_id = {c.process: c for c in self.runs}
        if all(r.meta.pair_of in by_id for r in self.reference):
            pairs = [(by_id[r.meta.pair_of], r) for r in self.reference]
        else:
            pairs = list(zip(self.runs, self.reference))
        return tuple((c, r) for c, r in pairs if c.ok and r.ok)

    def to_dict(self) -> Dict[str, Any]:
        d = {
            "key": self.workload.key(),
            "workload": self.workload.to_dict(),
            "status": self.status,
            "message": self.message,
            "metric": self.primary.name,
            "unit": self.primary.unit,
            "median": self.median_or_none,
            "process_medians": self.process_medians,
            "figures": {m.name: {"median": self.figure(m.name), "values": self.values(m.name), "unit": m.unit}
                        for m in self.metrics()},
            "spread": self.spread,
            "runs": [r.to_dict() for r in self.runs],
        }
        if self.reference is not None:
            d["reference_runs"] = [r.to_dict() for r in self.reference]
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "CellMeasurement":
        ref = d.get("reference_runs")
        return cls(workload=Workload.from_dict(d["workload"]), runs=_runs_from(d.get("runs")),
                   reference=_runs_from(ref) if ref is not None else None)


def with_flop_figures(run: RunResult, flops_per_sample: Optional[float],
                      peak_gflops: Optional[float] = None) -> RunResult:
    """``run`` with the derived figures ``gflops`` (samples/s x FLOPs per sample) and, given the
    machine's measured peak, ``pct_of_peak``, when it measured a mode that has them: a new
    value (pure). Both are ``derived`` (shown, never judged: the throughput they come from is
    judged)."""
    if not flops_per_sample or flops_per_sample <= 0 or not run.ok or run.workload.mode not in FLOP_MODES:
        return run
    rate = run.value("throughput")
    if not rate:
        return run
    g = rate * flops_per_sample / 1e9
    if peak_gflops and peak_gflops > 0:
        return run.with_figures(gflops=g, pct_of_peak=100.0 * g / peak_gflops)
    return run.with_figures(gflops=g)

