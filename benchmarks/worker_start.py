"""What ``import mxnet`` costs a worker, with MXNet compiling its operator wrappers itself, with
them from the cache (``pytest_mxperf/workers/op_cache.py``), and from the cache with the modules
MXNet imports but a worker does not use deferred (``workers/deferred_imports.py``).

Alternating fresh processes (plain, cached, deferred, plain, ...; ``--rounds`` of each), every one of
them ``python -c`` importing MXNet then running one operator: CPU seconds of the process
(user + system, ``time.process_time``), its resident memory after the import and its peak.
The cache is written first by the probe (``python -m pytest_mxperf.workers.protocol --probe``),
as a session does, into a directory of this run.

    .venv/bin/python benchmarks/worker_start.py --rounds 8 \\
        --out benchmarks/results/worker-start-zen3-2026-11-28.txt
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_mxperf.machine import hardware  # noqa: E402
from pytest_mxperf.proc import spawn  # noqa: E402

_CHILD = """
import json, resource, sys, time
t = time.process_time()
if sys.argv[1] == "plain":
    import mxnet as mx
    counts = {}
else:
    from pytest_mxperf.workers.op_cache import import_mxnet
    mx, counts = import_mxnet(defer=sys.argv[1] == "deferred")
    counts.pop("deferred")
cpu = time.process_time() - t
with open("/proc/self/status") as fh:
    rss = [int(l.split()[1]) / 1024 for l in fh if l.startswith("VmRSS")][0]
mx.nd.ones((2, 2)).asnumpy()
print(json.dumps({"cpu": cpu, "rss_mib": rss, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  **counts}))
"""


def cpu_model() -> str:
    """The first CPU's model name, family and model (``hardware.cpu_info``): how these
    benchmarks name the CPU a figure came from."""
    cpu = hardware.cpu_info()
    return f"{cpu['model_name']}, family {cpu.get('family', '?')} model {cpu.get('model', '?')}"


def write_out(text: str, out) -> None:
    """A benchmark's report written to ``out`` (a path; nothing when None): how these
    benchmarks keep what they printed for ``benchmarks/results/``."""
    if out:
        with open(out, "w") as fh:
            fh.write(text)


def report(lines, out) -> int:
    """A benchmark's report lines printed and written to ``out`` (``write_out``); 0, its exit status."""
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(text, out)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rows = {"plain": [], "cached": [], "deferred": []}
    with tempfile.TemporaryDirectory(prefix="mxperf-worker-start-") as cache:
        env = spawn.with_package_path({**os.environ, "MXPERF_CACHE_DIR": cache})
        subprocess.run([args.python, "-m", "pytest_mxperf.workers.protocol", "--probe", os.path.join(cache, "p.json")],
                       env=env, check=True, capture_output=True)
        for _ in range(args.rounds):
            for mode in rows:
                out = subprocess.run([args.python, "-c", _CHILD, mode], env=env, check=True, capture_output=True,
                                     text=True).stdout
                rows[mode].append(json.loads(out.strip().splitlines()[-1]))
    lines = [f"# import mxnet in a fresh process: MXNet compiling its operator wrappers (plain), from the cache "
             f"(cached), from the cache with scipy.stats, requests and setuptools deferred (deferred)",
             f"# CPU: {cpu_model()}, {os.cpu_count()} CPUs; python {platform.python_version()}; "
             f"command: .venv/bin/python benchmarks/worker_start.py --rounds {args.rounds}",
             "mode    processes  cpu_s median [min, max]   rss_after_import_mib median  peak_mib median  wrappers from cache"]
    for mode, got in rows.items():
        cpu = [r["cpu"] for r in got]
        lines.append(f"{mode:<8} {len(got):>8}  {statistics.median(cpu):.2f} [{min(cpu):.2f}, {max(cpu):.2f}]"
                     f"{statistics.median(r['rss_mib'] for r in got):>22.1f}"
                     f"{statistics.median(r['peak_mib'] for r in got):>17.1f}"
                     f"{'  ' + str(got[0].get('hits', '-')):>21}")
    med = {mode: statistics.median(r["cpu"] for r in got) for mode, got in rows.items()}
    lines.append(f"saved per process: cache {med['plain'] - med['cached']:.2f} CPU-s, deferring "
                 f"{med['cached'] - med['deferred']:.2f} CPU-s more, {med['plain'] - med['deferred']:.2f} in all (medians)")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_out(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
