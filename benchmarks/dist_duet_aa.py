"""A/A duet pairs of the distributed cells: two ps-lite clusters of one interpreter taking turns
at rounds their launchers relay to every worker (``measure/cluster.py``'s ``_Relay``).

Each pair is ``measure.duet.run_pair`` with the cluster launcher as the resident "worker" and the
cell's own spec (``perf_tests/test_distributed.py``: MLP, global batch 256, one server and two
workers), as a session pairs the cell; the line per pair gives its wall time, the round size, the
two sides' samples/s and the pair's estimate (``stats.duet_pair_log_ratio`` of the seconds per
step: what the verdict takes); the last line the spread of the estimates.

    .venv/bin/python benchmarks/dist_duet_aa.py dist_sync 12
    .venv/bin/python benchmarks/dist_duet_aa.py local 12
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "perf_tests"))

import test_distributed as cell  # noqa: E402

from pytest_mxperf.measure import duet  # noqa: E402
from pytest_mxperf.model import stats  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402


def main(kv: str, pairs: int) -> None:
    w = Workload(model=cell.MODEL, mode="dist", batch_size=cell.GLOBAL_BATCH, threads="1", kvstore=kv)
    ratios = []
    for i in range(pairs):
        t0 = time.perf_counter()
        c, r = duet.run_pair(w, candidate=None, reference=None, seed=i, candidate_first=bool(i % 2),
                             module="pytest_mxperf.measure.cluster", spec=cell._spec(kv, False),
                             figures=cell.cluster_figures, memory_limit=None, time_budget=1.5)
        took = time.perf_counter() - t0
        if not (c.ok and r.ok):
            print(i, "failed:", c.message or r.message, flush=True)
            continue
        ratios.append(stats.duet_pair_log_ratio(c.seconds_per_batch, r.seconds_per_batch))
        print(i, c.status, r.status, round(took, 1), "k", c.batches_per_round, "rounds", len(c.round_seconds),
              "sps", c.value("samples_per_s"), r.value("samples_per_s"), "logratio", ratios[-1], flush=True)
    if len(ratios) > 1:
        print(f"{kv}: {len(ratios)} pairs, sd of the log ratios {100 * statistics.stdev(ratios):.2f}%, "
              f"mean {100 * statistics.mean(ratios):+.2f}%")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
