"""Measure one workload in one fresh worker process: its environment (threads, GPU order),
its spec, its utilisation sampled beside it (and cut to the timed rounds the worker marks;
on a GPU cell with its own GPU memory read from NVML, whose peak is the judged
``gpu_memory_mib``), and what became of it as a RunResult (ok, error, oom, crash, timeout or unavailable, with
the worker's last stderr lines).
Starting, bounding and classifying the process is ``proc/worker.py``'s."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from pytest_mxperf.machine import topology
from pytest_mxperf.model import kinds, user_network
from pytest_mxperf.model.options import TIME_BUDGET_S
from pytest_mxperf.model.measurement import RunResult
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.proc import spawn, worker
from pytest_mxperf.proc.worker import (
    DEFAULT_TIMEOUT,
    ProcessOutcome,
    memory_caps,
    resolve_memory_limit,
)

WORKER_MODULE = "pytest_mxperf.workers.throughput"


def worker_command(python: Optional[str] = None) -> List[str]:
    return spawn.python_command(python, WORKER_MODULE)


def build_env(workload: Workload, base: Optional[Mapping[str, str]] = None,
              extra: Optional[Mapping[str, str]] = None):
    base = dict(os.environ if base is None else base)
    if extra:
        base.update(extra)
    ncpu = workload.num_devices if workload.device == "cpu" else 1
    env, defaults = topology.worker_env(base, workload.threads, ncpu)
    if workload.device == "gpu":
        # CUDA_DEVICE_ORDER=PCI_BUS_ID (gpu:N is the GPU that NVML facts name) and a
        # persistent CUDA JIT cache; a value the user set is kept
        from pytest_mxperf.machine import cuda_devices
        for name, choice in cuda_devices.gpu_env_sources(env).items():
            env[name] = choice["value"]
            if choice["set_by"] == "suite":
                defaults[name] = choice["value"]
    return spawn.with_package_path(env), defaults


def _sampler(pid: int, spec: Dict, env: Optional[Mapping[str, str]]):
    """A started utilisation sampler for the worker (its GPUs too, when its contexts are);
    None when it cannot start: sampling never stops a measurement."""
    from pytest_mxperf.machine import utilisation
    try:
        contexts = ((spec.get("workload") or {}).get("contexts")) or spec.get("contexts") or ()
        gpus = utilisation.gpu_indices(list(contexts), env or os.environ)
        return utilisation.Sampler(pid, gpus, env=env).start()
    except Exception:  # noqa: BLE001 - a broken NVML must not fail the run
        return None


def run_process(command: Sequence[str], spec: Dict, **kwargs) -> ProcessOutcome:
    """``worker.run_process`` with the worker's utilisation sampled beside it (on a GPU cell
    also the worker's own GPU memory, its peak: ``utilisation.own_gpu_memory_mib``)."""
    return worker.run_process(command, spec, observe=_sampler, **kwargs)


