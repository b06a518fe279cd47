"""What starting a child costs the process that starts it, through ``proc.spawn.start``: a child
that runs a module of this package arms its parent-death signal itself (no ``preexec_fn``:
``subprocess`` starts it by vfork), any other child is armed between fork and exec (a full
fork of the parent). Parents of several sizes (resident memory, touched), as a session's
pytest process or a test run's xdist worker grows.

Alternating the two kinds (``--starts`` each per parent size, in turns): the wall time of the
``spawn.start`` call (the parent is blocked in it until the child has exec'd) and the parent's
own CPU (user + system, ``resource.getrusage``) around it; each child is then waited for, not
timed. Both children run the same interpreter and exit at once: ``-m
pytest_mxperf.proc.parent_death`` (arms itself) and ``-c pass`` (armed by ``preexec_fn``).

    .venv/bin/python benchmarks/spawn_cost.py --sizes 100 250 400 --starts 60 \\
        --out benchmarks/results/spawn-vfork-zen3-2026-11-30.txt
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import psutil  # noqa: E402

from pytest_mxperf.machine import hardware  # noqa: E402
from pytest_mxperf.proc import spawn  # noqa: E402

KINDS = {"itself (vfork)": [sys.executable, "-m", "pytest_mxperf.proc.parent_death"],
         "preexec (fork)": [sys.executable, "-c", "pass"]}


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one_start(command, log: Path):
    """(wall s, parent CPU s) of one ``spawn.start``; the child is then reaped."""
    c0, t0 = _cpu(), time.perf_counter()
    proc = spawn.start(command, env=spawn.with_package_path(os.environ), log_path=log)
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    rc = proc.wait()
    if rc != 0:
        raise SystemExit(f"{command} exited {rc}: {log.read_text()[-400:]}")
    return wall, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 250, 400], help="parent ballast, MiB")
    ap.add_argument("--starts", type=int, default=60, help="starts of each kind per size")
    ap.add_argument("--out", help="also write the table here")
    a = ap.parse_args(argv)
    hw = hardware.hardware_info(dict(os.environ))
    lines = [f"# spawn.start's cost to the parent: {' '.join(sys.argv)}",
             f"# CPU: {hw.cpu_model}, {hw.vcpus} vCPUs; python {platform.python_version()}; "
             f"{a.starts} starts of each kind per size, alternating",
             "parent_rss_mib  kind             start_ms median [p10, p90]   parent_cpu_ms median [p10, p90]"]
    ballast = []
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "child.log"
        for size in a.sizes:
            while len(ballast) < size:
                b = bytearray(1 << 20)
                b[::4096] = b"x" * len(b[::4096])  # touched: resident, as a grown process is
                ballast.append(b)
            rss = psutil.Process().memory_info().rss / 2 ** 20
            seen = {k: ([], []) for k in KINDS}
            for _ in range(a.starts):
                for kind, command in KINDS.items():
                    wall, cpu = one_start(command, log)
                    seen[kind][0].append(wall * 1e3)
                    seen[kind][1].append(cpu * 1e3)
            for kind, (walls, cpus) in seen.items():
                def q(xs):
                    d = statistics.quantiles(xs, n=10)
                    return f"{statistics.median(xs):7.2f} [{d[0]:6.2f}, {d[-1]:6.2f}]"
                lines.append(f"{rss:14.0f}  {kind:15s}  {q(walls)}      {q(cpus)}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        Path(a.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
