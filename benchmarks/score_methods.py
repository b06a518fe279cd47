"""Which of the suite's two measuring methods matches MXNet's own ``benchmark_score.py`` (issue
75): the code of d91301c (the commit that recorded the baseline this repository shipped until
issue 75) against today's, on the same machine, MXNet and cells, in alternating processes.

Each round, in alternating order:

* ``script``: MXNet 1.9.1's ``example/image-classification/benchmark_score.py`` (unmodified:
  its ``score()``, 5 untimed batches then 10 timed, each waited for), one fresh process per
  cell, in the environment the suite gives its workers (``benchmarks/score_window.py``'s
  ``one_process``: its ``first``);
* ``then``: a session of d91301c's code (a checkout of it with its own venv, ``--old``):
  ``pytest perf_tests/test_scoring.py -m cpu --perf-models alexnet,resnet50_v2
  --perf-batch-sizes 1,8``, the issue's command;
* ``now``: the same session of this checkout's code;
* ``now alone``: today's code, each cell in a session of its own (so its worker processes
  measure that cell alone, as d91301c's did: today a grid's cells share worker processes).

Per cell: the median over the rounds of each method's figure (a session's: its median over
processes; the script's: its figure), and each against the script's.

    .venv/bin/python benchmarks/score_methods.py --old /tmp/d91301c --rounds 3 \\
        --out benchmarks/results/score-methods-2026-12-02.txt
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from worker_start import cpu_model, report  # noqa: E402

CELLS = (("alexnet", 1), ("alexnet", 8), ("resnet50_v2", 1), ("resnet50_v2", 8))
METHODS = ("script", "then", "now", "now alone")


def key(model, batch):
    return f"score/{model}/b{batch}/cpu:0/float32/threads=auto"


def session(checkout: Path, python: str, models, batches, work: Path):
    """A session of the suite's code at ``checkout``: {cell key: its median over processes}."""
    rep = Path(tempfile.mkdtemp(dir=work))
    cmd = [python, "-m", "pytest", "perf_tests/test_scoring.py", "-p", "no:cacheprovider", "-m", "cpu",
           "--perf-models", ",".join(models), "--perf-batch-sizes", ",".join(map(str, batches)),
           "--perf-baselines-dir", str(rep / "bl"), "--perf-report", str(rep / "out")]
    if (checkout / "pytest_mxperf" / "history").is_dir():
        cmd += ["--perf-store", "none"]
    r = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, timeout=3600)
    doc = json.loads((rep / "out" / "results.json").read_text()) if (rep / "out" / "results.json").is_file() else {}
    got = {rec["key"]: rec.get("median") for rec in doc.get("records", [])}
    if not got:
        raise SystemExit(f"{checkout}: no results (exit {r.returncode}): {r.stdout[-2000:]}{r.stderr[-1000:]}")
    return got


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="a checkout of d91301c with its .venv")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--example-dir", type=Path,
                    default=Path("/work/mxnet-example-1.9.1/example/image-classification"))
    ap.add_argument("--methods", default=",".join(METHODS), help="a subset of " + ",".join(METHODS))
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    methods = tuple(m for m in METHODS if m in a.methods.split(","))
    from score_window import one_process
    work = Path(tempfile.mkdtemp(prefix="score-methods-"))
    got = {m: {key(*c): [] for c in CELLS} for m in methods}
    lines = [f"# the suite's measuring methods against MXNet 1.9.1's benchmark_score.py, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"# CPU: {cpu_model()}; {a.rounds} rounds, methods in alternating order; python {sys.executable}",
             f"# then = d91301c's code ({a.old}), now = this checkout's; {' '.join(sys.argv)}"]
    models = sorted({m for m, _ in CELLS})
    batches = sorted({b for _, b in CELLS})
    for i in range(a.rounds):
        order = methods if i % 2 == 0 else methods[::-1]
        for method in order:
            t0 = time.time()
            if method == "script":
                for m, b in CELLS:
                    got[method][key(m, b)].append(one_process(sys.executable, a.example_dir, m, b, 1)["first"])
            elif method == "then":
                for k, v in session(a.old, str(a.old / ".venv" / "bin" / "python"), models, batches, work).items():
                    got[method].get(k, []).append(v)
            elif method == "now":
                for k, v in session(ROOT, sys.executable, models, batches, work).items():
                    got[method].get(k, []).append(v)
            else:
                for m, b in CELLS:
                    for k, v in session(ROOT, sys.executable, [m], [b], work).items():
                        got[method].get(k, []).append(v)
            lines.append(f"round {i + 1} {method:<9} {time.time() - t0:6.0f} s: " + ", ".join(
                f"{k.split('/')[1]} {k.split('/')[2]} {got[method][k][-1]:.2f}" for k in got[method]
                if got[method][k]))
            print(lines[-1], flush=True)
    lines.append("")
    lines.append(f"{'cell':<18}" + "".join(f"{m:>12}" for m in methods)
                 + "".join(f"{m + '/script':>18}" for m in methods[1:]))
    for m, b in CELLS:
        k = key(m, b)
        med = {x: statistics.median(got[x][k]) for x in methods if got[x][k]}
        lines.append(f"{m + ' b' + str(b):<18}" + "".join(f"{med.get(x, float('nan')):>12.2f}" for x in methods)
                     + "".join(f"{med[x] / med['script']:>18.3f}" if x in med and 'script' in med else f"{'-':>18}"
                               for x in methods[1:]))
    lines.append("(img/s; each the median over the rounds; a session's figure is its median over its processes)")
    return report(lines, a.out)


if __name__ == "__main__":
    sys.exit(main())
