"""Why the input-pipeline ndarray cell's duet pairs spread about 18% (issue 35, part 2): one
process of an A/A pair reads its rounds up to x1.7 faster than the other, the whole run through.

Each run is one fresh process of the cell's worker code (``workers/pipeline``: the loader,
``LoaderEpochs``, its ``timed`` rounds of 2 epochs, as a duet side runs them), counting the
minor page faults of each round (``getrusage``). Runs alternate between glibc as it is and
glibc keeping freed memory in the heap (the worker's ``pipeline.keep_heap``, as the ndarray
loaders' worker calls it first).

    .venv/bin/python benchmarks/io_faults.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: one batch's output (32 x 3x224x224 float32) in 4 KiB pages
BATCH_PAGES = 32 * 3 * 224 * 224 * 4 // 4096


def one(rounds: int, epochs: int, keep: bool) -> dict:
    sys.path.insert(0, str(ROOT))
    from pytest_mxperf.workers import pipeline
    from pytest_mxperf.workers.protocol import import_mxnet

    if keep and not pipeline.keep_heap():
        raise SystemExit("glibc's mallopt is not available here")
    s = pipeline.check_spec({"loader": "ndarray", "batch_size": 32})
    rec, idx = pipeline.make_recordio(s["data_dir"], s["n_images"], s["image_size"], s["data_seed"], channels=3)
    mx = import_mxnet()
    side = pipeline.LoaderEpochs(mx, pipeline.make_loader(mx, s, rec, idx, pipeline._decode_all(mx, s, rec, idx)))
    side.timed(1)  # warm-up, as the duet's settle round
    out = []
    for _ in range(rounds):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        seconds = side.timed(epochs)
        out.append((round(seconds, 4), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0))
    return {"rounds": out, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="processes of each environment, alternated")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--one", choices=["as is", "heap kept"], help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(one(a.rounds, 2, a.one == "heap kept")))
        return 0
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; rounds of 2 epochs (32 batches of 32 x 3x224x224, "
          f"one batch's output {BATCH_PAGES} pages)")
    for i in range(a.runs):
        for name in ("as is", "heap kept"):
            p = subprocess.run([sys.executable, __file__, "--one", name, "--rounds", str(a.rounds)],
                               capture_output=True, text=True, check=True)
            r = json.loads(p.stdout.strip().splitlines()[-1])
            print(f"run {i + 1} {name:9s} " + "  ".join(f"{s:.3f} s/{f:6d} faults" for s, f in r["rounds"])
                  + f"   peak RSS {r['peak_rss_mib']:.0f} MiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
