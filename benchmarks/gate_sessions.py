"""The real gate, session after session, on this machine: false alarms and detections.

Records a baseline once (5 processes per cell), then every ``--every`` seconds runs a round
of real gate sessions over the same cells: one unchanged, then one per ``--effect``. An
effect is ``name:VAR=VALUE`` (set in the session's environment, so the workers inherit it)
or ``name:neighbour`` (an unrelated CPU-bound process runs beside the whole session: a busy
machine, not a slower MXNet). Defaults:

- ``subgraph:MXNET_SUBGRAPH_BACKEND=NONE``: oneDNN fusion off, a real effect of about 10%;
- ``affinity:GOMP_CPU_AFFINITY=0``: every OpenMP thread of the worker bound to CPU 0 on an
  otherwise idle machine (same thread count, less parallel): must be a regression;
- ``neighbour:neighbour``: one busy Python process beside the session: must not be a
  regression, and must not pass silently.

``--effects-every K`` runs the effects after the first two only in every K-th round.
Each session is ``pytest perf_tests/test_scoring.py`` with ``--perf-report``; its verdicts
are read from ``results.json``. With ``--lock PATH`` every session holds that file lock, so
other work on the machine can wait for it (``flock PATH cmd``) instead of disturbing it.

    python benchmarks/gate_sessions.py --rounds 6 --every 1200 --out /tmp/gate-sessions --lock /tmp/machine.lock
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine_lock import machine_lock  # noqa: E402

NEIGHBOUR = "import time\nend = time.time() + 3600\nwhile time.time() < end:\n    sum(i * i for i in range(10000))\n"


@contextlib.contextmanager
def neighbour():
    proc = subprocess.Popen([sys.executable, "-c", NEIGHBOUR])
    try:
        time.sleep(2.0)
        yield
    finally:
        proc.kill()
        proc.wait()


def run_pytest(out: Path, name: str, cmd, env):
    """Run one pytest session (``cmd``) from the repository's top with ``env``; its output to
    ``out/<name>.log``: (the finished process, its start time, its seconds)."""
    t0 = time.time()
    log = out / f"{name}.log"
    with open(log, "w") as fh:   # written as it runs: the progress lines can be followed
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, text=True)
    seconds = round(time.time() - t0)
    proc.stdout, proc.stderr = log.read_text(), ""
    return proc, t0, seconds


def session(out: Path, name: str, args, effect=None, update=False):
    rep = out / name
    cmd = [sys.executable, "-m", "pytest", "perf_tests/test_scoring.py", "-m", "cpu", "-p", "no:cacheprovider",
           "-q", "--perf-models", args.models, "--perf-batch-sizes", args.batches,
           "--perf-baselines-dir", str(out / "bl"), "--perf-report", str(rep)]
    if update:
        cmd.append("--perf-update-baselines")
    env = dict(os.environ)
    beside = contextlib.nullcontext()
    if effect == "neighbour":
        beside = neighbour()
    elif effect:
        key, _, value = effect.partition("=")
        env[key] = value
    lock = machine_lock(args.lock)
    with lock:
        with beside:
            proc, t0, seconds = run_pytest(out, name, cmd, env)
    verdicts, ratios = {}, {}
    if (rep / "results.json").exists():
        doc = json.loads((rep / "results.json").read_text())
        for k, v in doc["session"].get("verdicts", {}).items():
            if "#" not in k:
                verdicts[k] = v["kind"]
                if v.get("change") is not None:
                    ratios[k] = 1.0 + v["change"]
    return {"name": name, "effect": effect, "exit": proc.returncode, "seconds": seconds, "verdicts": verdicts,
            "ratios": ratios, "started": time.strftime("%H:%M:%S", time.localtime(t0))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--every", type=float, default=900.0, help="seconds from one round's start to the next")
    ap.add_argument("--models", default="alexnet,inception-bn,resnet50_v2")
    ap.add_argument("--batches", default="2")
    ap.add_argument("--effect", action="append", default=None,
                    help="name:VAR=VALUE or name:neighbour (repeatable)")
    ap.add_argument("--no-effects", action="store_true", help="unchanged sessions only (an A/A campaign)")
    ap.add_argument("--effects-every", type=int, default=1,
                    help="run the effects after the first only every K-th round")
    ap.add_argument("--lock", default=None, help="a file lock held during each session")
    ap.add_argument("--out", default="/tmp/gate-sessions")
    ap.add_argument("--summary", action="store_true", help="only summarise an existing --out")
    args = ap.parse_args(argv)
    out = Path(args.out)
    log = out / "sessions.jsonl"
    if args.summary:
        return summarize(log)
    effects = [e.partition(":")[::2] for e in (args.effect or [
        "subgraph:MXNET_SUBGRAPH_BACKEND=NONE", "affinity:GOMP_CPU_AFFINITY=0", "neighbour:neighbour"])]
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "bl").exists():
        r = session(out, "baseline", args, update=True)
        print(f"{r['started']} baseline recorded: exit {r['exit']} in {r['seconds']} s", flush=True)
    for i in range(args.rounds):
        t_round = time.time()
        todo = [("unchanged", None)] + [(n, e) for j, (n, e) in enumerate(effects)
                                        if not args.no_effects and (j == 0 or i % args.effects_every == 0)]
        for label, effect in todo:
            r = session(out, f"r{i}-{label}", args, effect)
            r["label"] = label
            with open(log, "a") as fh:
                fh.write(json.dumps(r) + "\n")
            kinds = {}
            for k in r["verdicts"].values():
                kinds[k] = kinds.get(k, 0) + 1
            print(f"{r['started']} r{i}-{label}: exit {r['exit']} in {r['seconds']} s, verdicts {kinds}", flush=True)
        if i + 1 < args.rounds:
            time.sleep(max(0.0, args.every - (time.time() - t_round)))
    return summarize(log)


def summarize(log: Path) -> int:
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    labels = []
    for r in rows:
        r.setdefault("label", r["name"].split("-", 1)[1])
        if r["label"] not in labels:
            labels.append(r["label"])
    for label in labels:
        group = [r for r in rows if r["label"] == label]
        reg = sum(any(v == "regression" for v in r["verdicts"].values()) for r in group)
        unres = sum(any(v == "unresolved" for v in r["verdicts"].values()) for r in group)
        print(f"{label}: {len(group)} session(s); with a regression: {reg}; with an unresolved slowdown: {unres}; "
              f"exit codes {[r['exit'] for r in group]}; seconds {[r['seconds'] for r in group]}")
        for k in sorted({k for r in group for k in r["verdicts"]}):
            kinds = [r["verdicts"].get(k, "-") for r in group]
            ratios = [r.get("ratios", {}).get(k) for r in group]
            shown = " ".join("-" if x is None else f"{x:.3f}" for x in ratios)
            print(f"    {k}: {kinds} ratios {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
