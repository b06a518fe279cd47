"""Is the advisor's advice faster on this machine? Paired A/B processes.

A = the setting the advisor flags (default ``OMP_NUM_THREADS=4``: oversubscription on a
2-core machine), B = the advised one (default: the variable unset, so the suite fills in
its own value, OpenMP threads = physical cores). Each pair is two fresh worker processes
of the suite (``runner.run_workload``, ResNet-50 v2 batch 8 scoring, the suite's
estimator: batch / median time per batch), back to back, in alternating order (A B, B A,
A B, ...) so that the machine's drift and any order effect cancel. Per pair: the ratio
B / A (above 1: the advice is faster). Summary: the median paired ratio, its 95% bootstrap
interval (10000 resamples of the pairs), an exact two-sided sign test (how many pairs
favour B), and the suite's own A/B verdict on the pairs (``ab_pairs.judge_ab``: the fast
ends, B as the candidate). Around every process the load of other processes is read from /proc/stat
(``other_cpus``, average CPUs busy with work that was not ours); the summary is repeated
for the pairs where neither process had a neighbour (other_cpus below --quiet-below).
``--wait-quiet S`` waits up to S seconds before each pair for such a quiet spell (the pair
runs anyway when none comes).

The advisor's findings for A and B are printed first (advisor.advise on the user's
variables, with the OpenMP runtime the worker reported).

Usage: python benchmarks/advisor_ab.py [--pairs 10] [--bad "OMP_NUM_THREADS=4"] [--good ""]
       [--model resnet50_v2] [--batch 8] [--time-budget 1.5] [--quiet-below 0.3] [--wait-quiet 0]
"""
import argparse
import math
import os
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mxperf.machine import advisor, state as machine_state, topology
from pytest_mxperf.measure import runner
from pytest_mxperf.judge import ab_pairs  # noqa: E402
from pytest_mxperf.model.measurement import METRICS  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402


def parse_setting(text):
    out = {}
    for item in (text or "").split():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"bad setting {item!r} (expected KEY=VALUE)")
        out[key] = value
    return out


def describe(setting):
    return " ".join(f"{k}={v}" for k, v in setting.items()) or "unset (suite default)"


def sign_test_p(wins, n):
    """Exact two-sided sign test: P(|X - n/2| >= |wins - n/2|), X ~ Binomial(n, 1/2)."""
    if n == 0:
        return 1.0
    k = min(wins, n - wins)
    tail = sum(math.comb(n, i) for i in range(0, k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def summarize(label, ratios):
    r = np.array(ratios, dtype=float)
    if len(r) == 0:
        print(f"{label}: no pairs")
        return
    rng = np.random.default_rng(0)
    boot = np.median(rng.choice(r, size=(10000, len(r)), replace=True), axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    wins = int((r > 1).sum())
    print(f"{label}: median paired ratio B/A {np.median(r):.3f}, 95% bootstrap interval [{lo:.3f}, {hi:.3f}], "
          f"B faster in {wins}/{len(r)} pairs (sign test, two-sided p = {sign_test_p(wins, len(r)):.4f})")


def run(w, base_env, setting, time_budget):
    meter = machine_state.LoadMeter()
    meter.start()
    res = runner.run_workload(w, time_budget=time_budget, env=base_env, extra_env=setting)
    load = meter.stop() or {}
    if not res.ok:
        raise SystemExit(f"worker failed ({describe(setting)}): {res.status}: {res.message}")
    threads = (res.meta.get("threads") or {})
    return res.median, load.get("other_cpus"), threads, res.meta.get("env_defaults_applied") or {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--bad", default="OMP_NUM_THREADS=4", help="A: the flagged setting, KEY=VALUE ...")
    ap.add_argument("--good", default="", help="B: the advised setting ('' = unset: the suite's default)")
    ap.add_argument("--model", default="resnet50_v2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--time-budget", type=float, default=1.5)
    ap.add_argument("--quiet-below", type=float, default=0.3)
    ap.add_argument("--wait-quiet", type=float, default=0.0,
                    help="before each pair, wait up to this many seconds for other_cpus < --quiet-below")
    args = ap.parse_args()

    bad, good = parse_setting(args.bad), parse_setting(args.good)
    base = {k: v for k, v in os.environ.items() if k not in bad and k not in good}
    w = Workload(args.model, batch_size=args.batch)
    topo = topology.describe()
    print(f"machine: {topo['physical_cores']} physical cores in the affinity mask, suite default threads "
          f"{topo['default_threads']}, sockets {advisor.socket_count()}")
    print(f"A (flagged): {describe(bad)}    B (advised): {describe(good)}")
    print(f"workload: {w.key()}, time budget {args.time_budget} s per process, {args.pairs} pairs, "
          f"alternating order")

    ratios, quiet, a_vals, b_vals = [], [], [], []
    shown = False
    for i in range(args.pairs):
        order = ("A", "B") if i % 2 == 0 else ("B", "A")
        if args.wait_quiet > 0:
            waited, other = machine_state.wait_for_quiet(args.quiet_below, args.wait_quiet)
            if waited > 2.5:
                print(f"  (waited {waited:.0f} s for a quiet machine; other_cpus now "
                      f"{'n/a' if other is None else f'{other:.2f}'})", flush=True)
        got = {}
        for side in order:
            got[side] = run(w, base, bad if side == "A" else good, args.time_budget)
        if not shown:
            runtime = advisor.openmp_runtime(got["A"][2])
            for side, setting in (("A", bad), ("B", good)):
                defaults = got[side][3]
                found = advisor.advise(dict(setting), defaults, None, topo, list(w.contexts), 0,
                                       openmp_runtime=runtime)
                lines = advisor.format_advice(found) or ["(no advice)"]
                print(f"advisor on {side} (runtime {runtime}, suite filled {defaults or 'nothing'}): "
                      + " | ".join(lines))
            print(f"threads used (threadpoolctl openmp): A {got['A'][2].get('openmp')}, B {got['B'][2].get('openmp')}")
            shown = True
        (a, a_load, _, _), (b, b_load, _, _) = got["A"], got["B"]
        ratio = b / a
        ratios.append(ratio)
        a_vals.append(a)
        b_vals.append(b)
        loads = [x for x in (a_load, b_load) if x is not None]
        is_quiet = bool(loads) and max(loads) < args.quiet_below
        if is_quiet:
            quiet.append(ratio)
        fl = lambda x: "n/a" if x is None else f"{x:.2f}"  # noqa: E731
        print(f"pair {i + 1:2d} ({order[0]}{order[1]}): A {a:7.3f} img/s (other_cpus {fl(a_load)})  "
              f"B {b:7.3f} img/s (other_cpus {fl(b_load)})  B/A {ratio:.3f}{'' if is_quiet else '  [neighbour load]'}",
              flush=True)
    print(f"A median {statistics.median(a_vals):.3f} img/s, B median {statistics.median(b_vals):.3f} img/s")
    summarize(f"all {len(ratios)} pairs", ratios)
    summarize(f"{len(quiet)} pairs without neighbour load (other_cpus < {args.quiet_below} around both)", quiet)
    # the suite's own A/B verdict (fast end, sign-flip test), B as the candidate, A as the reference
    v = ab_pairs.judge_ab({"advice": ab_pairs.Pairing(METRICS["throughput"], b_vals, a_vals, final=True)})["advice"]
    print(f"suite A/B verdict, advised (B) against flagged (A): {v.kind.upper()}: {v.reason}")


if __name__ == "__main__":
    main()
