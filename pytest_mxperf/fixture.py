"""The measuring session and the per-test ``mxperf`` fixture object, without pytest.

``PerfSession`` holds what a pytest session measured (cells, floors, findings) and the
lazily gathered facts (hardware, the MXNet probe). ``Measurer`` is what a test sees as
the ``mxperf`` fixture: it measures a cell in fresh worker processes, checks floors,
runs other worker modules and records findings. The plugin passes in callbacks for
what is pytest's (skip, fail, record_property).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import hardware, runner, tables
from .options import PerfOptions
from .samples import CellMeasurement, RunResult
from .workload import Workload


class Skip(Exception):
    """Raised when a cell cannot be judged here (no GPU, no applicable table)."""


class Fail(AssertionError):
    """Raised when a cell fails its floor or its measurement failed."""


@dataclasses.dataclass
class CellRecord:
    """One measured cell with everything the report shows about it."""

    nodeid: str
    cell: CellMeasurement
    floor: Optional[tables.Floor] = None
    outcome: str = "measured"  # passed / failed / skipped / measured
    note: str = ""
    verdict: Optional[Dict[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        d = self.cell.to_dict()
        d["nodeid"] = self.nodeid
        d["floor"] = dataclasses.asdict(self.floor) if self.floor else None
        d["outcome"] = self.outcome
        d["note"] = self.note
        d["verdict"] = self.verdict
        return d


@dataclasses.dataclass
class Finding:
    nodeid: str
    name: str
    figures: Dict[str, Any]
    note: str = ""


class PerfSession:
    def __init__(self, options: PerfOptions, environ: Optional[Mapping[str, str]] = None):
        self.options = options
        self.environ = dict(os.environ if environ is None else environ)
        self.records: List[CellRecord] = []
        self.findings: List[Finding] = []
        self.skipped_reasons: List[str] = []
        self._probe: Optional[Dict[str, Any]] = None
        self._hw: Optional[tables.HardwareInfo] = None
        self.started = time.time()
        self.machine: Dict[str, Any] = {"id": "unknown"}
        self.baseline_doc: Optional[Dict[str, Any]] = None
        self.end_messages: List[str] = []
        self.deselected_slow = 0

    # -- facts, gathered once and only when needed ------------------------------------
    @property
    def probe(self) -> Dict[str, Any]:
        if self._probe is None:
            self._probe = runner.probe(self.options.python, env=self.environ)
        return self._probe

    @property
    def num_gpus(self) -> int:
        return int(self.probe.get("num_gpus") or 0)

    @property
    def hardware(self) -> tables.HardwareInfo:
        if self._hw is None:
            self._hw = hardware.hardware_info()
        return self._hw

    def gpu_unavailable_reason(self, contexts: Sequence[str]) -> Optional[str]:
        """Why GPU contexts cannot run here, or None when they can (or are CPU)."""
        gpus = [c for c in contexts if c.startswith("gpu")]
        if not gpus:
            return None
        have = self.num_gpus
        if self.probe.get("status") not in (None, "ok"):
            return f"cannot probe MXNet for GPUs: {self.probe.get('message')}"
        if have == 0:
            return "no GPU here: mx.context.num_gpus() is 0"
        top = max(int(c.split(":")[1]) for c in gpus)
        if top >= have:
            return f"{','.join(gpus)} requested but this machine has {have} GPU(s) (gpu:0..gpu:{have - 1})"
        return None

    # -- measuring ------------------------------------------------------------------------
    def measure(self, workload: Workload, processes: Optional[int] = None,
                extra_env: Optional[Mapping[str, str]] = None) -> CellMeasurement:
        """Measure one cell in ``processes`` fresh worker processes, one after the other."""
        n = processes or self.options.processes
        runs: List[RunResult] = []
        for i in range(n):
            r = runner.run_workload(workload, time_budget=self.options.time_budget, smoke=self.options.smoke,
                                    timeout=self.options.timeout, memory_limit=self.options.memory_limit,
                                    env=self.environ, extra_env=extra_env, python=self.options.python, seed=i)
            runs.append(r)
            if not r.ok:
                break  # a crash, OOM or timeout will not go away by repeating it
        return CellMeasurement(workload, runs)

    def floor_for(self, cell: CellMeasurement) -> tables.Floor:
        w = cell.workload
        mode = w.mode if w.mode in ("score", "train") else None
        if mode is None or w.num_devices != 1:
            why = ("published tables are single-device" if mode else f"no published table for mode {w.mode}")
            return tables.Floor(None, None, None, None, self.options.floor_tolerance, False, why)
        return tables.select_floor(self.hardware, mode, w.model, w.batch_size, w.device,
                                   tolerance=self.options.floor_tolerance)


def judge_floor(cell: CellMeasurement, floor: tables.Floor) -> (str, str):
    """(outcome, one-line message) of a cell against its floor.

    outcome is "passed", "failed" or "skipped".
    """
    median = cell.median
    if cell.status == "unavailable":
        return "skipped", cell.message
    if cell.status == "oom":
        if floor.oom_documented:
            return "passed", f"OOM, as the published table records for this cell ({floor.table_id})"
        return "failed", f"out of memory: {cell.message}"
    if cell.status != "ok":
        return "failed", f"{cell.status}: {cell.message}"
    if floor.oom_documented:
        return "passed", f"measured {median:.2f} img/s where the published table records OOM ({floor.table_id})"
    if floor.kind is None:
        return "skipped", f"measured {median:.2f} img/s; no floor: {floor.reason}"
    if median < floor.value:
        return "failed", (f"{median:.2f} img/s is below the {floor.kind} floor {floor.value:.2f} img/s "
                          f"({floor.reason})")
    return "passed", f"{median:.2f} img/s >= {floor.kind} floor {floor.value:.2f} img/s ({floor.table_id})"


def _raise(exc_type):
    def raiser(message: str) -> None:
        raise exc_type(message)
    return raiser


class Measurer:
    """The ``mxperf`` fixture: measure cells, check floors, record findings."""

    def __init__(self, session: PerfSession, nodeid: str,
                 record_property: Callable[[str, Any], None] = lambda k, v: None,
                 on_cell: Callable[[CellRecord], None] = lambda rec: None,
                 skip: Optional[Callable[[str], None]] = None, fail: Optional[Callable[[str], None]] = None):
        self.session = session
        self._skip = skip or _raise(Skip)
        self._fail = fail or _raise(Fail)
        self.nodeid = nodeid
        self._record_property = record_property
        self._on_cell = on_cell
        self.records: List[CellRecord] = []

    @property
    def options(self) -> PerfOptions:
        return self.session.options

    @property
    def num_gpus(self) -> int:
        return self.session.num_gpus

    def require(self, contexts: Sequence[str]) -> None:
        """Skip (raise Skip) when the contexts cannot run here, with the reason."""
        reason = self.session.gpu_unavailable_reason(contexts)
        if reason:
            self.session.skipped_reasons.append(reason)
            self._skip(reason)

    def measure(self, model: str, batch_size: int, *, mode: str = "score",
                contexts: Sequence[str] = ("cpu:0",), threads: str = "auto", dtype: str = "float32",
                optimizer: str = "sgd", kvstore: Optional[str] = None, processes: Optional[int] = None,
                extra_env: Optional[Mapping[str, str]] = None) -> CellMeasurement:
        contexts = tuple(contexts)
        self.require(contexts)
        w = Workload(model=model, mode=mode, batch_size=int(batch_size), contexts=contexts, dtype=dtype,
                     threads=str(threads), optimizer=optimizer, kvstore=kvstore)
        cell = self.session.measure(w, processes, extra_env)
        rec = CellRecord(self.nodeid, cell)
        self.records.append(rec)
        self.session.records.append(rec)
        self._on_cell(rec)
        self._properties(cell)
        return cell

    def _properties(self, cell: CellMeasurement) -> None:
        p = self._record_property
        p("mxperf_cell", cell.workload.key())
        p("mxperf_status", cell.status)
        if cell.median is not None:
            p("mxperf_median_per_s", round(cell.median, 3))
            sp = cell.spread
            if sp and sp.get("rel") is not None:
                p("mxperf_spread_rel", round(sp["rel"], 4))
                p("mxperf_spread_basis", sp["basis"])
            p("mxperf_processes", len(cell.ok_runs))
        else:
            p("mxperf_message", cell.message)

    def check_floor(self, cell: CellMeasurement) -> tables.Floor:
        """Hold the cell to its published-table floor: raises Fail or Skip, or returns the floor."""
        floor = self.session.floor_for(cell)
        outcome, message = judge_floor(cell, floor)
        rec = next((r for r in reversed(self.records) if r.cell is cell), None)
        if rec is not None:
            rec.floor, rec.outcome, rec.note = floor, outcome, message
        self._record_property("mxperf_floor_kind", floor.kind or "none")
        if floor.value is not None:
            self._record_property("mxperf_floor_per_s", round(floor.value, 3))
        if floor.documented is not None:
            self._record_property("mxperf_documented_per_s", floor.documented)
        self._record_property("mxperf_outcome", outcome)
        if outcome == "failed":
            self._fail(f"{cell.workload.key()}: {message}")
        if outcome == "skipped":
            self._skip(message)
        return floor

    def expect_ok(self, cell: CellMeasurement) -> CellMeasurement:
        """Raise Fail unless the cell was measured (for tests that have no floor)."""
        if cell.status == "unavailable":
            self._skip(cell.message)
        if cell.status != "ok":
            self._fail(f"{cell.workload.key()}: {cell.status}: {cell.message}")
        return cell

    def run_module(self, module: str, spec: Dict[str, Any], *, timeout: Optional[float] = None,
                   contexts: Sequence[str] = ("cpu:0",), threads: str = "auto",
                   extra_env: Optional[Mapping[str, str]] = None, mode: str = "score",
                   model: str = "lenet") -> runner.ProcessOutcome:
        """Run ``python -m <module> SPEC RESULT`` in a fresh worker process (same env rules)."""
        contexts = tuple(contexts)
        self.require(contexts)
        w = Workload(model=model, mode=mode, contexts=contexts, threads=str(threads))
        env, _ = runner.build_env(w, self.session.environ, extra_env)
        python = self.options.python or sys.executable
        spec = dict(spec)
        spec.setdefault("memory_limit", runner.resolve_memory_limit(self.options.memory_limit))
        return runner.run_process([python, "-m", module], spec, timeout=timeout or self.options.timeout, env=env)

    def report(self, name: str, figures: Dict[str, Any], note: str = "") -> None:
        """Add a finding (e.g. a scaling efficiency) to the session report and JUnit XML."""
        self.session.findings.append(Finding(self.nodeid, name, dict(figures), note))
        for k, v in figures.items():
            self._record_property(f"mxperf_{name}_{k}", v)
