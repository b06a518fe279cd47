"""Why the time-to-accuracy cell's pairs spread about 20% (issue 35: every miss of a visible -10%
change in the replays was that cell), and whether runs inside resident processes would not.

The default selection's time-to-accuracy cell (``test_cpu_time_to_accuracy[b64-1cpu]``: LeNet
b64 on the digits to 95% validation accuracy, ``workers/convergence.py``) measured three ways,
alternating so that the machine's spells fall on each alike:

* **fresh**: one fresh worker process per run, as a session runs the cell (its seconds to
  accuracy count from the first batch: the process's first batches, oneDNN's primitives made,
  are inside them);
* **resident**: ``--runs`` runs of the same seed one after another in one process (the first
  run's figure reported apart: it is the fresh process's); the spread of the later ones is what
  rounds of whole runs in a resident worker would see.

For each seed the epochs to the target (the discrete figure) are also shown: a pair of one seed
trains the same epochs on one setup.

    .venv/bin/python benchmarks/tta_spread.py --seeds 0 1 2 --fresh 8 --runs 6 \\
        --out benchmarks/results/tta-spread-2026-11-29.txt
    .venv/bin/python benchmarks/tta_spread.py --detail 8     # each epoch's seconds, one process
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_mxperf.proc import spawn  # noqa: E402
from pytest_mxperf.proc.worker import run_process  # noqa: E402

SPEC = {"model": "lenet", "contexts": ["cpu:0"], "batch_size": 64, "target_accuracy": 0.95, "max_epochs": 30}

_RESIDENT = """
import json, sys
from pytest_mxperf.workers import convergence
spec, runs = json.loads(sys.argv[1]), int(sys.argv[2])
out = []
for _ in range(runs):
    r = convergence.run(spec)
    out.append({"seconds": r.get("seconds_to_accuracy"), "epochs": r.get("epochs"), "reached": r.get("reached"),
                "train": r.get("train_seconds"), "epoch_seconds": [h["train_seconds"] for h in r.get("history", [])]})
print(json.dumps(out))
"""


def fresh_run(python: str, spec: dict) -> dict:
    """One fresh convergence worker, as a session starts it (``proc.worker.run_process``)."""
    out = run_process(spawn.python_command(python, "pytest_mxperf.workers.convergence"), spec, timeout=300,
                      env=spawn.with_package_path(dict(os.environ)))
    if out.status != "ok":
        raise SystemExit(f"the convergence worker failed: {out.status}: {out.message}")
    r = out.payload
    return {"seconds": r.get("seconds_to_accuracy"), "epochs": r.get("epochs"), "reached": r.get("reached")}


def resident_runs(python: str, spec: dict, runs: int) -> list:
    env = spawn.with_package_path(dict(os.environ))
    p = subprocess.run([python, "-c", _RESIDENT, json.dumps(spec), str(runs)], env=env, capture_output=True,
                       text=True, timeout=600, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def spread(xs) -> str:
    """Median, the range, and the sd of log(x) in % (what a pair's log ratio is made of)."""
    xs = [x for x in xs if x]
    if len(xs) < 2:
        return "-"
    logs = [math.log(x) for x in xs]
    return (f"median {statistics.median(xs):.3f} s [{min(xs):.3f}, {max(xs):.3f}], "
            f"sd of log {100 * statistics.stdev(logs):.1f}%")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--fresh", type=int, default=6, help="fresh processes per seed")
    ap.add_argument("--runs", type=int, default=6, help="runs per resident process (the first reported apart)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--detail", type=int, default=0,
                    help="only this many runs of the first seed in one resident process, each epoch's training seconds")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    lines = [f"# {__doc__.splitlines()[0]}", f"# command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}"]
    try:
        from pytest_mxperf.machine import hardware
        cpu = hardware.cpu_info()
        lines.append(f"# CPU: {cpu['model_name']}, family {cpu.get('family', '?')} model {cpu.get('model', '?')}, "
                     f"{os.cpu_count()} CPUs")
    except Exception:  # noqa: BLE001 - the CPU's name is a note, not a figure
        pass
    if a.detail:
        for r in resident_runs(a.python, dict(SPEC, seed=a.seeds[0]), a.detail):
            lines.append(f"seed {a.seeds[0]}: {r['seconds']:.3f} s to accuracy, training {r['train']:.3f} s, epochs "
                         + " ".join(f"{e:.3f}" for e in r["epoch_seconds"]))
        a.seeds = []
    for seed in a.seeds:
        spec = dict(SPEC, seed=seed)
        fresh, firsts, later, epochs = [], [], [], set()
        for _ in range(a.fresh):  # alternating: a fresh process, then a resident one
            f = fresh_run(a.python, spec)
            fresh.append(f["seconds"])
            epochs.add(f["epochs"])
            rs = resident_runs(a.python, spec, a.runs)
            firsts.append(rs[0]["seconds"])
            later.extend(r["seconds"] for r in rs[1:])
            epochs.update(r["epochs"] for r in rs)
        lines.append(f"seed {seed}: epochs {sorted(epochs)}")
        lines.append(f"  fresh processes ({len(fresh)}):             {spread(fresh)}")
        lines.append(f"  resident, first run ({len(firsts)}):         {spread(firsts)}")
        lines.append(f"  resident, later runs ({len(later)}):        {spread(later)}")
        print("\n".join(lines[-4:]), flush=True)
    text = "\n".join(lines) + "\n"
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
