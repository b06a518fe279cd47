"""A cell's memory figure first and last in a worker process that measures several cells.

Two cells, in one worker process each way round (``runner.run_cells``, the suite's own path):
prints each cell's memory figure (``RunResult.value("peak_rss_mib")``) and what the cell
before it left resident (``carried_rss_bytes``). A figure that does not depend on its cell's
place in the process reads about the same both ways.

    python benchmarks/shared_memory_order.py alexnet score 1 resnet50_v2 score 1
    python benchmarks/shared_memory_order.py lenet latency 1 resnet50_v2 latency 1
"""

import argparse

from pytest_mxperf.measure import runner
from pytest_mxperf.model.workload import Workload


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cells", nargs=6, metavar="MODEL MODE BATCH", help="two cells: model mode batch, twice")
    ap.add_argument("--time-budget", type=float, default=1.0)
    a = ap.parse_args(argv)
    c = a.cells
    one = Workload(model=c[0], mode=c[1], batch_size=int(c[2]))
    two = Workload(model=c[3], mode=c[4], batch_size=int(c[5]))
    for order in ([one, two], [two, one]):
        runs = runner.run_cells(order, time_budget=a.time_budget)
        print(" then ".join(
            f"{w.key().split('/threads')[0]} {r.value('peak_rss_mib') or float('nan'):.1f} MiB "
            f"(carried {(r.meta.carried_rss_bytes or 0) / 2 ** 20:.1f}; {r.status})"
            for w, r in zip(order, runs)), flush=True)


if __name__ == "__main__":
    main()