def worker_figures(payload: Dict) -> Dict[str, float]:
    """Figures a throughput worker reports besides its round timings (latency, GPU memory)."""
    figs = payload.get("figures") or {}
    return {k: float(v) for k, v in figs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def run_result(out: ProcessOutcome, workload: Workload, env: Optional[Mapping[str, str]],
               defaults_applied: Optional[Mapping[str, str]] = None,
               figures: Callable[[Dict], Dict[str, float]] = worker_figures,
               python: Optional[str] = None, gpu_memory_mib: Optional[float] = None) -> RunResult:
    """A ProcessOutcome as a RunResult: its figures (``figures(payload)`` when it measured),
    the environment it ran with and what the suite filled in. ``gpu_memory_mib``: the
    worker's own peak GPU memory as the parent read it from NVML (judged as
    ``gpu_memory_mib`` when it measured; None: no such figure). A GPU worker that failed
    because the MXNet build has no kernel for the GPU gets one line saying which GPU,
    which architectures the wheel of ``python`` carries and which extra would run."""
    payload = out.payload or {}
    meta = dict(payload.get("meta") or {})
    # the scalar facts of a worker result without a "meta" of its own (sizes, counts, names)
    meta.setdefault("result", {k: v for k, v in payload.items()
                               if k not in ("status", "message", "meta") and isinstance(v, (str, int, float, bool))})
    # the variables the process ran with: as it got them when it says (a wrapper interpreter's
    # own included), else as the parent passed them
    seen = meta.get("worker_env")
    meta["env"] = dict(seen) if isinstance(seen, dict) else topology.recorded_env(env or os.environ)
    if out.utilisation:  # the sampler's readings cut to the worker's timed rounds
        from pytest_mxperf.machine import utilisation
        meta["utilisation"] = utilisation.with_timed_rounds(out.utilisation, meta.get("timed_windows"))
    meta["env_defaults_applied"] = dict(defaults_applied or {})
    ok = out.status == "ok"
    try:
        figs = figures(payload) if ok else {}
    except (KeyError, TypeError, ValueError) as exc:
        return RunResult(workload=workload, status="error", meta=meta, stderr_tail=out.stderr_tail,
                         message=f"worker result has no usable figures ({type(exc).__name__}: {exc})",
                         returncode=out.returncode, wall_seconds=out.wall_seconds)
    if ok and gpu_memory_mib is not None:
        figs = dict(figs, gpu_memory_mib=gpu_memory_mib)
    try:  # a figure its kind does not declare is an error here, where it is first seen
        kinds.check_figures(workload.mode, figs)
    except kinds.UnknownFigure as exc:
        return RunResult(workload=workload, status="error", meta=meta, stderr_tail=out.stderr_tail,
                         message=str(exc), returncode=out.returncode, wall_seconds=out.wall_seconds)
    message = out.message
    if workload.device == "gpu" and not ok:
        from pytest_mxperf.machine import hardware
        message = hardware.explain_gpu_failure([out.message] + list(out.stderr_tail), workload.contexts, env,
                                               hardware.mxnet_distribution(python)) or message
    return RunResult(workload=workload, status=out.status, message=message,
                     batches_per_round=int(payload.get("batches_per_round", 0) or 0),
                     round_seconds=[float(x) for x in payload.get("round_seconds", [])] if ok else [],
                     figures={k: float(v) for k, v in figs.items() if v is not None},
                     meta=meta, stderr_tail=out.stderr_tail, returncode=out.returncode,
                     wall_seconds=out.wall_seconds)


def make_spec(workload: Workload, *, time_budget: float = TIME_BUDGET_S, smoke: bool = False,
              memory_limit: Optional[int] = None, seed: int = 0, **options) -> Dict:
    spec = {"workload": workload.to_dict(), "time_budget": time_budget, "smoke": smoke,
            "memory_limit": memory_limit, "seed": seed}
    spec.update(options)
    return spec


def run_workload(workload: Workload, *, time_budget: float = TIME_BUDGET_S, smoke: bool = False,
                 timeout: float = DEFAULT_TIMEOUT, memory_limit: Optional[int] = -1,
                 env: Optional[Mapping[str, str]] = None, extra_env: Optional[Mapping[str, str]] = None,
                 python: Optional[str] = None, command: Optional[Sequence[str]] = None,
                 seed: int = 0, warmup_timeout: Optional[float] = None, **options) -> RunResult:
    """Measure one workload in one fresh worker process.

    ``memory_limit=-1`` means the default cap (75% of RAM); None means no cap.
    ``env`` replaces os.environ as the base environment; ``extra_env`` is laid over it
    (both before the suite's defaults fill what is still unset).
    """
    as_cap, rss_cap = memory_caps(workload, resolve_memory_limit(memory_limit))
    full_env, defaults = build_env(workload, env, extra_env)
    spec = make_spec(workload, time_budget=time_budget, smoke=smoke, memory_limit=as_cap,
                     seed=seed, **options)
    out = run_process(command or worker_command(python), spec, timeout=timeout, env=full_env, rss_limit=rss_cap,
                      warmup_timeout=warmup_timeout)
    from pytest_mxperf.machine import utilisation
    return run_result(out, workload, full_env, defaults, python=python,
                      gpu_memory_mib=utilisation.own_gpu_memory_mib(out.utilisation))


def run_cells(workloads: Sequence[Workload], *, time_budget: float = TIME_BUDGET_S, smoke: bool = False,
              timeout: float = DEFAULT_TIMEOUT, memory_limit: Optional[int] = -1,
              env: Optional[Mapping[str, str]] = None, extra_env: Optional[Mapping[str, str]] = None,
              python: Optional[str] = None, seed: int = 0, warmup_timeout: Optional[float] = None,
              command: Optional[Sequence[str]] = None) -> List[Optional[RunResult]]:
    """Measure several CPU cells in turn in one fresh worker process (MXNet imported once;
    ``workers/throughput.measure_cells``): one entry per workload, in their order, its
    RunResult, or None for a cell the process did not reach (a cell before it failed and
    ended the process: the caller measures the rest in a fresh one). The cells must share
    their environment (``build_env``) and memory cap; each cell's warm-up and measurement
    is bounded apart (``warmup_timeout``, ``timeout``) from the worker's progress lines.

    The cell that was running when the process died (crash, timeout, out of memory) gets
    the process's outcome; when it died before any cell began (``import mxnet``), every
    cell does."""
    if not workloads:
        return []
    limit = resolve_memory_limit(memory_limit)
    as_cap, rss_cap = memory_caps(workloads[0], limit)
    full_env, defaults = build_env(workloads[0], env, extra_env)
    for w in workloads[1:]:
        if build_env(w, env, extra_env)[0] != full_env or memory_caps(w, limit) != (as_cap, rss_cap):
            raise ValueError(f"{w.key()} needs another environment than {workloads[0].key()}: not one process")
    spec = {"cells": [make_spec(w, time_budget=time_budget, smoke=smoke, memory_limit=as_cap, seed=seed)
                      for w in workloads], "memory_limit": as_cap}
    out = run_process(command or worker_command(python), spec, timeout=timeout, env=full_env, rss_limit=rss_cap,
                      warmup_timeout=warmup_timeout, cells=True)
    return cells_of(out, workloads, full_env, defaults, python)


def cells_of(out: ProcessOutcome, workloads: Sequence[Workload], env: Mapping[str, str],
             defaults: Optional[Mapping[str, str]], python: Optional[str] = None) -> List[Optional[RunResult]]:
    """A worker of several cells (``out.progress``: its progress lines) as one RunResult per
    workload, in their order, or None for a cell it did not reach: the cell that was running
    when it died gets the process's outcome; when it died before any cell began, every cell
    does."""
    lines = out.progress or []
    results = {ln["cell"]: ln["result"] for ln in lines if "result" in ln}
    started = {ln["cell"]: ln.get("t") for ln in lines if ln.get("phase") == "start"}
    ended = {ln["cell"]: ln.get("t") for ln in lines if "result" in ln}
    died_in = next((i for i in range(len(workloads)) if i in started and i not in results), None)
    runs: List[Optional[RunResult]] = []
    for i, w in enumerate(workloads):
        wall = ((ended.get(i) or 0.0) - (started.get(i) or 0.0)) if i in results else out.wall_seconds
        if i in results:
            r = results[i]
            cell_out = ProcessOutcome(str(r.get("status", "error")), str(r.get("message", "")), r,
                                      [] if r.get("status") == "ok" else out.stderr_tail, out.returncode, wall,
                                      out.utilisation)
        elif i == died_in or (not started and out.status != "ok"):
            status = out.status if out.status != "ok" else "crash"
            message = out.message or "the worker ended without this cell's result"
            cell_out = ProcessOutcome(status, message, None, out.stderr_tail, out.returncode, wall, out.utilisation)
        else:
            runs.append(None)
            continue
        runs.append(run_result(cell_out, w, env, defaults, python=python))
    return runs


def describe_user_network(ref: user_network.ModelRef, inputs: Sequence[user_network.InputSpec], *,
                          python: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                          timeout: float = DEFAULT_TIMEOUT) -> Dict[str, Any]:
    """{"digest", "kind", "ends_in_loss", "num_params"}: for a symbol file read here; for a
    callable (the parent never imports MXNet) from a worker that builds it."""
    if ref.kind == "symbol-file":
        with open(ref.target) as fh:
            text = fh.read()
        return {"digest": user_network.canonical_graph_digest(text), "kind": "symbol",
                "ends_in_loss": user_network.ends_in_loss(text)}
    import sys

    spec = {"ref": ref.to_dict(), "inputs": [s.to_dict() for s in inputs], "describe": True}
    env = spawn.with_package_path(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), os.getcwd()) if p)
    out = run_process([python or sys.executable, "-m", "pytest_mxperf.workers.usermodel"], spec,
                      timeout=timeout, env=env)
    if out.status != "ok":
        raise user_network.UserModelError(f"{ref.target}: {out.status}: {out.message}")
    return out.payload
