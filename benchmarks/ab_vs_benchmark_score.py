"""Does the suite's worker measure what benchmark_score.py measures?

Runs the suite's ResNet-50 batch-8 CPU measurement (A) and a bare benchmark_score-style
loop (B) as alternating pairs of fresh processes (A B A B ...), both reduced with the
same estimator (batch / median time per batch), and prints the median paired ratio A/B
with its 95% bootstrap interval. Goal: median in 0.97-1.03, interval inside 0.94-1.06.

Usage: python benchmarks/ab_vs_benchmark_score.py [--pairs 10] [--model resnet50_v2] [--batch 8]
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mxperf.measure import runner
from pytest_mxperf.machine import topology  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402


def run_bare(model, batch, num_batches, env):
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bare_score.py"), model, str(batch),
                          str(num_batches)], env=env, capture_output=True, text=True, timeout=900)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if not line:
        raise SystemExit(f"bare loop failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(line[-1])["median_ips"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--model", default="resnet50_v2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--time-budget", type=float, default=3.0)
    ap.add_argument("--bare-batches", type=int, default=20)
    args = ap.parse_args()
    w = Workload(args.model, batch_size=args.batch)
    env, _ = runner.build_env(w)
    ratios, a_vals, b_vals = [], [], []
    for i in range(args.pairs):
        a = runner.run_workload(w, time_budget=args.time_budget, env=env)
        if not a.ok:
            raise SystemExit(f"suite worker failed: {a.status}: {a.message}")
        b = run_bare(args.model, args.batch, args.bare_batches, env)
        a_vals.append(a.median)
        b_vals.append(b)
        ratios.append(a.median / b)
        print(f"pair {i + 1:2d}: suite {a.median:8.3f} img/s  bare {b:8.3f} img/s  ratio {a.median / b:.3f}",
              flush=True)
    r = np.array(ratios)
    rng = np.random.default_rng(0)
    boot = np.median(rng.choice(r, size=(10000, len(r)), replace=True), axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    print(f"env: OMP_NUM_THREADS={env.get('OMP_NUM_THREADS')} (physical cores {topology.available_physical_cores()})")
    print(f"suite median {np.median(a_vals):.3f} img/s, bare median {np.median(b_vals):.3f} img/s")
    print(f"median paired ratio {np.median(r):.3f}, 95% bootstrap interval [{lo:.3f}, {hi:.3f}] over {len(r)} pairs")
    ok = 0.97 <= np.median(r) <= 1.03 and lo >= 0.94 and hi <= 1.06
    print("goal (median in 0.97-1.03, interval inside 0.94-1.06):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
