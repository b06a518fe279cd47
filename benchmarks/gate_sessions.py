"""The real gate, session after session, on this machine: false alarms and detections.

Records a baseline once (5 processes per cell), then every ``--every`` seconds runs two
real gate sessions over the same cells: one unchanged, one with a real effect set in the
environment (default ``MXNET_SUBGRAPH_BACKEND=NONE``: oneDNN fusion off). Each session is
``pytest perf_tests/test_scoring.py`` with ``--perf-report``; its verdicts are read from
``results.json``. Prints one line per session and a summary: sessions with a false
regression / an unresolved slowdown (unchanged sessions), and per cell how often the effect
was a regression, unresolved or missed.

    python benchmarks/gate_sessions.py --rounds 6 --every 900 --out /tmp/gate-sessions
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def session(out: Path, name: str, args, extra_env=None, update=False):
    rep = out / name
    cmd = [sys.executable, "-m", "pytest", "perf_tests/test_scoring.py", "-m", "cpu", "-p", "no:cacheprovider",
           "-q", "--perf-models", args.models, "--perf-batch-sizes", args.batches,
           "--perf-baselines-dir", str(out / "bl"), "--perf-report", str(rep)]
    if update:
        cmd.append("--perf-update-baselines")
    env = dict(os.environ, **(extra_env or {}))
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
    verdicts = {}
    if (rep / "results.json").exists():
        doc = json.loads((rep / "results.json").read_text())
        verdicts = {k: v["kind"] for k, v in doc["session"].get("verdicts", {}).items() if "#" not in k}
    return {"name": name, "exit": proc.returncode, "seconds": round(time.time() - t0), "verdicts": verdicts,
            "started": time.strftime("%H:%M:%S", time.localtime(t0))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--every", type=float, default=900.0, help="seconds from one round's start to the next")
    ap.add_argument("--models", default="alexnet,inception-bn,resnet50_v2")
    ap.add_argument("--batches", default="2,8")
    ap.add_argument("--effect", default="MXNET_SUBGRAPH_BACKEND=NONE")
    ap.add_argument("--out", default="/tmp/gate-sessions")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "sessions.jsonl"
    if not (out / "bl").exists():
        r = session(out, "baseline", args, update=True)
        print(f"baseline recorded: exit {r['exit']} in {r['seconds']} s", flush=True)
    key, _, value = args.effect.partition("=")
    for i in range(args.rounds):
        t_round = time.time()
        for name, env in ((f"r{i}-unchanged", None), (f"r{i}-effect", {key: value})):
            r = session(out, name, args, env)
            with open(log, "a") as fh:
                fh.write(json.dumps(r) + "\n")
            kinds = {}
            for k in r["verdicts"].values():
                kinds[k] = kinds.get(k, 0) + 1
            print(f"{r['started']} {name}: exit {r['exit']} in {r['seconds']} s, verdicts {kinds}", flush=True)
        if i + 1 < args.rounds:
            time.sleep(max(0.0, args.every - (time.time() - t_round)))
    return summarize(log)


def summarize(log: Path) -> int:
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    unchanged = [r for r in rows if r["name"].endswith("unchanged")]
    effect = [r for r in rows if r["name"].endswith("effect")]
    false_reg = sum(any(v == "regression" for v in r["verdicts"].values()) for r in unchanged)
    unres = sum(any(v == "unresolved" for v in r["verdicts"].values()) for r in unchanged)
    print(f"unchanged sessions: {len(unchanged)}; with a false regression: {false_reg}; with an unresolved "
          f"slowdown: {unres}; exit codes {[r['exit'] for r in unchanged]}")
    cells = sorted({k for r in effect for k in r["verdicts"]})
    for k in cells:
        kinds = [r["verdicts"].get(k, "-") for r in effect]
        print(f"effect on {k}: {kinds}")
    print(f"effect sessions: exit codes {[r['exit'] for r in effect]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
