"""The machine-state probe's timed budget (#37 part 2): what a shorter probe reads.

The probe (``machine/state.run_probe``: ``workers/calibrate.py`` in a process of its own) runs
around every worker process, about 36 times in the default session, each ``PROBE_SPEC
["seconds"]`` of timing plus its start. Probe processes with the budget as it is and a
shorter one alternate, back to back on a quiet machine (which first alternating). Per budget:
the GEMM and memory figures (median, and the spread between consecutive probes of that budget:
the sd of the log ratio of each probe to the one before it), the process's wall; and the
median ratio of each shorter probe to the mean of its two longer neighbours (the same machine
state): a shorter probe that read systematically lower or higher would be filed against the
probes a baseline recorded with the longer one.

    .venv/bin/python benchmarks/probe_budget.py --pairs 40 --short 0.2 --long 0.4 \\
        --out benchmarks/results/probe-budget-2026-11-29.txt
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_mxperf.machine import state as machine_state  # noqa: E402
from worker_start import cpu_model, report  # noqa: E402  (this directory: the script's own)


def probe(seconds: float):
    spec = machine_state.PROBE_SPEC
    machine_state.PROBE_SPEC = dict(spec, seconds=seconds)
    try:
        p = machine_state.run_probe()
    finally:
        machine_state.PROBE_SPEC = spec
    if p is None:
        raise SystemExit(f"the probe ({seconds} s) failed")
    return p


def _sd_steps(xs):
    steps = [math.log(b / a) for a, b in zip(xs, xs[1:])]
    return statistics.stdev(steps) / math.sqrt(2) * 100 if len(steps) > 1 else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--short", type=float, default=0.2)
    ap.add_argument("--long", type=float, default=0.4)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    start = datetime.datetime.now(datetime.timezone.utc)
    seq = []  # (budget, probe) in the order they ran
    for i in range(args.pairs):
        for s in ((args.short, args.long) if i % 2 else (args.long, args.short)):
            seq.append((s, probe(s)))
    lines = [f"# the machine-state probe: {args.long} s of timing (as it is) against {args.short} s, "
             f"{args.pairs} pairs of probe processes back to back, which first alternating",
             f"# CPU: {cpu_model()}, {os.cpu_count()} CPUs; python {platform.python_version()}; "
             f"{start:%Y-%m-%d %H:%M} - {datetime.datetime.now(datetime.timezone.utc):%H:%M} UTC",
             f"# command: .venv/bin/python benchmarks/probe_budget.py --pairs {args.pairs} --short {args.short} "
             f"--long {args.long}",
             "",
             "budget  probes  GEMM GFLOP/s median [min, max]  probe-to-probe sd  memory GB/s median [min, max]"
             "  probe-to-probe sd  process wall s (median)"]
    for s in (args.long, args.short):
        ps = [p for b, p in seq if b == s]
        g = [p["gemm_gflops"] for p in ps]
        m = [p["stream_gbps"] for p in ps]
        lines.append(f"{s:<6}  {len(ps):>6}  {statistics.median(g):7.1f} [{min(g):.1f}, {max(g):.1f}]"
                     f"          {_sd_steps(g):5.1f}%          {statistics.median(m):6.2f} [{min(m):.2f}, {max(m):.2f}]"
                     f"         {_sd_steps(m):5.1f}%           {statistics.median(p['process_seconds'] for p in ps):.3f}")
    for fig, name in (("gemm_gflops", "GEMM"), ("stream_gbps", "memory")):
        ratios = []
        for j, (b, p) in enumerate(seq):
            if b != args.short or j == 0 or j == len(seq) - 1:
                continue
            around = [q[fig] for c, q in (seq[j - 1], seq[j + 1]) if c == args.long]
            if around:
                ratios.append(p[fig] / statistics.mean(around))
        lines.append(f"{name}: each shorter probe against its longer neighbours: median {statistics.median(ratios):.3f} "
                     f"[{min(ratios):.3f}, {max(ratios):.3f}] over {len(ratios)}")
    lines += ["", "every probe, in order: budget gemm stream wall"]
    lines += [f"{b:<4} {p['gemm_gflops']:7.1f} {p['stream_gbps']:6.2f} {p['process_seconds']:.3f}" for b, p in seq]
    return report(lines, args.out)


if __name__ == "__main__":
    sys.exit(main())
