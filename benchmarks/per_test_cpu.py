"""Each test's CPU-seconds: its own process's and its children's, and which xdist work unit ran it.

As a pytest plugin (``benchmarks`` on ``PYTHONPATH``; it works under xdist, in every worker)::

    PYTHONPATH=benchmarks PER_TEST_CPU=acct.jsonl pytest tests -p per_test_cpu ...

appends one JSON line per test: its id, wall seconds, the CPU-seconds of the process that ran it
(``RUSAGE_SELF``) and of the children that process reaped meanwhile (``RUSAGE_CHILDREN``: the
sessions, workers and stand-ins a test starts and waits for), from the start of its setup to
the end of its teardown. Then::

    python benchmarks/per_test_cpu.py acct.jsonl

prints CPU-seconds per test module and per xdist work unit (``tests/conftest.work_unit``: the
real-MXNet unit runs its tests one after another on one worker, so its wall time is a floor
of the command's). It reads and writes nothing else.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional

OUT_VARIABLE = "PER_TEST_CPU"


def _cpu() -> tuple:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


try:
    import pytest
except ImportError:  # the summary needs no pytest
    pytest = None
else:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        w0, (s0, c0) = time.perf_counter(), _cpu()
        yield
        w1, (s1, c1) = time.perf_counter(), _cpu()
        path = os.environ.get(OUT_VARIABLE)
        if path:
            with open(path, "a") as f:
                f.write(json.dumps({"test": item.nodeid, "wall": w1 - w0, "own": s1 - s0,
                                    "children": c1 - c0}) + "\n")


def read(path) -> List[Dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def summary(rows: Iterable[Dict], unit_of: Callable[[str], str], top: int = 30) -> str:
    """The table: CPU-seconds per module (the ``top`` largest, then the rest), then per unit."""
    rows = list(rows)
    mods: Dict[str, List[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    units: Dict[str, List[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    unit_of_module: Dict[str, str] = {}
    for r in rows:
        module = r["test"].split("::")[0]
        m = mods[module]
        m[0] += 1
        m[1] += r["wall"]
        m[2] += r["own"]
        m[3] += r["children"]
        unit = unit_of(r["test"])
        shared = unit != module  # in a unit of several modules
        said = unit if shared else "its own"
        unit_of_module[module] = said if unit_of_module.get(module, said) == said else "mixed"
        u = units[unit if shared else "each module its own unit"]
        u[0] += 1
        u[1] += r["wall"]
        u[2] += r["own"] + r["children"]
    order = sorted(mods, key=lambda k: -(mods[k][2] + mods[k][3]))
    line = "{:<34} {:>5} {:>10} {:>7} {:>7} {:>7} {:>7}"
    out = [line.format("module", "tests", "unit", "wall-s", "own", "child", "CPU-s")]

    def row(name, m, unit=""):
        return line.format(name, m[0], unit, f"{m[1]:.1f}", f"{m[2]:.1f}", f"{m[3]:.1f}", f"{m[2] + m[3]:.1f}")
    for k in order[:top]:
        out.append(row(Path(k).name, mods[k], unit_of_module[k]))
    rest = [mods[k] for k in order[top:]]
    if rest:
        out.append(row(f"the other {len(rest)} modules", [sum(m[i] for m in rest) for i in range(4)]))
    out.append(row("all tests", [sum(m[i] for m in mods.values()) for i in range(4)]))
    out.append("")
    for u, (n, wall, cpu) in sorted(units.items()):
        out.append(f"{u:<26} {n:>5} tests  wall {wall:7.1f} s (one after another)  CPU {cpu:7.1f} s")
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 1:
        print("usage: python benchmarks/per_test_cpu.py ACCT.jsonl", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from conftest import work_unit
    print(summary(read(argv[0]), work_unit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
