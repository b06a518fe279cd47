"""What checking answers costs (#27 part 5: "computed outside the timed rounds, at most 5% of a
session's wall time").

1. **The session.** Runs the default session (``pytest perf_tests -m cpu``, or the command
   given after ``--``) with ``--perf-report``, and adds up, over every worker process of
   every cell, the seconds its answer record took (``meta.answers.seconds``: measured in the
   worker around ``cell.answers``, after the timed rounds). Their sum over the session's
   wall time is the share; the processes ran one at a time, so the sum is wall time.
2. **The weights.** The seeded weights (``answers.initializer``: numpy's legacy stream, a
   million elements a draw) against MXNet's own ``Xavier(magnitude=2)`` on the same bound
   Module, alternating, ``--reps`` times each, for the networks of the default selection:
   what the same numbers on both sides cost at bind time (inside ``bind_seconds``, outside
   the timed rounds too).

    python benchmarks/answers_cost.py --lock /tmp/machine.lock --out benchmarks/results/answers-cost-2026-11-25.txt
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

INIT = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import mxnet as mx
from pytest_mxperf import zoo
from pytest_mxperf.workers import answers
out = {}
for name, batch in json.loads(sys.argv[1]):
    spec = zoo.get_model(name)
    sym = zoo.build_symbol(name)
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"])
    mod.bind(data_shapes=[("data", (batch,) + tuple(spec.input_shape))], for_training=False)
    times = {"xavier": [], "seeded": []}
    for rep in range(int(sys.argv[2])):
        for kind in (("xavier", "seeded") if rep % 2 == 0 else ("seeded", "xavier")):
            init = mx.init.Xavier(magnitude=2.0) if kind == "xavier" else answers.initializer(mx, rep)
            mx.nd.waitall()
            t0 = time.perf_counter()
            mod.init_params(initializer=init, force_init=True)
            mx.nd.waitall()
            times[kind].append(time.perf_counter() - t0)
    out[f"{name} b{batch}"] = times
print(json.dumps(out))
"""


def session(cmd, report: Path, lock: str):
    full = list(cmd) + ["--perf-report", str(report)]
    if lock:
        full = ["flock", lock] + full
    t0 = time.monotonic()
    r = subprocess.run(full, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    doc = json.loads((report / "results.json").read_text())
    per_cell = {}
    for rec in doc["records"]:
        secs = [float((run.get("meta") or {}).get("answers", {}).get("seconds", 0.0))
                for run in list(rec.get("runs") or []) + list(rec.get("reference_runs") or [])
                if (run.get("meta") or {}).get("answers")]
        if secs:
            per_cell[rec["key"]] = secs
    return shlex.join(full), r.returncode, wall, per_cell


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lock", default="")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", required=True)
    ap.add_argument("command", nargs="*", help="the session (after --); default: pytest perf_tests -m cpu")
    args = ap.parse_args(argv)
    cmd = args.command or [sys.executable, "-m", "pytest", "perf_tests", "-m", "cpu", "-p", "no:cacheprovider"]
    work = Path(tempfile.mkdtemp(prefix="answers-cost-"))
    lines = [f"# What checking answers costs (#27 part 5), {time.strftime('%Y-%m-%d')}", "",
             f"command: python {' '.join(shlex.quote(a) for a in sys.argv)}", ""]
    full, code, wall, per_cell = session(cmd, work / "report", args.lock)
    total = sum(sum(v) for v in per_cell.values())
    lines += ["## 1. The session", "", f"    {full}", "",
              f"exit {code}; wall {wall:.1f} s; answer records {sum(len(v) for v in per_cell.values())} in "
              f"{len(per_cell)} cells; their seconds {total:.2f} s = {100 * total / wall:.2f}% of the wall time", "",
              "| cell | processes | answer seconds (each) |", "|---|---|---|"]
    for key, secs in sorted(per_cell.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"| {key} | {len(secs)} | {', '.join(f'{s:.3f}' for s in secs)} |")
    nets = [["alexnet", 8], ["inception-bn", 8], ["resnet50_v2", 8]]
    init = [sys.executable, "-c", INIT, json.dumps(nets), str(args.reps)]
    if args.lock:
        init = ["flock", args.lock] + init
    r = subprocess.run(init, cwd=ROOT, capture_output=True, text=True)
    lines += ["", "## 2. The weights: seeded (numpy) against MXNet's Xavier, same Module, alternating", "",
              f"    {shlex.join(init[:3])} ... {shlex.join(init[-2:])}", ""]
    if r.returncode != 0:
        lines.append("failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    else:
        lines += ["| network | Xavier (s, median of each) | seeded (s) | difference (s) |", "|---|---|---|---|"]
        for net, t in json.loads(r.stdout.strip().splitlines()[-1]).items():
            x, s = statistics.median(t["xavier"]), statistics.median(t["seeded"])
            lines.append(f"| {net} | {x:.3f} | {s:.3f} | {s - x:+.3f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
