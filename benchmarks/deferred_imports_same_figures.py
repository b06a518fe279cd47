"""Same figures with and without the deferred imports (``pytest_mxperf/workers/deferred_imports.py``).

A worker now imports MXNet with scipy.stats, requests and setuptools' distutils left unloaded
until used. Does that change what the worker measures? Pairs of fresh worker processes, one
importing MXNet the old way (``op_cache.import_mxnet(defer=False)``), one the new way, each
then running the suite's own throughput worker (``runner.run_workload`` with the worker's
command: MXNet is already imported when the worker asks for it), which side goes first
alternating (AB, BA, ...). Per cell: each process's figure, the ratio deferred/eager of each
pair and their median with its range (target 0.98-1.02), and the import's CPU seconds both ways.

    .venv/bin/python benchmarks/deferred_imports_same_figures.py --pairs 6 \\
        --out benchmarks/results/deferred-imports-same-figures-zen3-2026-11-28.txt
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_mxperf.measure import runner  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402
from worker_start import cpu_model, write_out  # noqa: E402  (this directory: the script's own)

_CHILD = """
import sys, time
t = time.process_time()
from pytest_mxperf.workers import op_cache
op_cache.import_mxnet(defer={defer})
print("import_cpu_s", time.process_time() - t, file=sys.stderr)
from pytest_mxperf.workers import throughput
sys.exit(throughput.main())
"""


def _one(workload: Workload, defer: bool, seed: int):
    command = [sys.executable, "-c", _CHILD.format(defer=defer)]
    r = runner.run_workload(workload, command=command, seed=seed)
    if not r.ok:
        raise SystemExit(f"{workload.key()} ({'deferred' if defer else 'eager'}): {r.status}: {r.message}")
    cpu = next((float(line.split()[1]) for line in r.stderr_tail if line.startswith("import_cpu_s")), None)
    return r.value("throughput"), r.value("peak_rss_mib"), cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--cells", default="resnet50_v2:8,alexnet:1")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    lines = [f"# a worker importing MXNet eagerly (as before) or with deferred imports, then the suite's throughput worker",
             f"# CPU: {cpu_model()}, {os.cpu_count()} CPUs; python {platform.python_version()}; command: .venv/bin/python "
             f"benchmarks/deferred_imports_same_figures.py --pairs {args.pairs} --cells {args.cells}",
             "cell                      pair  first     eager img/s  deferred img/s  ratio  eager MiB  deferred MiB"]
    summary = []
    for spec in args.cells.split(","):
        model, batch = spec.split(":")
        w = Workload(model=model, mode="score", batch_size=int(batch), contexts=("cpu:0",))
        ratios, imports, mem = [], {True: [], False: []}, {True: [], False: []}
        for i in range(args.pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            got = {}
            for defer in order:
                got[defer] = _one(w, defer, seed=i)
                if got[defer][2] is not None:
                    imports[defer].append(got[defer][2])
                if got[defer][1] is not None:
                    mem[defer].append(got[defer][1])
            ratio = got[True][0] / got[False][0]
            ratios.append(ratio)
            lines.append(f"{w.key():25s} {i:4d}  {'eager' if not order[0] else 'deferred':8s} {got[False][0]:12.2f} "
                         f"{got[True][0]:15.2f}  {ratio:5.3f}  {got[False][1] or float('nan'):9.1f}  "
                         f"{got[True][1] or float('nan'):12.1f}")
            print(lines[-1], flush=True)
        summary.append(f"{w.key()}: ratio deferred/eager median {statistics.median(ratios):.3f} "
                       f"[{min(ratios):.3f}, {max(ratios):.3f}] over {len(ratios)} pairs; import CPU-s median "
                       f"eager {statistics.median(imports[False]):.2f}, deferred {statistics.median(imports[True]):.2f}; "
                       f"memory figure median eager {statistics.median(mem[False]):.1f} MiB, "
                       f"deferred {statistics.median(mem[True]):.1f} MiB")
    lines += ["", *summary]
    text = "\n".join(lines) + "\n"
    print("\n".join(summary))
    write_out(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
