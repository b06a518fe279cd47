"""Same figures with a shorter warm-up (#37 part 2): does the throughput worker's untimed
warm-up need its full second?

The worker (``workers/throughput.measure_cell``) runs the first batch, then untimed warm-up
batches: at least ``WARMUP_BATCHES``, until ``WARMUP_SECONDS`` have passed or
``WARMUP_MAX_BATCHES`` have run. Only cells whose twenty batches take longer than the shorter
warm-up are touched by a change of it (a LeNet b32 or MLP cell reaches twenty batches first).

Two ways, both through the worker's own cell (``throughput._Cell``), warm-up
(``protocol.warm_up``) and round sizing (``throughput.timed_rounds``):

* ``--within`` (the default; the evidence): in each fresh process of the worker's
  environment (``runner.build_env``), the first batch, the shorter warm-up, then timed rounds
  without a break, as many as the longer warm-up's extra time plus the time budget hold. The
  shorter warm-up's figure is the first ``n`` rounds' (``n`` the rounds of the time budget),
  the longer's the last ``n`` (after the extra warm-up, as it ran). Both share the process,
  so the machine's speed between processes (17-35% on this VM today) is not in their ratio.
* ``--pairs`` only: pairs of fresh worker processes (``runner.run_workload``, the
  ``warmup_seconds`` of the spec), one each way, which first alternating.

Per cell: the ratio short/long of the judged figure (img/s from the median round; the p99
latency of a latency cell, and its p50), the median over processes with its range.

    .venv/bin/python benchmarks/warmup_same_figures.py --processes 8 --short 0.5 --long 1.0 \\
        --out benchmarks/results/warmup-same-figures-2026-11-29.txt
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_mxperf.measure import runner  # noqa: E402
from pytest_mxperf.model.options import TIME_BUDGET_S  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402
from worker_start import cpu_model, report  # noqa: E402  (this directory: the script's own)

#: the default selection's throughput cells whose twenty warm-up batches take more than half a
#: second on the 2-vCPU VMs (the others stop at twenty batches, whatever the seconds)
CELLS = (
    Workload(model="resnet50_v2", mode="score", batch_size=8),
    Workload(model="resnet50_v2", mode="score", batch_size=8, dtype="int8"),
    Workload(model="resnet50_v2", mode="score", batch_size=1),
    Workload(model="alexnet", mode="score", batch_size=8),
    Workload(model="inception-bn", mode="score", batch_size=8),
    Workload(model="resnet50_v2", mode="latency", batch_size=1),
    Workload(model="lenet", mode="train", batch_size=256),
    Workload(model="lenet", mode="train", batch_size=256, contexts=("cpu:0", "cpu:1"), threads="per-context",
             kvstore="device"),
)

# One process: the worker's cell, its first batch and warm-up (``protocol.warm_up`` with the
# worker's bounds, the shorter seconds), its round sizing (``throughput.timed_rounds``); then the
# rounds of the longer warm-up's extra time and of the time budget, back to back. Prints one
# JSON line.
_CHILD = r"""
import json, sys
from pytest_mxperf.workers import throughput
from pytest_mxperf.workers.op_cache import import_mxnet
from pytest_mxperf.workers.protocol import warm_up
w, short, long_, budget = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
mx = import_mxnet()[0]
cell = throughput._Cell(mx, w, 0)
cell.timed(1)
warm = warm_up(cell, throughput.WARMUP_BATCHES, short, throughput.WARMUP_MAX_BATCHES)
per_batch = min(warm[-2:])
latency = w["mode"] == "latency"
k, n = throughput.timed_rounds({"time_budget": budget}, per_batch, latency)
# the batches the longer warm-up would still have run untimed (to its seconds, or to its cap),
# in rounds of this cell's k
extra_batches = max(0, min(throughput.WARMUP_MAX_BATCHES - len(warm), int((long_ - short) // max(per_batch, 1e-6))))
extra = -(-extra_batches // k)
rounds = [cell.timed(k) for _ in range(extra + n)]
print(json.dumps({"k": k, "n": n, "extra": extra, "warm": len(warm), "rounds": rounds,
                  "total_batch": cell.total_batch}))
"""


def _figures(w: Workload, rounds, k: int, total_batch: int):
    """The judged figure of these rounds (and a latency cell's p50), as the worker reads them."""
    from pytest_mxperf.workers.throughput import latency_figures
    if w.mode == "latency":
        f = latency_figures(rounds)
        return f["latency_p99_ms"], f["latency_p50_ms"]
    return total_batch * k / statistics.median(rounds), None


def within(w: Workload, short: float, long_: float, budget: float):
    env, _ = runner.build_env(w)
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(w.to_dict()), str(short), str(long_), str(budget)],
                         env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{w.key()}: exit {out.returncode}: {out.stderr.strip().splitlines()[-1:]}")
    d = json.loads(out.stdout.strip().splitlines()[-1])
    r, n, extra = d["rounds"], d["n"], d["extra"]
    s_fig, s_p50 = _figures(w, r[:n], d["k"], d["total_batch"])
    l_fig, l_p50 = _figures(w, r[extra:], d["k"], d["total_batch"])
    return {"short": s_fig, "long": l_fig, "short_p50": s_p50, "long_p50": l_p50, "extra": extra, "n": n,
            "k": d["k"], "warm": d["warm"]}


def pair(w: Workload, short: float, long_: float, seed: int, short_first: bool):
    got = {}
    for warm in ((short, long_) if short_first else (long_, short)):
        r = runner.run_workload(w, seed=seed, warmup_seconds=warm)
        if not r.ok:
            raise SystemExit(f"{w.key()} (warm-up {warm} s): {r.status}: {r.message}")
        got[warm] = r
    return {"short": got[short].median, "long": got[long_].median, "short_p50": None, "long_p50": None,
            "extra": None, "n": None, "k": None, "warm": got[short].meta.warmup_batches}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=8, help="processes (--within) or pairs (--pairs) a cell")
    ap.add_argument("--pairs", action="store_true", help="pairs of fresh worker processes instead of --within")
    ap.add_argument("--short", type=float, default=0.5)
    ap.add_argument("--long", type=float, default=1.0)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    start = datetime.datetime.now(datetime.timezone.utc)
    how = "pairs of fresh worker processes" if args.pairs else "within one process"
    lines = [f"# the throughput worker's untimed warm-up: {args.long} s against {args.short} s, {how}",
             f"# CPU: {cpu_model()}, {os.cpu_count()} CPUs; python {platform.python_version()}; "
             f"started {start:%Y-%m-%d %H:%M} UTC",
             f"# command: .venv/bin/python benchmarks/warmup_same_figures.py --processes {args.processes} "
             f"--short {args.short} --long {args.long}{' --pairs' if args.pairs else ''}",
             "cell                                          proc  long       short      ratio  "
             "(p50 long / short)   warm batches  extra rounds  rounds x k"]
    per = {w.key(): [] for w in CELLS}
    for i in range(args.processes):
        for w in CELLS:
            g = (pair(w, args.short, args.long, i, i % 2 == 1) if args.pairs
                 else within(w, args.short, args.long, TIME_BUDGET_S))
            per[w.key()].append(g)
            p50 = f"({g['long_p50']:.2f} / {g['short_p50']:.2f})" if g["long_p50"] else ""
            row = (f"{w.key().split('/threads')[0][:44]:<46}{i:>4}  {g['long']:<9.4g}  {g['short']:<9.4g}  "
                   f"{g['short'] / g['long']:.3f}  {p50:<20} {g['warm']!s:>3}           {g['extra']!s:>3}"
                   f"           {g['n']} x {g['k']}")
            lines.append(row)
            print(row, flush=True)
    lines += ["", "cell                                          ratio short/long: median [min, max]   "
              "sd of log ratio   p50 ratio median"]
    for key, rows in per.items():
        ratios = [g["short"] / g["long"] for g in rows]
        logs = [math.log(x) for x in ratios]
        p50s = [g["short_p50"] / g["long_p50"] for g in rows if g["long_p50"]]
        lines.append(f"{key.split('/threads')[0][:44]:<46}{statistics.median(ratios):.3f} "
                     f"[{min(ratios):.3f}, {max(ratios):.3f}]             "
                     f"{statistics.stdev(logs) * 100 if len(logs) > 1 else float('nan'):5.1f}%"
                     f"            {statistics.median(p50s) if p50s else float('nan'):.3f}")
    end = datetime.datetime.now(datetime.timezone.utc)
    lines.append(f"# ended {end:%Y-%m-%d %H:%M} UTC")
    return report(lines, args.out)


if __name__ == "__main__":
    sys.exit(main())
