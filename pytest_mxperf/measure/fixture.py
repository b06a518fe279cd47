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

import dataclasses
import json
import os
import statistics
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from pytest_mxperf.judge import floors
from pytest_mxperf.judge.floors import judge_floor
from pytest_mxperf.measure import duet, runner
from pytest_mxperf.measure.peak import (
    cell_flops_per_sample,
    flop_count,
    machine_peak,
    peak_target,
)
from pytest_mxperf.measure.scheduler import CellRun, Remeasure, Scheduler, Side
from pytest_mxperf.measure.ledger import CellRecord, Finding, FloorCheck, Ledger
from pytest_mxperf.model.measurement import (
    CellMeasurement,
    RunResult,
    with_flop_figures,
)
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.model import kinds
from pytest_mxperf.model.workload import Workload


class Skip(Exception):
    """Raised when a cell cannot be judged here (no GPU, no applicable table)."""


class Fail(AssertionError):
    """Raised when a cell fails its floor or its measurement failed."""


def _raise(exc_type):
    def raiser(message: str) -> None:
        raise exc_type(message)
    return raiser


class Measurer:
    """The ``mxperf`` fixture: measure cells, check floors, record findings. It measures
    through the session's scheduler and writes to its ledger: nothing else of the session."""

    def __init__(self, scheduler: Scheduler, ledger: Ledger, nodeid: str,
                 record_property: Callable[[str, Any], None] = lambda k, v: None,
                 on_cell: Callable[[CellRecord], None] = lambda rec: None,
                 skip: Optional[Callable[[str], None]] = None, fail: Optional[Callable[[str], None]] = None,
                 grid: Sequence[Mapping[str, Any]] = (), params: Optional[Mapping[str, Any]] = None):
        self.scheduler = scheduler
        self.ledger = ledger
        # this test's grid parameters (model, batch_size, ctx) and those of every selected test
        # of its function, its own among them: the cells measured together (``_grid_cells``)
        self._params = dict(params or {})
        self._grid = [dict(p) for p in grid]
        self._skip = skip or _raise(Skip)
        self._fail = fail or _raise(Fail)
        self.nodeid = nodeid
        self._record_property = record_property
        self._on_cell = on_cell
        self.records = []
        self._described: Dict[Any, Dict[str, Any]] = {}

    @property
    def options(self) -> PerfOptions:
        return self.scheduler.options

    @property
    def num_gpus(self) -> int:
        return self.scheduler.num_gpus

    def require(self, contexts: Sequence[str]) -> None:
        """Skip (raise Skip) when the contexts cannot run here, with the reason."""
        reason = self.scheduler.gpu_unavailable_reason(contexts)
        if reason:
            self.ledger.skipped(reason)
            self._skip(reason)

    def require_feature(self, feature: str, what: str) -> None:
        """Skip, with the reason, when the worker's MXNet build lacks ``feature``
        (``mx.runtime.Features``, e.g. NCCL, CUDNN, MKLDNN)."""
        features = self.scheduler.probe.get("features")
        if features is not None and feature not in features:
            reason = (f"{what} needs an MXNet build with {feature}; this one "
                      f"(mxnet {self.scheduler.probe.get('mxnet_version')}) has none")
            self.ledger.skipped(reason)
            self._skip(reason)

    def record(self, cell: CellMeasurement, remeasure, duets: bool = False) -> CellMeasurement:
        """Record a measured cell into the session (its ledger), with how to measure it again
        (``remeasure(more)``; ``duets``: its pairs can run as a duet): what every measuring
        call here ends with."""
        rec = CellRecord(self.nodeid, cell, remeasure=remeasure, duets=duets)
        self.records.append(rec)
        self.ledger.add(rec)
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
        and ``loss=`` to be trained unless its graph ends in its own loss outputs (a
        checkpoint of a classifier ending in SoftmaxOutput: see ``trains_as_is``)."""
        contexts = tuple(contexts)
        self.require(contexts)
        name, source = self._resolve_model(model, input_shape, inputs, input_spec, params, loss, mode)
        w = Workload(model=name, mode=mode, batch_size=int(batch_size), contexts=contexts, dtype=dtype,
                     threads=str(threads), optimizer=optimizer, kvstore=kvstore, source=source)
        grid = [w] + self._grid_cells(w)
        cells = self.scheduler.measure_cells(grid, extra_env, processes)

        def finish(measured: CellMeasurement) -> CellMeasurement:
            return self._with_flops(self._with_tf32(measured))
        cell = finish(cells[w.key()])
        run = self.scheduler.throughput_run(w, extra_env)
        self.record(cell, Remeasure(lambda more: finish(self.scheduler.run_more(w, run, more)),
                                    frozenset(g.key() for g in grid) if len(grid) > 1 else frozenset(),
                                    tuple(sorted((extra_env or {}).items())), finish),
                    duets=run.duet is not None)
        self._report_flops(cell)
        return cell

    def _grid_cells(self, w: Workload) -> List[Workload]:
        """The other cells of this test's grid, when the test measures its own grid cell (its
        ``model``, ``batch_size`` and ``ctx`` parameters, a zoo model): the same call with each
        other selected test's parameters. They are measured now, together with this one, in
        worker processes of several cells, and the tests that ask for them later get them
        (``PerfSession.measure_cells``); a test that asks for something else measures that."""
        from pytest_mxperf import zoo
        own = self._params
        if w.source or not self._grid or not self.scheduler.can_share_process(w):
            return []
        mine = {"model": w.model, "batch_size": w.batch_size, "ctx": list(w.contexts)}
        if any(k in own and (list(own[k]) if k == "ctx" else own[k]) != v for k, v in mine.items()):
            return []
        out = []
        for p in self._grid:
            other = dataclasses.replace(
                w, model=str(p.get("model", w.model)), batch_size=int(p.get("batch_size", w.batch_size)),
                contexts=tuple(p.get("ctx", w.contexts)))
            if other != w and other.model in zoo.MODELS and self.scheduler.can_share_process(other):
                out.append(other)
        return out

    def tf32(self, contexts: Sequence[str], worker_cuda_runtime: Optional[str] = None,
             python: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> Optional[Dict[str, Any]]:
        """Whether float32 GEMMs of a worker on ``contexts`` started from ``env`` (default: this
        session's) run as TF32 (``machine/tensor_math.for_contexts``: the GPUs' compute
        capability from NVML, the build's CUDA version, NVIDIA_TF32_OVERRIDE); None for CPU
        contexts."""
        from pytest_mxperf.machine import hardware, tensor_math
        python = python or self.options.python
        return tensor_math.for_contexts(contexts, self.scheduler.environ if env is None else env,
                                        hardware.mxnet_distribution(python), worker_cuda_runtime)

    def _with_tf32(self, cell: CellMeasurement) -> CellMeasurement:
        """A float32 GPU cell whose processes record whether their float32 GEMMs ran as TF32
        (the ``tf32`` fact; its reference processes for the reference install): a new value,
        the measured cell (which another test may share) left as it is."""
        w = cell.workload
        if w.device != "gpu" or w.dtype != "float32":
            return cell

        def with_tf32(r, python):
            fact = self.tf32(w.contexts, r.cuda_runtime, python, r.env)
            return r if fact is None else r.with_facts(tf32=dict(fact))
        return cell.with_runs([with_tf32(r, self.options.python) for r in cell.runs],
                              None if cell.reference is None else
                              [with_tf32(r, self.scheduler.context.comparison.reference) for r in cell.reference])

    def _with_flops(self, cell: CellMeasurement) -> CellMeasurement:
        """The cell with its derived figures: achieved GFLOP/s and the percentage of the
        measured peak of its device and dtype (measured now if this is the first cell that
        needs it; ``peak_target``): a new value. Shown, never judged: the throughput is."""
        fps = cell_flops_per_sample(cell.workload, cell.ok_runs)
        if fps is None or not cell.ok_runs:
            return cell
        peak = self._cell_peak(cell.workload)[0]
        return cell.mapped(lambda r: with_flop_figures(r, fps, peak))

    def _cell_peak(self, w: Workload):
        """(peak GFLOP/s the cell is set against or None, the peak worker's result or None,
        why there is none). A cell on N GPUs is set against N x its first GPU's peak (the
        GPUs of one cell taken as alike); a cell on several CPU contexts shares one CPU."""
        context, dtype = peak_target(w)
        if context is None:
            return None, None, dtype
        if not self.options.machine_peak:
            return None, None, "peak not measured (--perf-no-peak)"
        p = machine_peak(self.scheduler, context, dtype)
        if not isinstance(p.get("peak_gflops"), (int, float)):
            return None, p, f"peak not measured: {p.get('status')}: {p.get('message')}"
        n = w.num_devices if w.device == "gpu" else 1
        return p["peak_gflops"] * n, p, ""

    def _report_flops(self, cell: CellMeasurement) -> None:
        g = cell.figure("gflops")
        if g is None:
            return
        w = cell.workload
        fps = cell_flops_per_sample(w, cell.ok_runs) or 0.0
        figs: Dict[str, Any] = {"gflops": round(g, 2)}
        what = "forward + backward (3 x forward)" if w.mode == "train" else "forward"
        whose = ", counted from your graph" if w.source else ""
        notes = [f"{flop_count(fps)} per sample ({what}; 2 x Convolution/FullyConnected MACs{whose})"]
        pct = cell.figure("pct_of_peak")
        peak_gflops, peak, why = self._cell_peak(w)
        if pct is not None and peak_gflops:
            figs["peak_gflops"] = round(peak_gflops, 2)
            figs["pct_of_peak"] = round(pct, 1)
            kernels = ", ".join(f"{name} {peak[k]:.1f}" for name, k in (("FullyConnected", "fc_gflops"),
                                                                         ("3x3 Convolution", "conv_gflops"))
                                if isinstance(peak.get(k), (int, float)))
            if w.device == "gpu":
                many = f"{w.num_devices} x " if w.num_devices > 1 else ""
                notes.append(f"peak: {many}best round of {w.dtype} cuBLAS / cuDNN kernels through MXNet on "
                             f"{peak['context']} ({kernels} GFLOP/s)")
            else:
                notes.append(f"peak: best round of float32 oneDNN kernels through MXNet ({kernels} GFLOP/s), "
                             f"OMP_NUM_THREADS={peak.get('omp_num_threads')}")
        elif why:
            notes.append(why)
        self.ledger.show(Finding(self.nodeid, f"hardware limit {w.key()}", figs, "; ".join(notes)))
        for k, v in figs.items():
            self._record_property(f"mxperf_{k}", v)

    def _resolve_model(self, model, input_shape, inputs, input_spec, params, loss, mode):
        from pytest_mxperf import zoo
        from pytest_mxperf.model import user_network as usermodel
        if model in zoo.MODELS and input_shape is None and inputs is None and input_spec is None:
            return model, ""
        try:
            ref = usermodel.parse_model_ref(model, params=params)
            if ref.kind == "zoo":
                raise usermodel.UserModelError(f"{model} is a zoo model: it takes no inputs")
            specs = usermodel.parse_inputs(input_shape=input_shape, inputs=inputs, text=input_spec)
            info = self._describe(ref, specs)
            if mode == "train" and not loss and not info.get("ends_in_loss"):
                raise usermodel.UserModelError("training your own network needs loss=... (an output name, or "
                                               "'softmax_ce'; a graph ending in SoftmaxOutput, a *RegressionOutput "
                                               "or SVMOutput needs none)")
        except usermodel.UserModelError as exc:
            self._fail(f"{model}: {exc}")
        ref_d = dict(ref.to_dict(), cwd=os.getcwd())
        source = json.dumps({"ref": ref_d, "inputs": [s.to_dict() for s in specs], "loss": loss}, sort_keys=True)
        return usermodel.cell_model_name(ref, info["digest"]), source

    def _describe(self, ref, specs) -> Dict[str, Any]:
        """``runner.describe_user_network`` of a user's network, once per test (a callable's costs a worker)."""
        key = (ref, tuple(specs))
        if key not in self._described:
            self._described[key] = runner.describe_user_network(ref, specs, python=self.options.python,
                                                      env=self.scheduler.environ)
        return self._described[key]

    def trains_as_is(self, model: str, *, params: Optional[str] = None,
                     input_shape: Optional[Sequence[int]] = None,
                     inputs: Optional[Sequence[Mapping[str, Any]]] = None, input_spec: Optional[str] = None) -> bool:
        """Whether your own network ``model`` ends in its own loss outputs (SoftmaxOutput, a
        *RegressionOutput, SVMOutput: what ``Module.save_checkpoint`` writes for a classifier
        or a regressor), so that it trains without ``loss=``. Fails as ``measure`` does on a
        reference or inputs that cannot be used."""
        from pytest_mxperf.model import user_network as usermodel
        try:
            ref = usermodel.parse_model_ref(model, params=params)
            if ref.kind == "zoo":
                return False
            specs = usermodel.parse_inputs(input_shape=input_shape, inputs=inputs, text=input_spec)
            return bool(self._describe(ref, specs).get("ends_in_loss"))
        except usermodel.UserModelError as exc:
            self._fail(f"{model}: {exc}")

    def measure_kind(self, workload: Workload, spec: Dict[str, Any], *, processes: Optional[int] = None,
                     timeout: Optional[float] = None, extra_env: Optional[Mapping[str, str]] = None
                     ) -> CellMeasurement:
        """Measure a cell of the kind its ``workload.mode`` names (``model/kinds.py``): its
        worker module runs ``spec``, the kind reads its figures (``Kind.read_figures``); as
        ``measure_module`` otherwise (duets in A/B mode when the kind is resident). A worker module
        outside the package is found where pytest runs (the current directory on its
        ``PYTHONPATH``, as a user's own network is). The worker's spec holds the cell's
        ``workload`` (``Workload.to_dict``) unless ``spec`` gives its own."""
        k = kinds.kind(workload.mode)
        spec = dict(spec, workload=spec.get("workload", workload.to_dict()))
        if not k.worker.startswith("pytest_mxperf."):  # a project's own worker: importable from where pytest runs
            paths = [os.getcwd(), (extra_env or {}).get("PYTHONPATH") or os.environ.get("PYTHONPATH")]
            extra_env = dict(extra_env or {}, PYTHONPATH=os.pathsep.join(p for p in paths if p))
        return self.measure_module(k.worker, spec, workload, k.read_figures, processes=processes,
                                   timeout=timeout, extra_env=extra_env)

    def measure_module(self, module: str, spec: Dict[str, Any], workload: Workload,
                       figures: Callable[[Dict[str, Any]], Dict[str, float]], *,
                       processes: Optional[int] = None, timeout: Optional[float] = None,
                       extra_env: Optional[Mapping[str, str]] = None) -> CellMeasurement:
        """Measure a cell with another worker kind: each process runs ``python -m module``
        on ``spec`` and ``figures(payload)`` turns its result into figures (see
        samples.METRICS for names and units). One process of a distributed cell is one
        whole cluster launch.

        In A/B mode a resident kind (``duet.RESIDENT_MODULES``: the workers of the kinds
        ``model/kinds.py`` declares resident) runs as duet pairs: both workers get the spec with
        ``control`` and serve timed rounds in turn (``duet.run_pair``); any other kind runs
        fresh process pairs back to back."""
        self.require(workload.contexts)
        o = self.options

        def run(side: Side, seed: int) -> RunResult:
            s = dict(spec)
            s.setdefault("seed", seed)
            as_cap, rss_cap = runner.memory_caps(workload, runner.resolve_memory_limit(o.memory_limit))
            s.setdefault("memory_limit", as_cap)
            env, defaults = runner.build_env(workload, side.environ(self.scheduler.environ), extra_env)
            out = runner.run_process([side.python or sys.executable, "-m", module], s,
                                     timeout=timeout or o.timeout, env=env, rss_limit=rss_cap)
            return runner.run_result(out, workload, env, defaults, figures, python=side.python)

        duet_pair = None
        if duet.resident(module):
            def duet_pair(candidate: Side, reference: Side, seed: int, candidate_first: bool):
                # the spec as a process gets it; run_pair fills in the seed and the memory cap
                environ = self.scheduler.environ
                return duet.run_pair(workload, candidate=candidate.python, reference=reference.python, seed=seed,
                                     candidate_first=candidate_first, time_budget=o.time_budget, smoke=o.smoke,
                                     timeout=timeout or o.timeout, warmup_timeout=o.warmup_timeout,
                                     memory_limit=o.memory_limit, env=candidate.environ(environ),
                                     reference_env=reference.environ(environ), extra_env=extra_env,
                                     module=module, spec=dict(spec), figures=figures)
        # A/B pairs of a resident worker kind run as a duet (Scheduler.run_processes)
        how = CellRun(run, duet_pair)
        cell = self.scheduler.run_processes(workload, how, processes)
        return self.record(cell, lambda more: self.scheduler.run_more(workload, how, more), duets=duet_pair is not None)

    def _properties(self, cell: CellMeasurement) -> None:
        p = self._record_property
        p("mxperf_cell", cell.workload.key())
        p("mxperf_status", cell.status)
        if cell.median_or_none is not None:
            p("mxperf_metric", cell.primary.name)
            p("mxperf_unit", cell.primary.unit)
            p("mxperf_median", round(cell.median_or_none, 6))
            sp = cell.spread
            if sp and sp.get("rel") is not None:
                p("mxperf_spread_rel", round(sp["rel"], 4))
                p("mxperf_spread_basis", sp["basis"])
            p("mxperf_processes", len(cell.ok_runs))
        else:
            p("mxperf_message", cell.message)

    def check_floor(self, cell: CellMeasurement) -> floors.Floor:
        """Hold the cell to its published-table floor: fails, skips, or returns the floor.
        Without ``floor`` in the failure policy a cell below its floor is reported only."""
        floor = self.scheduler.floor_for(cell)
        outcome, message = judge_floor(cell, floor, self.scheduler.label_now(cell.ok_runs), self.options.min_effect)
        key = cell.workload.key()
        if any(r.key == key for r in self.records):
            self.ledger.settle(FloorCheck(self.nodeid, key, floor, outcome, message))
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

    def recorded(self, workload: Workload, figure: str) -> Optional[float]:
        """The median of ``figure`` over the baseline's processes of ``workload``'s cell; None
        without a baseline, or when it does not record the cell or the figure (a setting a
        cell's first recording fixed, such as a serving cell's target rate, read back)."""
        baseline = self.scheduler.context.baseline
        values = baseline.values(workload.key(), figure) if baseline is not None else None
        return statistics.median(values) if values else None

    def run_module(self, module: str, spec: Dict[str, Any], *, timeout: Optional[float] = None,
                   contexts: Sequence[str] = ("cpu:0",), threads: str = "auto",
                   extra_env: Optional[Mapping[str, str]] = None, mode: str = "score",
                   model: str = "lenet", paired: bool = False) -> runner.ProcessOutcome:
        """Run ``python -m <module> SPEC RESULT`` once, unjudged (checks, not figures). With
        ``paired``: under the install a cell's processes are paired with (A/B mode's
        reference, a baseline's recorded setup) when there is one, e.g. to fix a setting both
        sides then measure with."""
        contexts = tuple(contexts)
        self.require(contexts)
        w = Workload(model=model, mode=mode, contexts=contexts, threads=str(threads))
        side = self.scheduler.paired_with(w) if paired else None
        env, _ = runner.build_env(w, side.environ(self.scheduler.environ) if side else self.scheduler.environ,
                                  extra_env)
        python = (side.python if side else None) or self.options.python or sys.executable
        spec = dict(spec)
        as_cap, rss_cap = runner.memory_caps(w, runner.resolve_memory_limit(self.options.memory_limit))
        spec.setdefault("memory_limit", as_cap)
        return runner.run_process([python, "-m", module], spec, timeout=timeout or self.options.timeout, env=env,
                                  rss_limit=rss_cap)

    def report(self, name: str, figures: Dict[str, Any], note: str = "") -> None:
        """Show derived figures (an efficiency, a ratio) in the report and the JUnit XML;
        they are not judged (the figures they derive from are)."""
        self.ledger.show(Finding(self.nodeid, name, dict(figures), note))
        for k, v in figures.items():
            self._record_property(f"mxperf_{name}_{k}", v)
