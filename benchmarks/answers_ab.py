"""The answers gate on real candidates (#27): A/B sessions of the scoring cells of the default
selection (``pytest perf_tests -m cpu -k test_scoring``: AlexNet, Inception-BN, ResNet-50 v2
at b1 and b8) of each candidate against a reference install, and the answers verdict the
gate gave each cell, read from the session's own results.json (nothing is recomputed).

Candidates: ``name=python`` pairs; ``wrong`` and ``kernels`` are built from the reference
(benchmarks/wrong_candidate.py: ReLUs made leaky; oneDNN's fusion off). Example::

    python benchmarks/answers_ab.py --reference .venv/bin/python \\
        --candidates "mxnet 1.6.0=$VENV16/bin/python,mxnet 1.8.0.post0=$VENV18/bin/python,kernels,wrong" \\
        --lock /tmp/machine.lock --out benchmarks/results/answers-2026-11-25.txt
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import wrong_candidate  # noqa: E402


def session(candidate: str, reference: str, report: Path, lock: str, selection: str) -> dict:
    cmd = [sys.executable, "-m", "pytest", "perf_tests", "-m", "cpu", "-k", selection, "-p", "no:cacheprovider",
           "--perf-python", candidate, "--perf-reference", reference, "--perf-report", str(report),
           "--perf-store", "none"]
    if lock:
        cmd = ["flock", lock] + cmd
    t0 = time.monotonic()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    first = next((ln for ln in r.stdout.splitlines() if ln.startswith(("mxperf: passed", "mxperf: FAILED"))), "")
    rows = []
    doc = json.loads((report / "results.json").read_text()) if (report / "results.json").exists() else {"records": []}
    for rec in doc["records"]:
        for key, v in (rec.get("verdicts") or {}).items():
            if key.endswith("#answers"):
                rows.append({"cell": key[:-len("#answers")], "kind": v["kind"], "distance": v.get("change"),
                             "tolerance": v.get("threshold"), "reason": v["reason"],
                             "speed": (rec.get("verdicts") or {}).get(rec["key"], {}).get("kind")})
    return {"command": shlex.join(cmd), "exit": r.returncode, "wall": wall, "first_line": first, "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", required=True, help="the reference interpreter (MXNet 1.9.1)")
    ap.add_argument("--candidates", required=True,
                    help="comma-separated name=python, or 'wrong' / 'kernels' (built from the reference)")
    ap.add_argument("--selection", default="test_scoring")
    ap.add_argument("--lock", default="")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="answers-ab-"))
    out = [f"# The answers gate on real candidates (#27), {time.strftime('%Y-%m-%d')}",
           "", f"command: python {' '.join(shlex.quote(a) for a in sys.argv)}",
           f"reference: {args.reference}; cells: pytest perf_tests -m cpu -k {args.selection} (the default "
           "selection's scoring cells); each candidate one A/B session (duet pairs, two stages as the gate runs them)",
           "distance: ||candidate - reference|| / ||reference|| estimated from the answer records' sketches "
           "(judge/answers.py); the verdict and its reason are the session's own (results.json)", ""]
    for item in [c.strip() for c in args.candidates.split(",") if c.strip()]:
        name, _, python = item.partition("=")
        if name == "wrong" and not python:
            python = wrong_candidate.wrong(work / "wrong", args.reference)
        elif name == "kernels" and not python:
            python = wrong_candidate.kernels(work / "kernels", args.reference)
        res = session(python, args.reference, work / name.replace(" ", "_") / "report", args.lock, args.selection)
        print(f"{name}: exit {res['exit']}, {res['wall']:.0f} s", flush=True)
        out += [f"## candidate: {name} ({python})", "", f"    {res['command']}", "",
                f"exit {res['exit']}, {res['wall']:.0f} s; {res['first_line']}", "",
                "| cell | answers verdict | largest difference | tolerance | speed verdict |", "|---|---|---|---|---|"]
        for row in res["rows"]:
            d, t = row["distance"], row["tolerance"]
            d = "-" if d is None else f"{d:.1e}"
            t = "-" if t is None else f"{t:.1e}"
            out.append(f"| {row['cell']} | {row['kind']} | {d} | {t} | {row['speed']} |")
        out += ["", "reasons:", ""] + [f"- {row['cell']}: {row['reason']}" for row in res["rows"]] + [""]
    Path(args.out).write_text("\n".join(out) + "\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
