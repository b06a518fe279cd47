"""Latency in a duet against latency in a process (issue 24): the same batch-1 cell as an A/A
duet pair (this interpreter on both sides, ``duet.run_pair``) and in one process
(``runner.run_workload``), one after the other, ``--repeats`` times; p50 / p99 of each, the
duet's batches a round and rounds, the CPUs used over the timed part, the peak RSS and each's
wall time.

    .venv/bin/python benchmarks/duet_latency.py --models lenet resnet50_v2 --repeats 2

Before the fix a duet's p50 / p99 were of its rounds of k batches (lenet b1: 130 ms against a
process's 0.28 ms); now both are single synchronised batches. The machine's load average is
printed beside each line: on a shared machine a neighbour's load that comes or goes between
the duet and the process moves one of them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from pytest_mxperf.measure import duet, runner
from pytest_mxperf.model.workload import Workload


def _env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MXNET_", "KMP_"))}


def _line(label, r, wall):
    f = r.figures
    rounds = r.round_seconds
    extra = (f" k={r.batches_per_round} rounds={len(rounds)} round median={1000 * statistics.median(rounds):.0f} ms"
             if "duet" in r.meta else f" batches={len(rounds)}")
    return (f"  {label:<15} p50 {f.get('latency_p50_ms', float('nan')):8.3f} ms  p99 {f.get('latency_p99_ms', float('nan')):8.3f} ms"
            f"  cpu {r.meta.get('cpu_utilization') or float('nan'):.2f}  rss {(r.meta.get('peak_rss_bytes') or 0) / 2 ** 20:.0f} MiB"
            f"  wall {wall:5.1f} s{extra}"
            + ("" if r.ok else f"  {r.status}: {r.message}"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["lenet", "resnet50_v2"])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--time-budget", type=float, default=1.5, help="the gate's default: 1.5 s")
    a = ap.parse_args()
    for model in a.models:
        w = Workload(model=model, mode="latency", batch_size=1)
        for i in range(a.repeats):
            print(f"latency {model} b1, repeat {i + 1}, load average {os.getloadavg()[0]:.1f}", flush=True)
            t = time.perf_counter()
            c, r = duet.run_pair(w, candidate=None, reference=None, seed=i, time_budget=a.time_budget, env=_env())
            wall = time.perf_counter() - t
            print(_line("duet candidate", c, wall))
            print(_line("duet reference", r, wall))
            t = time.perf_counter()
            p = runner.run_workload(w, time_budget=a.time_budget, env=_env(), seed=i)
            print(_line("process", p, time.perf_counter() - t), flush=True)


if __name__ == "__main__":
    main()
