"""Does a duet of two training runs, alternating rounds of a quarter epoch, steady the
time-to-accuracy cell's pairs (issue 35: its process pairs spread about 20%,
``tta-spread-2026-11-29.txt``)?

The default selection's time-to-accuracy cell (LeNet b64 on the digits to 95%, seeds 0-4
as the session gives them) measured as A/A pairs (the same MXNet on both sides) two ways,
alternating pair by pair so that the machine's spells fall on each alike, both through the
product's own functions:

* **process pairs**: two fresh workers of one seed, one after the other
  (``proc.worker.run_process``: as a session runs a cell that cannot duet);
* **duet pairs**: ``measure.duet.run_pair`` with ``workers.convergence``: two resident
  workers of one seed whose rounds (a quarter epoch each, ``convergence.DUET_EPOCH_ROUNDS``)
  the parent alternates until both reached the target (``duet.run_to_the_end``).

For each: the pairs' log ratios of seconds to the target as the verdict takes them
(``ab_judging.duet_log_ratio``: for a duet pair, the sums of its rounds with a burst on one
side bounded, ``stats.duet_run_log_ratio``; the plain sums are printed beside), their spread
(sd of the log ratio: what the verdicts' t-tests see) and the wall time of a pair.

    .venv/bin/python benchmarks/tta_duet.py --pairs 30 --out benchmarks/results/tta-duet-2026-11-29.txt
    .venv/bin/python benchmarks/tta_duet.py --pairs 10 --hog 1.5 2.5 --out ...   # a burst beside each
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_mxperf.measure import duet  # noqa: E402
from pytest_mxperf.model.measurement import METRICS  # noqa: E402
from pytest_mxperf.outcome import ab_judging  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402
from pytest_mxperf.proc import spawn  # noqa: E402
from pytest_mxperf.proc.worker import run_process  # noqa: E402
from pytest_mxperf.workers import convergence  # noqa: E402

MODULE = "pytest_mxperf.workers.convergence"
SPEC = {"model": "lenet", "contexts": ["cpu:0"], "batch_size": 64, "target_accuracy": 0.95, "max_epochs": 20}
SEEDS = (0, 1, 2, 3, 4)


def process_pair(seed: int, first: int):
    """Two fresh workers of ``seed`` one after the other; (log ratio b / a, epochs, wall)."""
    t0 = time.perf_counter()
    got = []
    for _ in range(2):
        out = run_process(spawn.python_command(sys.executable, MODULE), dict(SPEC, seed=seed), timeout=300,
                          env=spawn.with_package_path(dict(os.environ)))
        if out.status != "ok" or not out.payload.get("reached"):
            raise SystemExit(f"a convergence worker failed: {out.status}: {out.message}")
        got.append(out.payload)
    a, b = got if first == 0 else got[::-1]
    return math.log(b["seconds_to_accuracy"] / a["seconds_to_accuracy"]), (a["epochs"], b["epochs"]), \
        time.perf_counter() - t0


HOG = "import time\ntime.sleep({delay})\nt = time.time()\nwhile time.time() - t < {busy}:\n    pass\n"


def duet_pair(seed: int, first: int, hog=None):
    """One duet pair of ``seed`` (candidate and reference the same interpreter); ``hog``:
    (delay, busy) seconds: a process that computes ``busy`` seconds from ``delay`` seconds
    after the pair starts, beside it (a burst of another process on the machine)."""
    w = Workload(model="lenet", mode="convergence", batch_size=64, contexts=("cpu:0",), threads="auto")
    t0 = time.perf_counter()
    burst = subprocess.Popen([sys.executable, "-c", HOG.format(delay=hog[0], busy=hog[1])]) if hog else None
    try:
        c, r = duet.run_pair(w, candidate=None, reference=None, seed=seed, candidate_first=first == 0,
                             module=MODULE, spec=dict(SPEC), figures=convergence.figures)
    finally:
        if burst is not None:
            burst.wait()
    if not (c.ok and r.ok) or c.value("seconds_to_target") is None or r.value("seconds_to_target") is None:
        raise SystemExit(f"a duet pair failed: {c.status} {c.message} / {r.status} {r.message}")
    judged = ab_judging.duet_log_ratio(c, r, METRICS["seconds_to_target"])  # what the verdict takes
    sums = math.log(c.value("seconds_to_target") / r.value("seconds_to_target"))
    return judged, (int(c.value("epochs_to_target")), int(r.value("epochs_to_target"))), \
        time.perf_counter() - t0, sums


def cpu_name() -> str:
    with open("/proc/cpuinfo") as fh:
        info = dict(line.split(":", 1) for line in fh.read().split("\n\n")[0].splitlines() if ":" in line)
    info = {k.strip(): v.strip() for k, v in info.items()}
    return f"{info.get('model name')}, family {info.get('cpu family')} model {info.get('model')}"


def summary(name: str, rows) -> str:
    logs = [x for x, *_ in rows]
    walls = [row[2] for row in rows]
    same = sum(1 for _, (a, b), *_ in rows if a == b)
    return (f"{name:15s} pairs {len(rows):3d}  sd of log ratio {100 * statistics.stdev(logs):5.1f}%  "
            f"mean {100 * statistics.fmean(logs):+5.1f}%  |log| max {100 * max(map(abs, logs)):5.1f}%  "
            f"same epochs {same}/{len(rows)}  wall a pair: median {statistics.median(walls):.1f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=20, help="pairs of each kind")
    ap.add_argument("--out", help="append the summary to this file")
    ap.add_argument("--hog", nargs=2, type=float, metavar=("DELAY", "BUSY"),
                    help="duet pairs only, each with a process computing BUSY s from DELAY s into it")
    a = ap.parse_args(argv)
    rows = {"process pairs": [], "duet pairs": []} if not a.hog else {"duet pairs": []}
    for i in range(a.pairs):
        seed, first = SEEDS[i % len(SEEDS)], i % 2
        kinds = [("process pairs", process_pair), ("duet pairs", duet_pair)]
        if a.hog:
            kinds = [("duet pairs", lambda s, f: duet_pair(s, f, a.hog))]
        for name, fn in (kinds if i % 2 == 0 else kinds[::-1]):
            row = fn(seed, first)
            rows[name].append(row)
            x, epochs, wall = row[:3]
            sums = f"  (sums of the rounds {100 * row[3]:+6.1f}%)" if len(row) > 3 else ""
            print(f"{i:3d} seed {seed} {name:14s} log ratio {100 * x:+6.1f}%  epochs {epochs}  {wall:5.1f} s{sums}",
                  flush=True)
    lines = [f"# {cpu_name()}; {os.cpu_count()} CPUs; command: python benchmarks/tta_duet.py "
             + " ".join(sys.argv[1:] if argv is None else argv)]
    lines += [summary(name, r) for name, r in rows.items()]
    sums = [row[3] for row in rows["duet pairs"]]
    if len(sums) >= 2:
        lines.append(f"duet pairs, the plain sums of their rounds: sd of log ratio {100 * statistics.stdev(sums):5.1f}%")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "a") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
