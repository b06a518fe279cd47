"""Issue 78: a candidate whose requests are slow only after the server has been idle, against
the stock install, served by the suite's own serving worker (``python -m
pytest_mxperf.workers.serving SPEC RESULT``, as the gate runs it), process by process,
alternating A, B, B, A, A, B: LeNet b4 (batching up to 4, 2 ms timeout) at a low target rate,
and its peak rate within p99 20 ms.

The candidate is its own interpreter: a wrapper script that runs this venv's python with a
``sitecustomize`` on its path, which makes every ``Module.forward`` that follows more than
``IDLE_S`` without one sleep ``WAKE_S`` first (a server that parks its threads and wakes them
slowly); the parent sees no setting change. At a low rate the server idles between queries
and the tail pays the wake; at the peak it never idles.

    python benchmarks/serving_idle_slow.py --rate 113.1 > serving-idle-slow.txt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SITECUSTOMIZE = '''
import importlib.abc
import importlib.machinery
import sys
import time

IDLE_S, WAKE_S = {idle}, {wake}


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "mxnet.module.module":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            forward, last = module.Module.forward, [0.0]

            def slow_after_idle(self, *a, **k):
                if time.perf_counter() - last[0] > IDLE_S:
                    time.sleep(WAKE_S)
                try:
                    return forward(self, *a, **k)
                finally:
                    last[0] = time.perf_counter()
            module.Module.forward = slow_after_idle
        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _Hook())
'''

ORDER = ("stock", "idle-slow", "idle-slow", "stock", "stock", "idle-slow")


def candidate(where: Path, idle: float, wake: float) -> str:
    site = where / "site"
    site.mkdir(parents=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE.format(idle=idle, wake=wake))
    wrapper = where / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={site}${{PYTHONPATH:+:$PYTHONPATH}} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def serve(python: str, serving: dict, where: Path, tag: str) -> dict:
    spec = {"workload": {"model": "lenet", "mode": "serving", "batch_size": 4, "contexts": ["cpu:0"]},
            "serving": dict({"percentile": 0.99, "latency_bound_ms": 20.0, "max_batch": 4, "batch_timeout_ms": 2.0},
                            **serving), "log_dir": str(where / "logs" / tag)}
    (where / "spec.json").write_text(json.dumps(spec))
    subprocess.run([python, "-m", "pytest_mxperf.workers.serving", str(where / "spec.json"), str(where / "r.json")],
                   cwd=where, capture_output=True, timeout=900, check=False)
    return json.loads((where / "r.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, required=True, help="the low target rate (queries/s)")
    ap.add_argument("--idle", type=float, default=0.020, help="idle seconds after which a forward wakes slowly")
    ap.add_argument("--wake", type=float, default=0.006, help="the wake's seconds")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        sides = {"stock": sys.executable, "idle-slow": candidate(where, a.idle, a.wake)}
        target = {s: [] for s in sides}
        peak = {s: [] for s in sides}
        for i, side in enumerate(ORDER):
            r = serve(sides[side], {"target_qps": a.rate}, where, f"t{i}")
            if r["status"] != "ok":
                raise SystemExit(f"{side}: {r['status']}: {r.get('message')}")
            target[side].append((r["serving_p50_ms"], r["serving_p90_ms"], r["serving_p99_ms"]))
        for i, side in enumerate(ORDER):
            r = serve(sides[side], {"peak": True, "peak_start": 400.0, "peak_step": 0.015}, where, f"p{i}")
            if r["status"] != "ok":
                raise SystemExit(f"{side}: {r['status']}: {r.get('message')}")
            peak[side].append(r["peak_qps"])
    print(f"# idle {a.idle} s, wake {a.wake} s; order {', '.join(ORDER)}; python {sys.version.split()[0]}")
    print(f"## LeNet b4 at {a.rate:g} queries/s (each process one LoadGen run, early stopping met)")
    print("| side | p50 ms | p90 ms | p99 ms (each process) | p99 median |")
    print("|---|---|---|---|---|")
    for side, rows in target.items():
        print(f"| {side} | {' '.join(f'{r[0]:.2f}' for r in rows)} | {' '.join(f'{r[1]:.2f}' for r in rows)} | "
              f"{' '.join(f'{r[2]:.2f}' for r in rows)} | {statistics.median(r[2] for r in rows):.2f} |")
    s99, c99 = (statistics.median(r[2] for r in target[k]) for k in ("stock", "idle-slow"))
    print(f"# p99 idle-slow / stock: x{c99 / s99:.3f}; ranges {'overlap' if min(r[2] for r in target['idle-slow']) <= max(r[2] for r in target['stock']) else 'apart'}")
    print("## the peak rate within p99 20 ms (a bisection of whole runs from 400 queries/s, step 1.5%)")
    print("| side | peak queries/s (each process) | median |")
    print("|---|---|---|")
    for side, rows in peak.items():
        print(f"| {side} | {' '.join(f'{x:.0f}' for x in rows)} | {statistics.median(rows):.0f} |")
    sp, cp = (statistics.median(peak[k]) for k in ("stock", "idle-slow"))
    print(f"# peak idle-slow / stock: x{cp / sp:.3f}; ranges "
          f"{'overlap' if min(peak['idle-slow']) <= max(peak['stock']) and min(peak['stock']) <= max(peak['idle-slow']) else 'apart'}")


if __name__ == "__main__":
    main()
