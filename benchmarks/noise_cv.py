"""How stable is the figure a session reports? (a script, not a test: it measures for minutes)

Runs K unchanged repeats of one cell; each repeat is P fresh worker processes, as a session
would measure it. Prints, per repeat, the reported median (median of per-process medians)
and the same after the verdict's CPU-starvation screen, then the coefficient of variation
(CV) of those reported medians across repeats, against the raw spread of the per-round
samples (CV of all rounds pooled, and the median within-process CV).

    python benchmarks/noise_cv.py --model alexnet --batch 8 --repeats 4 --processes 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_mxperf.measure import runner  # noqa: E402
from pytest_mxperf.model.measurement import CellMeasurement  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402


def cv(values):
    values = [v for v in values if v is not None]
    if len(values) < 2:
        return float("nan")
    return statistics.stdev(values) / statistics.mean(values)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="alexnet")
    ap.add_argument("--mode", default="score")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=4, help="K unchanged repeats")
    ap.add_argument("--processes", type=int, default=3, help="P processes per repeat")
    ap.add_argument("--time-budget", type=float, default=2.0)
    args = ap.parse_args(argv)

    w = Workload(args.model, mode=args.mode, batch_size=args.batch)
    print(f"cell {w.key()}: {args.repeats} repeats x {args.processes} processes, time budget {args.time_budget:g} s")
    reported, all_rounds, within = [], [], []
    for k in range(args.repeats):
        runs = [runner.run_workload(w, time_budget=args.time_budget, seed=k * 100 + p) for p in range(args.processes)]
        cell = CellMeasurement(w, runs)
        meds = cell.process_medians
        reported.append(cell.median_or_none)
        for r in cell.ok_runs:
            all_rounds.extend(r.samples)
            within.append(cv(r.samples))
        print(f"  repeat {k + 1}: per-process medians {[round(m, 2) for m in meds]}, "
              f"reported {cell.median_or_none and round(cell.median_or_none, 2)}")
    print(f"CV of the reported median across {args.repeats} repeats: {100 * cv(reported):.1f}%")
    print(f"CV of all per-round samples pooled ({len(all_rounds)} rounds): {100 * cv(all_rounds):.1f}%")
    print(f"median within-process CV of rounds:                  {100 * statistics.median(within):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
