"""Could a worker start by fork from a process that has imported MXNet, instead of by exec and
its own import? What such a child runs with, and what its start costs, against a worker's.

Alternating (exec, fork, exec, fork, ...; ``--rounds`` of each), one child at a time, each
running the same kernel (a 3x3 convolution of 32 x 64 x 28 x 28 in float32 on cpu(0), the
probe's, ``workers/protocol.speed_kernel``) for ``--calls`` timed calls, each ending in
``mx.nd.waitall()``, after three untimed ones:

- exec: ``python -c`` that imports MXNet as a worker does (``protocol.import_mxnet``, from the
  op cache) and runs the kernel;
- fork: a child forked from one resident process that imported MXNet the same way and ran
  nothing (no operator, so no OpenMP team yet), running the same function.

Per child (``os.times`` of the child itself; a forked child's start at zero): the CPU-seconds
it spent before the kernel (exec: interpreter start and import; fork: none), all it spent
besides the timed calls (start, arrays, untimed calls, and for a forked child the copies of
the pages it writes that its parent holds), the OpenMP team size ``threadpoolctl`` reports, the CPU/wall ratio over the timed calls (how many
threads did the work) and the fastest call. The workers' environment is the suite's for a
``threads=auto`` cell on this machine (``OMP_NUM_THREADS`` = the cores, as
``machine/topology.py`` fills it), set before either kind imports MXNet: MXNet and OpenMP read
it at import, so a forked child runs with its parent's, never one of its own.

This is a check of what a forked child runs with and costs, not the alternating comparison of
a cell's figures both ways that a change of how workers start would need first.

    .venv/bin/python benchmarks/forked_workers.py --rounds 10 \\
        --out benchmarks/results/forked-workers-zen3-2026-11-30.txt
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pytest_mxperf.machine import topology  # noqa: E402
from pytest_mxperf.proc import spawn  # noqa: E402
from worker_start import cpu_model, report  # noqa: E402  (this directory: the script's own)

#: the kernel a child runs, and what it reports (one JSON line on stdout)
KERNEL = r'''
def kernel(mx, calls, before_cpu):
    import json, os, time
    from pytest_mxperf.workers import protocol
    convolution = protocol.speed_kernel(mx)

    def call():
        convolution()
        mx.nd.waitall()
    for _ in range(3):
        call()
    best, w0, c0 = float("inf"), time.perf_counter(), time.process_time()
    for _ in range(calls):
        t = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t)
    timed_cpu = time.process_time() - c0
    ratio = timed_cpu / (time.perf_counter() - w0)
    t = os.times()
    return {"before_cpu": before_cpu, "untimed_cpu": t.user + t.system - timed_cpu,
            "omp": protocol.thread_pools()["openmp"], "cpu_per_wall": ratio, "best_s": best, "pid": os.getpid()}
'''

EXEC_CHILD = KERNEL + r'''
import json, os, sys
from pytest_mxperf.workers import protocol
mx = protocol.import_mxnet()
t = os.times()
print(json.dumps(kernel(mx, int(sys.argv[1]), t.user + t.system)), flush=True)
'''

#: the resident parent: imports MXNet, then forks one child per line it reads on stdin
FORK_SERVER = KERNEL + r'''
import json, os, sys
from pytest_mxperf.workers import protocol
mx = protocol.import_mxnet()
print("ready", flush=True)
for line in sys.stdin:
    calls = int(line)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        t = os.times()  # a forked child's own times start at zero
        out = kernel(mx, calls, t.user + t.system)
        os.write(w, (json.dumps(out) + "\n").encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        text = fh.read()
    os.waitpid(pid, 0)
    print(text.strip(), flush=True)
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--out")
    args = ap.parse_args(argv)

    env = spawn.with_package_path(dict(os.environ, OMP_NUM_THREADS=str(topology.default_threads("auto", 1))))
    server = subprocess.Popen([sys.executable, "-c", FORK_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        if server.stdout.readline().strip() != "ready":
            raise SystemExit("the fork server did not start")
        rows = {"exec": [], "fork": []}
        for _ in range(args.rounds):
            out = subprocess.run([sys.executable, "-c", EXEC_CHILD, str(args.calls)], env=env, capture_output=True,
                                 text=True, check=True)
            rows["exec"].append(json.loads(out.stdout.strip().splitlines()[-1]))
            server.stdin.write(f"{args.calls}\n")
            server.stdin.flush()
            rows["fork"].append(json.loads(server.stdout.readline()))
    finally:
        server.stdin.close()
        server.wait(timeout=60)

    lines = [f"# forked vs exec'd workers: what a child runs with and what its start costs ({time.strftime('%Y-%m-%d')})",
             f"# CPU: {cpu_model()}; {os.cpu_count()} vCPUs; python {platform.python_version()}; "
             f"OMP_NUM_THREADS={env['OMP_NUM_THREADS']}",
             f"# command: {' '.join(['benchmarks/forked_workers.py'] + list(argv if argv is not None else sys.argv[1:]))}",
             f"# {args.rounds} children of each kind, alternating; {args.calls} timed calls each after 3 untimed",
             "",
             "kind  children  CPU-s before the kernel  CPU-s besides the timed calls  OpenMP team  CPU/wall  "
             "fastest call ms",
             "                (median, min-max)        (median, min-max)                          (median)  (median, min-max)"]
    for kind, rs in rows.items():
        before = [r["before_cpu"] for r in rs]
        untimed = [r["untimed_cpu"] for r in rs]
        best = [1000 * r["best_s"] for r in rs]
        lines.append(f"{kind:<5} {len(rs):>8}  {statistics.median(before):.3f} ({min(before):.3f}-{max(before):.3f})"
                     f"{'':<4}{statistics.median(untimed):.3f} ({min(untimed):.3f}-{max(untimed):.3f}){'':<10}"
                     f"{sorted({r['omp'] for r in rs})!s:<12} {statistics.median(r['cpu_per_wall'] for r in rs):.2f}"
                     f"{'':<6}{statistics.median(best):.1f} ({min(best):.1f}-{max(best):.1f})")
    lines += ["", "per child, in the order they ran:"]
    for i in range(args.rounds):
        for kind in rows:
            r = rows[kind][i]
            lines.append(f"  {i:>2} {kind:<5} before {r['before_cpu']:.3f} besides {r['untimed_cpu']:.3f} CPU-s  omp {r['omp']}  "
                         f"cpu/wall {r['cpu_per_wall']:.2f}  fastest {1000 * r['best_s']:.2f} ms")
    return report(lines, args.out)


if __name__ == "__main__":
    sys.exit(main())
