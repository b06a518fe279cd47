"""benchmarks/per_test_cpu.py: each test's CPU-seconds, its own and its children's."""

import json
import os
import subprocess
import sys
from pathlib import Path

import stand_ins

P = stand_ins.repository_module("benchmarks/per_test_cpu.py")
BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

#: one test spins in its own process, one in a child it waits for: 0.3 CPU-seconds each,
#: however fast the CPU (process_time, not a wall-clock bound)
TESTS = '''
import subprocess, sys, time

SPIN = "import time\\nwhile time.process_time() < 0.3: pass"

def test_own():
    t0 = time.process_time()
    while time.process_time() - t0 < 0.3:
        pass

def test_child():
    subprocess.run([sys.executable, "-c", SPIN], check=True)

def test_nothing():
    pass
'''


def test_each_tests_own_and_childrens_cpu_is_a_line_and_the_summary_adds_them(tmp_path):
    (tmp_path / "test_spin.py").write_text(TESTS)
    out = tmp_path / "acct.jsonl"
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS), P.OUT_VARIABLE: str(out)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:mxperf",
                        "-p", "per_test_cpu", "test_spin.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {row["test"].split("::")[1]: row for row in P.read(out)}
    assert sorted(rows) == ["test_child", "test_nothing", "test_own"]
    assert rows["test_own"]["own"] >= 0.3 and rows["test_own"]["children"] < 0.3
    assert rows["test_child"]["children"] >= 0.3 and rows["test_child"]["own"] < 0.3
    assert rows["test_nothing"]["own"] + rows["test_nothing"]["children"] < 0.3
    assert all(row["wall"] >= 0 for row in rows.values())

    table = P.summary(P.read(out), lambda nodeid: "spin" if "child" in nodeid else nodeid.split("::")[0])
    total = sum(row["own"] + row["children"] for row in rows.values())
    (all_line,) = [line for line in table.splitlines() if line.startswith("all tests")]
    assert all_line.split()[2] == "3" and float(all_line.split()[-1]) == round(total, 1)
    units = {line.split()[0]: line for line in table.splitlines() if " tests  wall " in line}
    assert sorted(units) == ["each", "spin"] and units["spin"].split()[1] == "1"


def test_the_command_line_wants_one_file():
    assert P.main([]) == 2
