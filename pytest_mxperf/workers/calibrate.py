"""The machine-state probe: how fast is this machine right now, independently of MXNet?

Run as ``python -m pytest_mxperf.workers.calibrate SPEC.json RESULT.json`` (numpy only,
never MXNet), with a fixed environment set by the parent (``machine_state.probe_env``).
It measures two figures, each after one untimed warm-up call (page first-touch, BLAS
thread-pool start), as the *median* of short timed repetitions (a lucky repetition does not
hide a slow spell, an unlucky one does not invent it):

* ``gemm_gflops``: float32 ``n x n`` matrix products through numpy's BLAS: compute speed,
  which moves with the speed regimes of a shared VM;
* ``stream_gbps``: a STREAM-style copy of arrays larger than the caches (bytes read +
  written per second): memory bandwidth, which a neighbour can take without taking CPU
  time from us.

It runs on the machine's CPUs, not the session's: before numpy (and its BLAS thread pool)
is loaded it widens its own affinity to the spec's ``cpus`` (the CPUs the cpuset allows,
``topology.machine_cpus``), so a session started under ``taskset`` does not narrow it; the
kernel keeps only the CPUs the cpuset allows, and a refusal leaves the mask as it was. A
cgroup CPU quota cannot be escaped: the parent records it beside the figures
(``machine_state.run_probe``).

Spec: ``{"seconds": 0.4, "gemm_n": 512, "stream_mib": 64, "cpus": [0, 1]}`` (``seconds`` is
the timed budget, split between the two). Result: ``{"status": "ok", "message": "",
"gemm_gflops", "stream_gbps", "seconds", "cpus"}`` (``cpus``: how many CPUs it ran on) plus,
for diagnosis, the best repetitions, their counts and the BLAS threads used.
"""

from __future__ import annotations

import os
import statistics
import time

from pytest_mxperf.workers.protocol import serve

MIN_REPS = 3     # at least this many timed repetitions, even past the budget
MAX_REPS = 200   # and at most this many (a 512 GEMM takes ~1-3 ms here)


def timed_rates(fn, work: float, budget: float):
    """Rates (``work`` / seconds) of repeated ``fn()`` calls for ``budget`` seconds, after one
    untimed warm-up call."""
    fn()
    rates = []
    t_end = time.perf_counter() + budget
    while len(rates) < MIN_REPS or (time.perf_counter() < t_end and len(rates) < MAX_REPS):
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        if dt > 0:
            rates.append(work / dt)
    return rates


def blas_threads():
    """The threads numpy's BLAS will use (threadpoolctl), or None when it cannot tell."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    n = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
    return max(n) if n else None


def widen_affinity(cpus):
    """Run on ``cpus`` whatever affinity this process inherited; returns the CPUs it may run
    on now (None when the platform cannot tell). Must run before numpy is imported: OpenBLAS
    sizes its thread pool by the affinity mask it finds when it loads."""
    if cpus and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, [int(c) for c in cpus])
        except (OSError, ValueError):  # EINVAL: none of them allowed here; keep the inherited mask
            pass
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return None


def run(spec):
    cpus = widen_affinity(spec.get("cpus"))
    import numpy as np

    t_start = time.perf_counter()
    budget = float(spec.get("seconds", 0.4))
    n = int(spec.get("gemm_n", 512))
    rng = np.random.RandomState(0)
    a = rng.rand(n, n).astype(np.float32)
    b = rng.rand(n, n).astype(np.float32)
    c = np.empty((n, n), dtype=np.float32)
    gemm = timed_rates(lambda: np.matmul(a, b, out=c), 2.0 * n ** 3 / 1e9, budget / 2)

    words = int(spec.get("stream_mib", 64)) * 2 ** 20 // 4
    src = np.ones(words, dtype=np.float32)
    dst = np.empty_like(src)
    stream = timed_rates(lambda: np.copyto(dst, src), 2.0 * src.nbytes / 1e9, budget / 2)  # read + write
    return {"status": "ok", "message": "",
            "gemm_gflops": statistics.median(gemm), "stream_gbps": statistics.median(stream),
            "seconds": time.perf_counter() - t_start,
            "gemm_gflops_best": max(gemm), "stream_gbps_best": max(stream),
            "gemm_reps": len(gemm), "stream_reps": len(stream), "gemm_n": n, "blas_threads": blas_threads(),
            "cpus": len(cpus) if cpus else None}


def main(argv=None) -> int:
    return serve(run, argv, "pytest_mxperf.workers.calibrate")


if __name__ == "__main__":
    main()
