"""A synthetic history of SESSIONS sessions x CELLS cells in an SQLite store (two machines,
three MXNet releases, a step planted in every fifth cell), then the time ``publish`` takes
and the size of the pages it writes.

    python benchmarks/history_synthetic.py [--sessions 1000] [--cells 100] [--out /tmp/hist-pages]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pytest_mxperf.history import pages
from pytest_mxperf.history.store import open_store


def session_doc(i: int, n_cells: int, rng: random.Random, n_sessions: int):
    version = "1.6.0" if i < n_sessions // 5 else "1.8.0.post0" if i < n_sessions // 2 else "1.9.1"
    machine = "epyc-a" if i % 2 else "epyc-b"
    records = []
    for c in range(n_cells):
        level = 100.0 + c
        if c % 5 == 0 and i >= n_sessions * 3 // 4:
            level *= 0.85  # the planted step
        vals = [level * (1 - 0.35 * (rng.random() < 0.1)) * rng.uniform(0.97, 1.0) for _ in range(3)]
        key = f"score/model{c}/b{1 + c % 4}/cpu:0/float32/threads=auto"
        records.append({"key": key, "status": "ok", "metric": "throughput", "unit": "img/s",
                        "median": sorted(vals)[1], "process_medians": vals, "floor": {"documented": 90.0},
                        "runs": [{"status": "ok", "median": v, "figures": {}, "meta": {"mxnet_version": version}}
                                 for v in vals]})
    return {"machine": {"id": machine}, "records": records,
            "session": {"id": f"syn-{i}", "started": 1.7e9 + 3600.0 * i,
                        "software": {"mxnet_version": version, "python": "3.11.7"}, "verdicts": {}}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--cells", type=int, default=100)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mxperf-hist-"))
    out = Path(args.out) if args.out else tmp / "pages"
    rng = random.Random(1)
    t0 = time.perf_counter()
    with open_store(str(tmp / "h.sqlite")) as store:
        for i in range(args.sessions):
            store.append(session_doc(i, args.cells, rng, args.sessions))
        t1 = time.perf_counter()
        files = pages.publish(store, out)
        t2 = time.perf_counter()
    size = sum(f.stat().st_size for f in files)
    cell_pages = [f for f in files if f.parent.name == "cells"]
    print(f"store: {args.sessions} sessions x {args.cells} cells appended in {t1 - t0:.1f} s "
          f"({(tmp / 'h.sqlite').stat().st_size / 2 ** 20:.1f} MiB)")
    print(f"publish: {len(files)} pages in {t2 - t1:.1f} s; total {size / 2 ** 20:.1f} MiB; index "
          f"{files[0].stat().st_size / 1024:.0f} KiB; a cell page {cell_pages[0].stat().st_size / 1024:.0f} KiB "
          f"(largest {max(f.stat().st_size for f in cell_pages) / 1024:.0f} KiB)")
    if not args.out:
        shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
