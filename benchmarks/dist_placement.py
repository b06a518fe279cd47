"""Where the distributed cell's kv=local figure comes from (#35: its process pairs are the replays'
last misses): launches of the cell's kv=local worker (``python -m pytest_mxperf.measure.cluster``
with the cell's spec: MLP, global batch 256, 200 timed steps, OMP_NUM_THREADS=1), free to run on
the machine's CPUs or pinned to one of them with ``taskset -c N``, the three alternated (rotated
from launch to launch). Prints each launch's samples/s and, per arm, the median with its range.

    .venv/bin/python benchmarks/dist_placement.py --launches 9 --out DIR
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_mxperf.proc import spawn  # noqa: E402

SPEC = {"kvstore": "local", "num_workers": 2, "num_servers": 1, "timeout": 240,
        "worker": {"model": "mlp", "global_batch": 256, "steps": 200, "warmup_steps": 5, "seed": 0,
                   "learning_rate": 0.1, "momentum": 0.9, "report_every": 10}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=9)
    ap.add_argument("--out", required=True, help="a directory for each launch's spec and result")
    args = ap.parse_args(argv)
    env = dict(spawn.with_package_path(os.environ), OMP_NUM_THREADS="1")
    arms = [("free", []), ("cpu0", ["taskset", "-c", "0"]), ("cpu1", ["taskset", "-c", "1"])]
    got = {name: [] for name, _ in arms}
    for i in range(args.launches):
        for name, pre in arms[i % 3:] + arms[:i % 3]:
            d = os.path.join(args.out, f"p{i}-{name}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "spec.json"), "w") as fh:
                json.dump(SPEC, fh)
            subprocess.run(pre + [sys.executable, "-m", "pytest_mxperf.measure.cluster", os.path.join(d, "spec.json"),
                                  os.path.join(d, "result.json")], env=env, capture_output=True, timeout=300)
            with open(os.path.join(d, "result.json")) as fh:
                r = json.load(fh)
            got[name].append(r.get("samples_per_second"))
            print(i, name, r.get("status"), r.get("samples_per_second"), flush=True)
    for name, v in got.items():
        v = [x for x in v if x]
        print(f"{name}: median {statistics.median(v):.0f} samples/s, {min(v):.0f}-{max(v):.0f}; "
              f"launches (k): {[round(x / 1000) for x in v]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
