"""Collect per-process medians of unchanged cells, for the verdict's replay test.

Runs N fresh worker processes (``runner.run_workload``) per cell, interleaving the cells
(round r measures every cell once before round r+1 starts, in a rotated order) so that
drift from neighbours on a shared machine hits all cells alike. Writes
``benchmarks/data/replay-<machine id>.json`` after every round, so an interrupted run keeps
what it measured.

    python benchmarks/collect_replay_data.py --processes 14 --time-budget 2

The pytest process never runs this: it is a script that measures (minutes).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from pytest_mxperf.measure import runner  # noqa: E402
from pytest_mxperf.machine.fingerprint import machine_fingerprint  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402

DEFAULT_CELLS = [
    Workload("resnet50_v2", mode="score", batch_size=8),
    Workload("inception-bn", mode="score", batch_size=4),
    Workload("alexnet", mode="score", batch_size=8),
    Workload("lenet", mode="train", batch_size=64),
]


def _atomic_write(path: Path, data) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=12, help="fresh worker processes per cell")
    ap.add_argument("--time-budget", type=float, default=2.0)
    ap.add_argument("--out-dir", type=Path, default=HERE / "data")
    ap.add_argument("--machine", default=None, help="override the machine id")
    ap.add_argument("--append", action="store_true", help="add processes to an existing data file")
    args = ap.parse_args(argv)

    fp = machine_fingerprint(args.machine)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / f"replay-{fp['id']}.json"
    data = {
        "schema": 1,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": fp,
        "time_budget": args.time_budget,
        "note": "per-process medians (images/s) of unchanged cells, interleaved; each process is a fresh worker",
        "cells": {w.key(): {"workload": w.to_dict(), "process_medians": [], "processes": []}
                  for w in DEFAULT_CELLS},
    }
    start = 0
    if args.append and out.exists():
        old = json.loads(out.read_text())
        data["cells"].update(old["cells"])
        data["date"] = old["date"]
        data["appended"] = old.get("appended", []) + [_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")]
        start = old.get("finished_rounds", 0)
    cells = list(DEFAULT_CELLS)
    for r in range(start, start + args.processes):
        order = cells[r % len(cells):] + cells[:r % len(cells)]
        for w in order:
            res = runner.run_workload(w, time_budget=args.time_budget, seed=r)
            entry = data["cells"][w.key()]
            meta = res.meta or {}
            data.setdefault("mxnet_version", meta.get("mxnet_version"))
            data.setdefault("env", meta.get("env"))
            proc = {
                "round": r, "status": res.status, "message": res.message, "median": res.median,
                "n_rounds": len(res.round_seconds), "wall_seconds": round(res.wall_seconds, 2),
                "cpu_utilization": meta.get("cpu_utilization"),
                "openmp_threads": (meta.get("threads") or {}).get("openmp"),
                "loadavg": list(os.getloadavg()),
                "env_defaults_applied": meta.get("env_defaults_applied"),
            }
            entry["processes"].append(proc)
            if res.ok:
                entry["process_medians"].append(res.median)
            print(f"[{r + 1}/{start + args.processes}] {w.key()}: {res.status} "
                  f"{res.median if res.median is None else round(res.median, 2)} img/s", flush=True)
        data["finished_rounds"] = r + 1
        _atomic_write(out, data)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
