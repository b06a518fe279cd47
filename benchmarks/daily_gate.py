"""The daily gate as a user runs it, session after session, against a baseline recorded by the
default command: unchanged sessions and sessions whose setup was changed (issue 35).

Records ``pytest perf_tests -m cpu --perf-update-baselines`` once (into ``OUT/bl``), then runs
``pytest perf_tests -m cpu`` in the order ``--plan`` gives, each with ``--perf-report``:

- ``unchanged``: nothing changed;
- ``fusion``: a candidate interpreter that alone runs with oneDNN's fusion off (a wrapper of
  this interpreter that sets ``MXNET_SUBGRAPH_BACKEND=NONE`` for itself: the session's
  environment does not show it; since 2026-11-27 its workers report it);
- ``threads``: ``OMP_NUM_THREADS=1`` in the session's environment (half the parallelism);
- ``release``: ``--perf-python`` an older MXNet release (``--old-python``, e.g. a cached venv
  of mxnet==1.6.0).

Each session's row: exit status, seconds, its verdicts by kind, the cells settled against the
recorded setup with their ratio and interval, the lines it said about the duet, and how far its
estimates were from its pytest wall time (``estimates``: the first line's, and every progress
line's time gone plus time left; issue 37). Rows go to
``OUT/sessions.jsonl``; ``--summary`` prints the table.

    python benchmarks/daily_gate.py --out /tmp/daily --old-python ~/.cache/pytest-mxperf/venvs/mxnet-1.6.0-*/venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gate_sessions import run_pytest  # noqa: E402

PLAN = "unchanged,fusion,unchanged,threads,unchanged,release,unchanged,unchanged,unchanged,unchanged,unchanged," \
       "unchanged,unchanged"


def fusion_off_python(out: Path) -> str:
    path = out / "python-fusion-off"
    path.write_text(f'#!/bin/sh\nMXNET_SUBGRAPH_BACKEND=NONE exec {sys.executable} "$@"\n')
    path.chmod(0o755)
    return str(path)


def session(out: Path, name: str, extra=(), env_extra=None, update=False) -> dict:
    rep = out / name
    cmd = [sys.executable, "-m", "pytest", "perf_tests", "-m", "cpu", "-p", "no:cacheprovider",
           "--perf-baselines-dir", str(out / "bl"), "--perf-report", str(rep), *extra]
    if update:
        cmd.append("--perf-update-baselines")
    proc, t0, seconds = run_pytest(out, name, cmd, dict(os.environ, **(env_extra or {})))
    kinds, settled = {}, {}
    if (rep / "results.json").exists():
        doc = json.loads((rep / "results.json").read_text())
        for k, v in doc["session"].get("verdicts", {}).items():
            kinds[v["kind"]] = kinds.get(v["kind"], 0) + 1
            if str(v.get("reason", "")).startswith("against the recorded setup"):
                settled[k] = {"kind": v["kind"], "ratio": None if v.get("change") is None else 1 + v["change"],
                              "interval": v.get("interval"), "reason": v["reason"][:160]}
    said = [ln for ln in proc.stdout.splitlines()
            if "recorded setup" in ln and ln.startswith("mxperf:") and "REGRESSION" not in ln]
    return {"name": name, "exit": proc.returncode, "seconds": seconds, "kinds": kinds, "settled": settled,
            "said": said, "started": time.strftime("%H:%M:%S", time.localtime(t0)), **estimates(proc.stdout)}


_FIRST = re.compile(r"expected about (\d+(?:\.\d+)?) (min|s)\b")
#: the session's progress lines: while measuring ("N of M cell(s) measured, ...") and while the
#: end of the session settles suspects ("re-measured i of n suspect cell(s) (KEY), ..."), both
#: with the session's time gone and left (output/messages.said)
_PROGRESS = re.compile(r"(?:cell\(s\) measured|suspect cell\(s\) \([^)]*\)), (\d+(?:\.\d+)?) min gone, "
                       r"about (\d+(?:\.\d+)?) min left")
_WALL = re.compile(r"\bin (\d+(?:\.\d+)?)s(?: \(\d+:\d\d:\d\d\))? =+\s*$")


def estimates(text: str) -> dict:
    """From a session's output: ``pytest_seconds`` (pytest's own wall time, its last line),
    ``estimate_seconds`` (the first line's "expected about ..."), ``progress_seconds`` (each
    progress line's time gone plus time left, in order). None / [] where the output has none."""
    first = _FIRST.search(text)
    wall = [m for m in (_WALL.search(ln) for ln in text.splitlines()[-5:]) if m]
    return {"pytest_seconds": float(wall[-1].group(1)) if wall else None,
            "estimate_seconds": (float(first.group(1)) * (60 if first.group(2) == "min" else 1)) if first else None,
            "progress_seconds": [round(60 * (float(g) + float(left)), 1) for g, left in _PROGRESS.findall(text)]}


def _off(said, actual) -> str:
    return f"{100 * (said / actual - 1):+.0f}%" if said and actual else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default=PLAN, help="comma-separated: unchanged, fusion, threads, release")
    ap.add_argument("--old-python", default=None, help="the interpreter of an older MXNet release (release)")
    ap.add_argument("--out", default="/tmp/daily-gate")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--changed-deadline", default=None,
                    help="--perf-deadline for the sessions whose setup was changed (every cell goes to the duet)")
    args = ap.parse_args(argv)
    out, log = Path(args.out), Path(args.out) / "sessions.jsonl"
    if args.summary:
        return summarize(log)
    out.mkdir(parents=True, exist_ok=True)
    if not (out / "bl").exists():
        r = session(out, "baseline", update=True)
        print(f"{r['started']} baseline recorded: exit {r['exit']} in {r['seconds']} s", flush=True)
    changes = {"unchanged": ((), None), "fusion": (("--perf-python", fusion_off_python(out)), None),
               "threads": ((), {"OMP_NUM_THREADS": "1"}),
               "release": (("--perf-python", args.old_python or ""), None)}
    start = len([ln for ln in log.read_text().splitlines() if ln.strip()]) if log.exists() else 0
    for i, label in enumerate(args.plan.split(","), start):
        extra, env = changes[label]
        if label != "unchanged" and args.changed_deadline:
            extra = tuple(extra) + ("--perf-deadline", args.changed_deadline)
        r = dict(session(out, f"s{i:02d}-{label}", extra, env), label=label)
        with open(log, "a") as fh:
            fh.write(json.dumps(r) + "\n")
        print(f"{r['started']} s{i:02d}-{label}: exit {r['exit']} in {r['seconds']} s, {r['kinds']}, "
              f"settled against the recorded setup: {len(r['settled'])}", flush=True)
    return summarize(log)


