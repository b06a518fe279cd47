"""Real duet A/B sessions on this machine: false alarms (A/A), detections, releases, cost.

Each session is ``pytest perf_tests/test_scoring.py -m cpu --perf-reference REF`` over the
same cells (default: AlexNet, Inception-BN, ResNet-50 v2 at b2 and b8), with
``--perf-report``; verdicts, ratios, intervals and wall times are read from results.json.
Kinds of session (``--kind``, repeatable, run in turn each round):

- ``aa``: this interpreter against a venv built from the same requirement (``mxnet==1.9.1``):
  nothing may be flagged;
- ``fusion-off``: the candidate is this interpreter with ``MXNET_SUBGRAPH_BACKEND=NONE`` set
  for it alone (a wrapper script), the reference the same 1.9.1 venv: oneDNN fusion off is
  a real slowdown of about 10% on ResNet-50 v2 b2 here, and must be flagged;
- ``release:REQ``: this interpreter (1.9.1) against ``REQ`` (e.g. ``mxnet==1.6.0``).

With ``--lock PATH`` every session holds that file lock (other work waits with
``flock PATH cmd``). ``--every`` spaces the rounds so that they spread over time.

    python benchmarks/ab_sessions.py --rounds 5 --every 600 --kind aa --kind fusion-off \\
        --out /tmp/ab-sessions --lock /tmp/machine.lock
    python benchmarks/ab_sessions.py --summary --out /tmp/ab-sessions
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine_lock import machine_lock  # noqa: E402

SAME = "mxnet==1.9.1"


def _wrapper(out: Path, name: str, env: dict) -> str:
    """An executable that runs this interpreter with ``env`` set for it alone."""
    path = out / f"python-{name}"
    sets = " ".join(f"{k}={v}" for k, v in env.items())
    path.write_text(f"#!/bin/sh\n{sets} exec {sys.executable} \"$@\"\n")
    path.chmod(0o755)
    return str(path)


def _sides(kind: str, out: Path):
    if kind == "aa":
        return None, SAME
    if kind == "fusion-off":
        return _wrapper(out, "fusion-off", {"MXNET_SUBGRAPH_BACKEND": "NONE"}), SAME
    if kind.startswith("release:"):
        return None, kind.split(":", 1)[1]
    raise SystemExit(f"unknown kind {kind!r}")


def _cell_seconds(rec) -> float:
    """Wall time of a cell's pairs: the two workers of a duet pair run side by side."""
    pairs = zip(rec.get("runs") or [], rec.get("reference_runs") or [])
    return sum(max(c.get("wall_seconds", 0.0), r.get("wall_seconds", 0.0)) for c, r in pairs)


def session(out: Path, name: str, kind: str, args) -> dict:
    rep = out / name
    cand, ref = _sides(kind, out)
    cmd = [sys.executable, "-m", "pytest", "perf_tests/test_scoring.py", "-m", "cpu", "-p", "no:cacheprovider",
           "-q", "--perf-models", args.models, "--perf-batch-sizes", args.batches, "--perf-reference", ref,
           "--perf-report", str(rep)] + (["--perf-python", cand] if cand else []) + list(args.pytest_arg or [])
    lock = machine_lock(args.lock)
    with lock:
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ), capture_output=True, text=True)
        seconds = round(time.time() - t0, 1)
    (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
    plan = next((ln for ln in proc.stdout.splitlines() if ln.startswith("mxperf: A/B mode")), "")
    cells = {}
    path = rep / "results.json"
    if path.exists():
        doc = json.loads(path.read_text())
        verdicts = doc["session"].get("verdicts", {})
        for rec in doc["records"]:
            v = verdicts.get(rec["key"]) or {}
            memory = {k: w["kind"] for k, w in verdicts.items() if k.startswith(rec["key"] + "#")}
            cells[rec["key"]] = {"kind": v.get("kind"), "ratio": None if v.get("change") is None else 1 + v["change"],
                                 "interval": v.get("interval"), "pairs": len(rec.get("runs") or []),
                                 "seconds": round(_cell_seconds(rec), 1), "other": memory,
                                 "reason": v.get("reason")}
    return {"name": name, "kind": kind, "exit": proc.returncode, "seconds": seconds, "plan": plan,
            "started": time.strftime("%H:%M:%S", time.gmtime(t0)), "cells": cells}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--every", type=float, default=600.0, help="seconds from one round's start to the next")
    ap.add_argument("--kind", action="append", default=None, help="aa, fusion-off, release:REQ (repeatable)")
    ap.add_argument("--models", default="alexnet,inception-bn,resnet50_v2")
    ap.add_argument("--batches", default="2,8")
    ap.add_argument("--pytest-arg", action="append", default=None, help="passed to pytest (repeatable)")
    ap.add_argument("--lock", default=None)
    ap.add_argument("--out", default="/tmp/ab-sessions")
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    log = out / "sessions.jsonl"
    if args.summary:
        return summarize(log)
    out.mkdir(parents=True, exist_ok=True)
    done = sum(1 for _ in open(log)) if log.exists() else 0
    for i in range(args.rounds):
        t_round = time.time()
        for kind in args.kind or ["aa", "fusion-off"]:
            r = session(out, f"s{done}-{kind.replace(':', '-').replace('=', '')}", kind, args)
            done += 1
            with open(log, "a") as fh:
                fh.write(json.dumps(r) + "\n")
            flagged = {k: c["kind"] for k, c in r["cells"].items() if c["kind"] not in ("unchanged", "improvement")}
            print(f"{r['started']} {r['name']}: exit {r['exit']} in {r['seconds']} s; flagged {flagged}", flush=True)
        if i + 1 < args.rounds:
            time.sleep(max(0.0, args.every - (time.time() - t_round)))
    return summarize(log)


def summarize(log: Path) -> int:
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for kind in dict.fromkeys(r["kind"] for r in rows):
        group = [r for r in rows if r["kind"] == kind]
        flagged = [sum(c["kind"] in ("regression", "unresolved") for c in r["cells"].values()) for r in group]
        print(f"## {kind}: {len(group)} session(s), exit codes {[r['exit'] for r in group]}, "
              f"flagged cells per session {flagged}, session seconds {[r['seconds'] for r in group]} "
              f"(started {[r['started'] for r in group]})")
        for key in sorted({k for r in group for k in r["cells"]}):
            cells = [r["cells"].get(key) for r in group]
            shown = []
            for c in cells:
                if c is None:
                    shown.append("-")
                    continue
                iv = c.get("interval")
                ratio = "-" if c["ratio"] is None else f"{c['ratio']:.3f}"
                band = f" [{iv[0]:.3f}, {iv[1]:.3f}]" if iv else ""
                other = "".join(f" {k.split('#')[1]}:{v}" for k, v in c["other"].items() if v != "unchanged")
                shown.append(f"{c['kind']} {ratio}{band} {c['pairs']}p {c['seconds']}s{other}")
            print(f"  {key}:")
            for s in shown:
                print(f"      {s}")
        if group and group[0].get("plan"):
            print(f"  plan: {group[0]['plan']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
