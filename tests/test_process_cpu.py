"""benchmarks/process_cpu.py: a command's CPU-seconds by the kind of process that spent them."""

import subprocess
import sys
from pathlib import Path

import stand_ins

P = stand_ins.repository_module("benchmarks/process_cpu.py")
SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "process_cpu.py"

#: a child that spends 0.4 CPU-seconds (however fast the CPU), then sleeps 2 s, so that a
#: reading of /proc sees its whole CPU time however late the readings come, and exits 3
SPIN = "import time, sys\nwhile time.process_time() < 0.4: pass\ntime.sleep(2.0)\nsys.exit(3)"


def test_kinds_of_the_test_commands_processes():
    py = "/p/.venv/bin/python3"
    assert P.kind(f"{py} -u -c import sys;exec(eval(sys.stdin.readline()))", 200.0).startswith("xdist workers")
    assert P.kind(f"{py} -S /c/tests/stub_worker.py -m pytest_mxperf.workers.throughput s r", 0.1) == "stand-in workers"
    assert P.kind(f"{py} -m pytest_mxperf.workers.protocol --probe", 3.1) == "probes (import MXNet)"
    assert P.kind(f"{py} -m pytest_mxperf.workers.protocol --probe", 0.2) == "probes"
    assert P.kind(f"{py} -m pytest_mxperf.workers.throughput spec.json result.json", 2.9) == \
        "product processes that import MXNet"
    assert P.kind(f"{py} -m pytest_mxperf.cli.compare a.json b.json", 0.5) == "product processes (light)"
    assert P.kind(f"{py} -mpytest --basetemp=/tmp/x -p no:cacheprovider", 1.2).startswith("pytest sessions")
    assert P.kind(f"{py} -m pip install -q wheel.whl", 9.0) == "pip, builds, venvs"
    assert P.kind("/usr/bin/git clone a b", 0.1) == "other"


def test_a_childs_cpu_is_seen_and_the_commands_exit_status_kept():
    r = subprocess.run([sys.executable, str(SCRIPT), "--", sys.executable, "-c", SPIN],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "exit status 3" in r.stdout, r.stdout
    (row,) = [ln for ln in r.stdout.splitlines() if ln.startswith("other Python")]
    processes, cpu = int(row.split()[2]), float(row.split()[3])
    assert processes == 1 and cpu >= 0.39, row  # /proc counts in ticks of 0.01 s
    assert "(getrusage)" in r.stdout


def test_without_a_command_it_says_so():
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no command" in r.stderr, r.stderr