def _ratio(v) -> str:
    lo, hi = (v.get("interval") or [None, None])[:2]
    return f"x{v['ratio']:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else " [-, -]")


def summarize(log: Path) -> int:
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for r in rows:  # from the session's output where it is kept (rows written before the harness
        out = log.parent / f"{r['name']}.log"  # read the settling lines lack them)
        if out.exists():
            r.update(estimates(out.read_text()))
    print("| session | started | change | exit | minutes | verdicts | figures settled against the recorded setup "
          "(duet or process pairs) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["kinds"].items()))
        settled = [(k, v) for k, v in r["settled"].items() if v.get("ratio") is not None]
        changed = [f"{k.split('/threads=')[0]}{'#' + k.split('#')[1] if '#' in k else ''}: {v['kind']} {_ratio(v)}"
                   for k, v in settled if v["kind"] != "unchanged"]
        same = [v["ratio"] for k, v in settled if v["kind"] == "unchanged"]
        text = "; ".join(changed)
        if same:
            text += (("; " if text else "") + f"{len(same)} unchanged, x{min(same):.3f} to x{max(same):.3f}")
        print(f"| {r['name']} | {r['started']} | {r['label']} | {r['exit']} | {r['seconds'] / 60:.1f} | {kinds} | "
              f"{text or '-'} |")
    print()
    print("| session | pytest wall | first line said | off | progress lines: gone + left | off, from - to | "
          "lines within 20% | the last line |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        wall, first, prog = r.get("pytest_seconds"), r.get("estimate_seconds"), r.get("progress_seconds") or []
        span = f"{min(prog) / 60:.1f} to {max(prog) / 60:.1f} min ({len(prog)} lines)" if prog else "-"
        offs = f"{_off(min(prog), wall)} to {_off(max(prog), wall)}" if prog else "-"
        near = f"{sum(abs(p / wall - 1) <= 0.2 for p in prog)} of {len(prog)}" if prog and wall else "-"
        print(f"| {r['name']} | {'-' if wall is None else f'{wall / 60:.1f} min'} | "
              f"{'-' if first is None else f'{first / 60:.1f} min'} | {_off(first, wall)} | {span} | {offs} | "
              f"{near} | {_off(prog[-1], wall) if prog else '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
