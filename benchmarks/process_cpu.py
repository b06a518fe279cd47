"""Where a command's CPU-seconds go, by the kind of process that spent them.

    python benchmarks/process_cpu.py [--interval 0.1] [--json FILE] -- COMMAND...

Runs COMMAND and, until it ends, reads ``/proc`` every ``--interval`` seconds: every process
descended from it, with its command line (read again after an ``exec``) and its CPU time
(user + system, ``/proc/PID/stat``) at the last reading. A process that starts and ends
between two readings is missed, so the table's total is below what ``/usr/bin/time`` says of
the whole command; the difference is printed. At the end: processes and CPU-seconds per kind
(the README's test command's kinds: xdist workers, inner pytest sessions, product processes
that import MXNet, stand-in workers, probes, pip and builds), the real-MXNet processes' median,
and the command's own exit status. Linux only; it reads, it never signals anything.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

TICK = os.sysconf("SC_CLK_TCK")
#: a product process that used more CPU than this imported MXNet (a stand-in worker, a
#: probe of a stand-in or a command-line tool stays far below: benchmarks/results/
#: zen3-sessions-2026-11-30c.txt, section 2)
MXNET_CPU_S = 1.5


def _stat(pid: int) -> Optional[Tuple[int, float, int]]:
    """(ppid, CPU seconds, start tick) of ``pid``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rfind(")") + 2:].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / TICK, int(fields[19])


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def kind(cmd: str, cpu: float) -> str:
    """The kind of process a command line names."""
    if "exec(eval(sys.stdin" in cmd:
        return "xdist workers (their own CPU)"
    if "stub_worker" in cmd or "fake_" in cmd:
        return "stand-in workers"
    if " pip " in f" {cmd} " or "pip-runner" in cmd or "-m build" in cmd or "pyproject_hooks" in cmd or "-m venv" in cmd:
        return "pip, builds, venvs"
    if "--probe" in cmd:
        return "probes" + (" (import MXNet)" if cpu >= MXNET_CPU_S else "")
    if "-mpytest" in cmd or "-m pytest " in cmd or cmd.endswith("-m pytest") or "bin/pytest" in cmd:
        return "pytest sessions (inner, and the outer one)"
    if "pytest_mxperf" in cmd or "mxnet" in cmd:
        return "product processes that import MXNet" if cpu >= MXNET_CPU_S else "product processes (light)"
    if "python" in cmd:
        return "other Python"
    return "other"


def watch(argv: List[str], interval: float) -> Tuple[int, Dict[Tuple[int, int], dict]]:
    """Run ``argv``; (its exit status, {(pid, start): {"cmd", "cpu"}} of it and its descendants)."""
    proc = subprocess.Popen(argv)
    seen: Dict[Tuple[int, int], dict] = {}
    ours = {proc.pid}
    while True:
        done = proc.poll() is not None
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            pid = int(name)
            st = _stat(pid)
            if st is None:
                continue
            ppid, cpu, start = st
            if pid not in ours and ppid not in ours:
                continue
            ours.add(pid)
            rec = seen.setdefault((pid, start), {"cmd": "", "cpu": 0.0})
            cmd = _cmdline(pid)
            if cmd:
                rec["cmd"] = cmd  # the newest: after an exec, what the process became
            rec["cpu"] = cpu
        if done:
            return proc.returncode, seen
        time.sleep(interval)


def table(seen: Dict[Tuple[int, int], dict], children_cpu: float) -> str:
    by: Dict[str, List[float]] = collections.defaultdict(list)
    for rec in seen.values():
        by[kind(rec["cmd"], rec["cpu"])].append(rec["cpu"])
    total = sum(sum(v) for v in by.values())
    lines = [f"{'kind':<48} {'processes':>9} {'CPU-s':>8} {'share':>6} {'median':>7}"]
    for k, v in sorted(by.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"{k:<48} {len(v):>9d} {sum(v):>8.1f} {100 * sum(v) / total:>5.1f}% {statistics.median(v):>7.2f}")
    lines.append(f"{'seen in all':<48} {sum(len(v) for v in by.values()):>9d} {total:>8.1f}")
    lines.append(f"{'the command and its children (getrusage)':<48} {'':>9} {children_cpu:>8.1f}"
                 f"   (not seen: {children_cpu - total:.1f} CPU-s, processes shorter than a reading)")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--json", default=None, help="write every process seen (cmd, CPU-s) here too")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command (put it after --)")
    t0 = time.time()
    rc, seen = watch(cmd, a.interval)
    wall = time.time() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = ru.ru_utime + ru.ru_stime
    print(f"command: {' '.join(cmd)}\nexit status {rc}, wall {wall:.1f} s, CPU {children:.1f} s "
          f"(user {ru.ru_utime:.1f}, system {ru.ru_stime:.1f})")
    print(table(seen, children))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([dict(rec, pid=pid) for (pid, _), rec in seen.items()], f)
    return rc


if __name__ == "__main__":
    sys.exit(main())
