"""The ``mxperf`` fixture object, without pytest: what a test calls to measure.

``Measurer.measure`` measures a zoo model or the user's own network (a symbol JSON file or
a ``package.module:function``); ``measure_module`` measures any other worker kind
(kvstore cost, a distributed cluster, convergence, the input pipeline) as a cell of
figures with units; ``check_floor`` holds a cell to the published tables. Every cell goes
into the session, where the gate judges all its figures against the machine's baseline
(or the reference install in A/B mode). The plugin passes in callbacks for what is
pytest's (skip, fail, record_property).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from . import runner, tables
from .options import PerfOptions
from .samples import CellMeasurement, RunResult
from .session import CellRecord, Finding, PerfSession
from .workload import Workload


class Skip(Exception):
    """Raised when a cell cannot be judged here (no GPU, no applicable table)."""


class Fail(AssertionError):
    """Raised when a cell fails its floor or its measurement failed."""


def judge_floor(cell: CellMeasurement, floor: tables.Floor, states: Optional[Sequence[Optional[str]]] = None
                ) -> (str, str):
    """(outcome, one-line message) of a cell against its floor: passed, failed or skipped.

    ``states``: the machine-state label of each successful process; the floor is held to
    the processes that ran on a quiet machine when there are any (a neighbour must not fail
    a floor), else to all of them, and the message says the machine was busy."""
    median = cell.median
    busy = ""
    slow = ("slowed", "slow-spell")
    if states and len(states) == len(cell.ok_runs) and any(st in slow for st in states):
        quiet = [r.median for r, st in zip(cell.ok_runs, states) if st not in slow and r.median]
        if quiet:
            median = statistics.median(quiet)
        else:
            busy = f" (all {len(states)} processes ran on a slowed machine: re-run on a quiet one)"
    if cell.status in ("unavailable", "unsupported"):
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
                          f"({floor.reason}){busy}")
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
        self.records = []

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

    def require_feature(self, feature: str, what: str) -> None:
        """Skip, with the reason, when the worker's MXNet build lacks ``feature``
        (``mx.runtime.Features``, e.g. NCCL, CUDNN, MKLDNN)."""
        features = self.session.probe.get("features")
        if features is not None and feature not in features:
            reason = (f"{what} needs an MXNet build with {feature}; this one "
                      f"(mxnet {self.session.probe.get('mxnet_version')}) has none")
            self.session.skipped_reasons.append(reason)
            self._skip(reason)

    def _record(self, cell: CellMeasurement, remeasure) -> CellMeasurement:
        rec = CellRecord(self.nodeid, cell, remeasure=remeasure)
        self.records.append(rec)
        self.session.add(rec)
        self._on_cell(rec)
        self._properties(cell)
        return cell

    def measure(self, model: str, batch_size: int, *, mode: str = "score",
                contexts: Sequence[str] = ("cpu:0",), threads: str = "auto", dtype: str = "float32",
                optimizer: str = "sgd", kvstore: Optional[str] = None, processes: Optional[int] = None,
                extra_env: Optional[Mapping[str, str]] = None, input_shape: Optional[Sequence[int]] = None,
                inputs: Optional[Sequence[Mapping[str, Any]]] = None, input_spec: Optional[str] = None,
                params: Optional[str] = None, loss: Optional[str] = None) -> CellMeasurement:
        """Measure a cell: ``model`` is a zoo name, a symbol JSON file (optionally with
        ``params=``), or ``package.module:function`` returning a Symbol or HybridBlock; a
        user's network needs its inputs (``input_shape=`` for one input "data",
        ``inputs=[{name, shape, dtype, high}]``, or the ``input_spec`` text of --perf-input),
        and ``loss=`` to be trained."""
        contexts = tuple(contexts)
        self.require(contexts)
        name, source = self._resolve_model(model, input_shape, inputs, input_spec, params, loss, mode)
        w = Workload(model=name, mode=mode, batch_size=int(batch_size), contexts=contexts, dtype=dtype,
                     threads=str(threads), optimizer=optimizer, kvstore=kvstore, source=source)
        run = self.session.throughput_run(w, extra_env)
        cell = self.session.run_processes(w, run, processes)
        return self._record(cell, lambda n: self.session.run_processes(w, run, n))

    def _resolve_model(self, model, input_shape, inputs, input_spec, params, loss, mode):
        from . import usermodel, zoo
        if model in zoo.MODELS and input_shape is None and inputs is None and input_spec is None:
            return model, ""
        try:
            ref = usermodel.parse_model_ref(model, params=params)
            if ref.kind == "zoo":
                raise usermodel.UserModelError(f"{model} is a zoo model: it takes no inputs")
            specs = usermodel.parse_inputs(input_shape=input_shape, inputs=inputs, text=input_spec)
            if mode == "train" and not loss:
                raise usermodel.UserModelError("training your own network needs loss=... "
                                               "(an output name, or 'softmax_ce')")
            info = usermodel.describe(ref, specs, python=self.options.python, env=self.session.environ)
        except usermodel.UserModelError as exc:
            self._fail(f"{model}: {exc}")
        ref_d = dict(ref.to_dict(), cwd=os.getcwd())
        source = json.dumps({"ref": ref_d, "inputs": [s.to_dict() for s in specs], "loss": loss}, sort_keys=True)
        return usermodel.cell_model_name(ref, info["digest"]), source

    def measure_module(self, module: str, spec: Dict[str, Any], workload: Workload,
                       figures: Callable[[Dict[str, Any]], Dict[str, float]], *,
                       processes: Optional[int] = None, timeout: Optional[float] = None,
                       extra_env: Optional[Mapping[str, str]] = None) -> CellMeasurement:
        """Measure a cell with another worker kind: each process runs ``python -m module``
        on ``spec`` and ``figures(payload)`` turns its result into figures (see
        samples.METRICS for names and units). One process of a distributed cell is one
        whole cluster launch."""
        self.require(workload.contexts)
        o = self.options

        def run(python: Optional[str], seed: int) -> RunResult:
            s = dict(spec)
            s.setdefault("seed", seed)
            as_cap, rss_cap = runner.memory_caps(workload, runner.resolve_memory_limit(o.memory_limit))
            s.setdefault("memory_limit", as_cap)
            env, defaults = runner.build_env(workload, self.session.environ, extra_env)
            out = runner.run_process([python or sys.executable, "-m", module], s, timeout=timeout or o.timeout,
                                     env=env, rss_limit=rss_cap)
            return runner.run_result(out, workload, env, defaults, figures, python=python)

        cell = self.session.run_processes(workload, run, processes)
        return self._record(cell, lambda n: self.session.run_processes(workload, run, n))

    def _properties(self, cell: CellMeasurement) -> None:
        p = self._record_property
        p("mxperf_cell", cell.workload.key())
        p("mxperf_status", cell.status)
        if cell.median is not None:
            p("mxperf_metric", cell.primary.name)
            p("mxperf_unit", cell.primary.unit)
            p("mxperf_median", round(cell.median, 6))
            sp = cell.spread
            if sp and sp.get("rel") is not None:
                p("mxperf_spread_rel", round(sp["rel"], 4))
                p("mxperf_spread_basis", sp["basis"])
            p("mxperf_processes", len(cell.ok_runs))
        else:
            p("mxperf_message", cell.message)

    def check_floor(self, cell: CellMeasurement) -> tables.Floor:
        """Hold the cell to its published-table floor: fails, skips, or returns the floor.
        Without ``floor`` in the failure policy a cell below its floor is reported only."""
        floor = self.session.floor_for(cell)
        outcome, message = judge_floor(cell, floor, self.session.label_now(cell.ok_runs))
        rec = next((r for r in reversed(self.records) if r.cell is cell), None)
        if rec is not None:
            rec.floor, rec.outcome, rec.note = floor, outcome, message
        self._record_property("mxperf_floor_kind", floor.kind or "none")
        if floor.value is not None:
            self._record_property("mxperf_floor_per_s", round(floor.value, 3))
        if floor.documented is not None:
            self._record_property("mxperf_documented_per_s", floor.documented)
        self._record_property("mxperf_outcome", outcome)
        if outcome == "failed" and (cell.status != "ok" or "floor" in self.options.fail_on):
            self._fail(f"{cell.workload.key()}: {message}")
        if outcome == "skipped":
            self._skip(message)
        return floor

    def expect_ok(self, cell: CellMeasurement) -> CellMeasurement:
        """Fail unless the cell was measured (for tests that have no floor)."""
        if cell.status in ("unavailable", "unsupported"):
            self._skip(cell.message)
        if cell.status != "ok":
            self._fail(f"{cell.workload.key()}: {cell.status}: {cell.message}")
        return cell

    def run_module(self, module: str, spec: Dict[str, Any], *, timeout: Optional[float] = None,
                   contexts: Sequence[str] = ("cpu:0",), threads: str = "auto",
                   extra_env: Optional[Mapping[str, str]] = None, mode: str = "score",
                   model: str = "lenet") -> runner.ProcessOutcome:
        """Run ``python -m <module> SPEC RESULT`` once, unjudged (checks, not figures)."""
        contexts = tuple(contexts)
        self.require(contexts)
        w = Workload(model=model, mode=mode, contexts=contexts, threads=str(threads))
        env, _ = runner.build_env(w, self.session.environ, extra_env)
        python = self.options.python or sys.executable
        spec = dict(spec)
        as_cap, rss_cap = runner.memory_caps(w, runner.resolve_memory_limit(self.options.memory_limit))
        spec.setdefault("memory_limit", as_cap)
        return runner.run_process([python, "-m", module], spec, timeout=timeout or self.options.timeout, env=env,
                                  rss_limit=rss_cap)

    def report(self, name: str, figures: Dict[str, Any], note: str = "") -> None:
        """Show derived figures (an efficiency, a ratio) in the report and the JUnit XML;
        they are not judged (the figures they derive from are)."""
        self.session.findings.append(Finding(self.nodeid, name, dict(figures), note))
        for k, v in figures.items():
            self._record_property(f"mxperf_{name}_{k}", v)
