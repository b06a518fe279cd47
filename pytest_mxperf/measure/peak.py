"""The machine's peak GFLOP/s that a cell's operations per second are set against: a large
FullyConnected and a 3x3 Convolution through MXNet, best round (oneDNN on CPU, cuBLAS /
cuDNN on a GPU), measured once per session in its own worker process (workers/peak.py)."""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Sequence

from pytest_mxperf.measure import runner
from pytest_mxperf.measure.scheduler import Scheduler
from pytest_mxperf.model.measurement import FLOP_MODES, RunResult
from pytest_mxperf.model.workload import Workload

#: the kernels whose best round is the machine's peak (oneDNN's on CPU, cuDNN / cuBLAS on a
#: GPU; workers/peak.py also has ``dot``, OpenBLAS's path, which is never the peak)
PEAK_KERNELS = ("fc", "conv")


PEAK_MODULE = "pytest_mxperf.workers.peak"


def peak_target(w: Workload):
    """(context, dtype) of the peak a cell is set against, or (None, why not): float32 CPU
    cells against the CPU's float32 peak; GPU cells against their first GPU's peak in the
    cell's dtype (float16: the tensor cores'); int8 / bfloat16 have no measured peak."""
    if w.device == "gpu":
        if w.dtype not in ("float32", "float16"):
            return None, f"no {w.dtype} peak is measured on GPUs"
        return w.contexts[0], w.dtype
    if w.dtype != "float32":
        return None, f"{w.dtype} operations per second, shown alone: the measured peak is float32's"
    return "cpu:0", "float32"


def machine_peak(scheduler: Scheduler, context: str = "cpu:0", dtype: str = "float32") -> Dict[str, Any]:
    """The peak GFLOP/s of ``context`` in ``dtype`` (a large FullyConnected and a 3x3
    Convolution through MXNet, best round: oneDNN on CPU, cuBLAS / cuDNN on a GPU),
    measured once per session in its own worker process, the first time a cell needs it,
    and kept by the session (``Scheduler.peak``).
    ``{"status": "ok", "peak_gflops", "fc_gflops", "conv_gflops", "threads", "kernels"}``,
    or ``{"status": <failure>, "message", "peak_gflops": None}``."""
    return scheduler.peak(f"{context}/{dtype}", lambda: measure_peak(scheduler, context, dtype))


def measure_peak(scheduler: Scheduler, context: str = "cpu:0", dtype: str = "float32") -> Dict[str, Any]:
    o = scheduler.options
    # the cell's environment: the suite's OpenMP threads on CPU, CUDA's device order on GPUs
    w = Workload(model="peak", mode="score", contexts=(context,), dtype=dtype)
    as_cap, rss_cap = runner.memory_caps(w, runner.resolve_memory_limit(o.memory_limit))
    env, _ = runner.build_env(w, dict(scheduler.environ))
    spec: Dict[str, Any] = {"kernels": list(PEAK_KERNELS), "memory_limit": as_cap, "context": context,
                            "dtype": dtype}
    if o.smoke:
        spec.update(rounds=2, round_seconds=0.1)
    else:  # rounds as long as a fifth of the cells' time budget (0.3 s at the default 1.5 s)
        spec.update(rounds=5, round_seconds=min(0.3, max(0.05, float(o.time_budget) / 5.0)))
    out = runner.run_process([o.python or sys.executable, "-m", PEAK_MODULE], spec, timeout=o.timeout, env=env,
                             rss_limit=rss_cap)
    p = out.payload or {}
    if out.status != "ok" or not isinstance(p.get("peak_gflops"), (int, float)):
        return {"status": out.status if out.status != "ok" else "error", "peak_gflops": None,
                "message": out.message or p.get("message") or "the peak worker returned no peak figure"}
    kernels = p.get("kernels") or {}
    return {"status": "ok", "message": "", "peak_gflops": float(p["peak_gflops"]),
            "fc_gflops": p.get("fc_gflops"), "conv_gflops": p.get("conv_gflops"),
            "context": context, "dtype": dtype,
            "threads": ((p.get("meta") or {}).get("threads") or {}).get("openmp"),
            "omp_num_threads": env.get("OMP_NUM_THREADS"),
            "kernels": {k: v.get("what") for k, v in kernels.items()}}


def cell_flops_per_sample(w: Workload, runs: Sequence[RunResult] = ()) -> Optional[float]:
    """FLOPs per sample of a cell (2 x conv+FC MACs forward; training 3 x forward): a zoo
    network's from the zoo, the user's own from the count its worker made of its graph
    (``meta["macs_per_sample"]`` of ``runs``); None for cells without a count (other
    kinds of cell, a graph whose shapes the worker could not infer)."""
    from pytest_mxperf import zoo
    from pytest_mxperf.zoo import flops
    if w.mode not in FLOP_MODES:
        return None
    if w.source:
        macs = next((r.macs_per_sample for r in runs if r.ok and r.macs_per_sample), None)
        return flops.flops_from_macs(macs, w.mode) if macs else None
    if w.model not in zoo.MODELS:
        return None
    return flops.flops_per_sample(w.model, w.mode)


def flop_count(flops: float) -> str:
    """8.178 GFLOP, 124.4 kFLOP: the unit that keeps the figure readable."""
    for scale, unit in ((1e9, "GFLOP"), (1e6, "MFLOP"), (1e3, "kFLOP")):
        if flops >= scale:
            return f"{flops / scale:.4g} {unit}"
    return f"{flops:.0f} FLOP"
