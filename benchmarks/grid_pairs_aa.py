"""Issue 76, part 4: do a cell's duet pair ratios move when its pair of workers measured other
cells first? An A/A (the same interpreter on both sides) of the default selection's scoring grid,
each round i measuring the grid once in ONE duet pair that serves all its cells in turn
(``duet.run_cells_pair``, the cells in ``Scheduler.process_order``) and once in a pair of its own
per cell (``duet.run_pair``), the two alternating round by round, the candidate first in odd
rounds as the scheduler does. Per cell: the pair log ratios (``stats.duet_pair_log_ratio``) of
each way, their median and spread, the shared pairs by the cell's position in its pair, a Welch
test of shared against own, and what each way cost in wall seconds.

usage: .venv/bin/python benchmarks/grid_pairs_aa.py ROUNDS OUT.json
"""

import json
import math
import statistics
import sys
import time

from scipy import stats as sstats

from pytest_mxperf.measure import duet
from pytest_mxperf.measure.scheduler import Scheduler
from pytest_mxperf.model import stats
from pytest_mxperf.model.workload import Workload

GRID = [Workload(model=m, mode="score", batch_size=b) for m in ("alexnet", "inception-bn", "resnet50_v2")
        for b in (1, 8)]


def ratio(c, r):
    return stats.duet_pair_log_ratio(c.round_seconds, r.round_seconds)


def main(rounds, out_path):
    py = sys.executable
    rows = []
    walls = {"shared": [], "own": []}
    for i in range(rounds):
        first = bool(i % 2)
        order = Scheduler.process_order(GRID, i, rounds)
        ways = ("shared", "own") if i % 2 == 0 else ("own", "shared")
        for way in ways:
            t0 = time.perf_counter()
            if way == "shared":
                pairs = duet.run_cells_pair(order, candidate=py, reference=py, seed=i, candidate_first=first)
            else:
                pairs = [duet.run_pair(w, candidate=py, reference=py, seed=i, candidate_first=first) for w in order]
            walls[way].append(time.perf_counter() - t0)
            for pos, (w, p) in enumerate(zip(order, pairs)):
                c, r = p
                ok = c.ok and r.ok
                rows.append({"round": i, "way": way, "cell": w.key(), "position": pos if way == "shared" else None,
                             "log_ratio": ratio(c, r) if ok else None, "status": [c.status, r.status],
                             "message": None if ok else (c.message or r.message)})
            print(f"round {i} {way}: {walls[way][-1]:.1f} s", flush=True)
    summary = []
    for w in GRID:
        k = w.key()
        got = {way: [x["log_ratio"] for x in rows if x["cell"] == k and x["way"] == way and x["log_ratio"] is not None]
               for way in ("own", "shared")}
        first = [x["log_ratio"] for x in rows if x["cell"] == k and x["way"] == "shared" and x["position"] == 0
                 and x["log_ratio"] is not None]
        later = [x["log_ratio"] for x in rows if x["cell"] == k and x["way"] == "shared" and x["position"]
                 and x["log_ratio"] is not None]
        welch = sstats.ttest_ind(got["shared"], got["own"], equal_var=False) if min(map(len, got.values())) >= 2 else None
        summary.append({
            "cell": k,
            **{f"{way}_pairs": len(v) for way, v in got.items()},
            **{f"{way}_median_ratio": math.exp(statistics.median(v)) if v else None for way, v in got.items()},
            **{f"{way}_sd_log": statistics.stdev(v) if len(v) >= 2 else None for way, v in got.items()},
            "shared_first_mean_ratio": math.exp(statistics.mean(first)) if first else None,
            "shared_later_mean_ratio": math.exp(statistics.mean(later)) if later else None,
            "shared_vs_own_mean_ratio": (math.exp(statistics.mean(got["shared"]) - statistics.mean(got["own"]))
                                         if got["own"] and got["shared"] else None),
            "welch_p": None if welch is None else float(welch.pvalue)})
    doc = {"rounds": rounds, "walls": walls, "rows": rows, "summary": summary}
    with open(out_path, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"{'cell':45s} {'own n':>5s} {'own x':>6s} {'own sd':>6s} {'sh n':>4s} {'sh x':>6s} {'sh sd':>6s} "
          f"{'first':>6s} {'later':>6s} {'sh/own':>6s} {'p':>6s}")
    for s in summary:
        def f(v, fmt="{:.3f}"):
            return fmt.format(v) if v is not None else "-"
        print(f"{s['cell']:45s} {s['own_pairs']:5d} {f(s['own_median_ratio']):>6s} {f(s['own_sd_log']):>6s} "
              f"{s['shared_pairs']:4d} {f(s['shared_median_ratio']):>6s} {f(s['shared_sd_log']):>6s} "
              f"{f(s['shared_first_mean_ratio']):>6s} {f(s['shared_later_mean_ratio']):>6s} "
              f"{f(s['shared_vs_own_mean_ratio']):>6s} {f(s['welch_p'], '{:.2f}'):>6s}")
    print(f"wall a round: shared {statistics.median(walls['shared']):.1f} s, own {statistics.median(walls['own']):.1f} s "
          f"(medians over {rounds})")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
