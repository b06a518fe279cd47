"""Does the machine-state probe move with the machine's speed regimes? (a script, not a test)

For N rounds: a probe process, one MXNet scoring worker (ResNet-50 v2, batch 8, by default)
with the load of other processes measured around it, a probe process. Prints per round the
GEMM and memory probes before / after, the worker's img/s, the other processes' CPUs and
the label against ``reference_from`` all the probes of the run; then the Spearman rank
correlation between the probe's GEMM figure (mean of before and after) and img/s.

The probe only labels the machine's state; nothing here divides a throughput by it.

    python benchmarks/probe_vs_regimes.py --rounds 8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_mxperf.judge import machine_states as L  # noqa: E402
from pytest_mxperf.machine import state as M  # noqa: E402
from pytest_mxperf.measure import runner  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402


def ranks(xs):
    """Ranks 1..n, ties sharing their average rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs, ys):
    """Spearman's rho (Pearson correlation of the ranks); nan with fewer than 3 pairs."""
    if len(xs) < 3:
        return float("nan")
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return sxy / (sxx * syy) ** 0.5 if sxx and syy else float("nan")


def fmt(v, spec=".0f"):
    return "-" if v is None else format(v, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--model", default="resnet50_v2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--time-budget", type=float, default=1.5)
    args = ap.parse_args(argv)

    w = Workload(model=args.model, batch_size=args.batch)
    print(f"cell {w.key()}, {args.rounds} rounds of: probe, worker (time budget {args.time_budget:g} s), probe")
    print(f"probe spec {M.PROBE_SPEC}, environment threads {M.probe_env({})['OMP_NUM_THREADS']}")
    rows = []
    t_start = time.monotonic()
    for i in range(args.rounds):
        before = M.run_probe()
        meter = M.LoadMeter()
        meter.start()
        r = runner.run_workload(w, time_budget=args.time_budget, seed=i)
        load = meter.stop()
        after = M.run_probe()
        rows.append((before, after, load, r))
        print(f"  round {i + 1}: done at {time.monotonic() - t_start:.0f} s, worker {r.status} "
              f"{fmt(r.median, '.1f')} img/s", flush=True)

    probes = [p for b, a, _, _ in rows for p in (b, a) if p]
    ref = L.reference_from(probes)
    ref_gemm, ref_stream = (ref or {}).get("gemm_gflops"), (ref or {}).get("stream_gbps")
    print(f"\nquiet reference (75th percentile of {len(probes)} probes): "
          f"GEMM {fmt(ref_gemm)} GFLOP/s, stream {fmt(ref_stream, '.1f')} GB/s")
    print(f"{'round':>5} {'GEMM before':>11} {'after':>6} {'stream before':>13} {'after':>6} "
          f"{'img/s':>6} {'other CPUs':>10} {'steal':>6}  label")
    gemm_mean, gemm_min, imgs = [], [], []
    for i, (b, a, load, r) in enumerate(rows):
        st = L.label(b, a, load, ref)
        load = load or {}
        print(f"{i + 1:>5} {fmt((b or {}).get('gemm_gflops')):>11} {fmt((a or {}).get('gemm_gflops')):>6} "
              f"{fmt((b or {}).get('stream_gbps'), '.1f'):>13} {fmt((a or {}).get('stream_gbps'), '.1f'):>6} "
              f"{fmt(r.median, '.1f'):>6} {fmt(load.get('other_cpus'), '.2f'):>10} "
              f"{fmt(load.get('steal_frac'), '.3f'):>6}  {st.state}{': ' + st.reason if st.reason else ''}")
        if b and a and r.median:
            gemm_mean.append((b["gemm_gflops"] + a["gemm_gflops"]) / 2)
            gemm_min.append(min(b["gemm_gflops"], a["gemm_gflops"]))
            imgs.append(r.median)
    print(f"\nSpearman rho, probe GEMM (mean of before/after) vs img/s: {spearman(gemm_mean, imgs):+.2f} "
          f"(n={len(imgs)})")
    print(f"Spearman rho, probe GEMM (min of before/after)  vs img/s: {spearman(gemm_min, imgs):+.2f}")
    print(f"wall time {time.monotonic() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
