"""Why the suite's figures moved since d91301c (issue 75): its worker then and now, one worker
process a figure (a session's unit), alternating, and today's worker with one of the things
that changed since put back as it was then:

* ``then``: d91301c's worker (``python -m pytest_mxperf.worker``, its own checkout on the
  path): Xavier weights (``mx.init.Xavier(magnitude=2)``), the input from MXNet's RNG
  (``mx.random.uniform``), an untimed warm-up of at most 20 batches in at most a second;
* ``now``: today's worker (``python -m pytest_mxperf.workers.throughput``): the weights and
  input from the seed through numpy (``workers/answers.py``: the same numbers under every
  release), half a second of warm-up (``WARMUP_SECONDS``), ``import mxnet`` through the op
  cache, the answers sketched after the timed rounds;
* ``now, Xavier``: today's, its weights Xavier's (the initializer of then, patched in);
* ``now, 1 s warm-up``: today's, its spec's warm-up a second (``warmup_seconds``);
* ``now, plain import``: today's, ``import mxnet`` as then (not through the op cache and
  ``workers/deferred_imports.py``).

Both workers time rounds of about 0.2 s of batches, each round ending in ``mx.nd.waitall()``,
over a 1.5-s budget, and report the median round. Per cell: each variant's median over its
processes, and against ``then``.

    .venv/bin/python benchmarks/score_decompose.py --old /tmp/d91301c --processes 6 --cells resnet50_v2:8

(its table of 2026-12-02 is the "Decomposition" section of benchmarks/results/score-methods-2026-12-02.txt)
"""

from __future__ import annotations

import argparse
import json
import os
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

from pytest_mxperf.measure import runner  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402

VARIANTS = ("then", "now", "now, Xavier", "now, 1 s warm-up", "now, plain import")
#: today's worker with one thing patched in before it runs (``runpy``: its module-level imports
#: read the patched names)
PATCHED = {
    "now, Xavier": "from pytest_mxperf.workers import answers; "
                   "answers.initializer = lambda mx, seed: mx.init.Xavier(magnitude=2.0)",
    "now, plain import": "from pytest_mxperf.workers import protocol\n"
                         "def plain(keep_compiled=False, facts=None):\n"
                         "    import mxnet\n"
                         "    return mxnet\n"
                         "protocol.import_mxnet = plain",
}
RUN = "\nimport sys, runpy\nsys.argv = ['throughput'] + sys.argv[1:]\n" \
      "runpy.run_module('pytest_mxperf.workers.throughput', run_name='__main__')"


def one(variant: str, old: Path, model: str, batch: int, seed: int, work: Path) -> float:
    """One worker process of ``variant``: its figure (img/s, from its median round)."""
    w = Workload(model, batch_size=batch)
    env, _ = runner.build_env(w)
    spec = {"workload": w.to_dict(), "time_budget": 1.5, "smoke": False, "memory_limit": None, "seed": seed}
    python = sys.executable
    if variant == "then":
        env = dict(env, PYTHONPATH=str(old))
        python, cmd = str(old / ".venv" / "bin" / "python"), ["-m", "pytest_mxperf.worker"]
    elif variant in PATCHED:
        cmd = ["-c", PATCHED[variant] + RUN]
    else:
        cmd = ["-m", "pytest_mxperf.workers.throughput"]
        if variant == "now, 1 s warm-up":
            spec["warmup_seconds"] = 1.0
    d = Path(tempfile.mkdtemp(dir=work))
    (d / "spec.json").write_text(json.dumps(spec))
    r = subprocess.run([python, *cmd, str(d / "spec.json"), str(d / "result.json")], env=env, cwd=str(d),
                       capture_output=True, text=True, timeout=600)
    out = json.loads((d / "result.json").read_text()) if (d / "result.json").is_file() else {}
    if out.get("status") != "ok":
        raise SystemExit(f"{variant} {model} b{batch}: exit {r.returncode}: {out.get('message')} {r.stderr[-1500:]}")
    per_round = statistics.median(out["round_seconds"])
    return out["batches_per_round"] * batch / per_round


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="a checkout of d91301c with its .venv")
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--cells", default="alexnet:1,resnet50_v2:1,alexnet:8,resnet50_v2:8")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    cells = [(m, int(b)) for m, b in (c.split(":") for c in a.cells.split(","))]
    work = Path(tempfile.mkdtemp(prefix="score-decompose-"))
    got = {(c, v): [] for c in cells for v in VARIANTS}
    lines = [f"# why the suite's figures moved since d91301c: one worker process a figure, variants alternating, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"# CPU: {cpu_model()}, {os.cpu_count()} vCPUs; {a.processes} processes a variant and cell; "
             f"python {sys.executable}", f"# {' '.join(sys.argv)}"]
    t0 = time.time()
    for i in range(a.processes):
        for c in cells:
            order = VARIANTS if (i + cells.index(c)) % 2 == 0 else VARIANTS[::-1]
            for v in order:
                got[(c, v)].append(one(v, a.old, c[0], c[1], i, work))
        print(f"process {i + 1}/{a.processes} done, {time.time() - t0:.0f} s", flush=True)
    lines.append(f"{'cell':<16}" + "".join(f"{v:>18}" for v in VARIANTS) + "".join(f"{v + '/then':>22}"
                                                                                  for v in VARIANTS[1:]))
    for c in cells:
        med = {v: statistics.median(got[(c, v)]) for v in VARIANTS}
        lines.append(f"{c[0] + ' b' + str(c[1]):<16}" + "".join(f"{med[v]:>18.2f}" for v in VARIANTS)
                     + "".join(f"{med[v] / med['then']:>22.3f}" for v in VARIANTS[1:]))
    lines.append("(img/s, the median over the processes; each process's figure from its median round)")
    lines.append("")
    lines.append("every process: " + "; ".join(f"{c[0]} b{c[1]} {v}: " + " ".join(f"{x:.1f}" for x in got[(c, v)])
                                              for c in cells for v in VARIANTS))
    return report(lines, a.out)


if __name__ == "__main__":
    sys.exit(main())
