"""How long a ps-lite cluster takes to stop after one of its processes died (a script, not a
test: the figure is this machine's).

``pytest_mxperf.measure.cluster`` promises that once a worker dies with an error, every other
process of the cluster is gone within ``KILL_WITHIN_SECONDS`` of the poll that saw the death
(SIGTERM, then SIGKILL after ``term_grace``); the result's ``teardown_seconds`` is that time.
tests/test_dist.py checks what holds on any machine (the cluster is stopped, every process
reaped, no port left listening, the teardown timed); this script measures the seconds, for the
two ways tests/test_dist.py kills a cluster, ``--repeats`` times each:

* ``error``: a worker raises after its 3rd update (tests/failing_dist_worker.py);
* ``sigkill``: a worker is SIGKILLed from outside after its 5th step.

    .venv/bin/python benchmarks/dist_teardown.py --repeats 3 --lock /tmp/machine.lock
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from machine_lock import machine_lock  # noqa: E402
from pytest_mxperf.measure import cluster as dist  # noqa: E402
from pytest_mxperf.measure import runner  # noqa: E402

LAUNCHER = [sys.executable, "-m", "pytest_mxperf.measure.cluster"]
WORKER = {"model": "mlp", "global_batch": 128, "steps": 100000, "seed": 3, "learning_rate": 0.1,
          "momentum": 0.9, "report_every": 5, "step_sleep": 0.02}
TESTS = HERE.parent / "tests"


def _kill_worker_after(index: int, step: int, within: float, done: threading.Event) -> None:
    """SIGKILL worker ``index`` of the running cluster once its log shows ``step``."""
    end = time.monotonic() + within
    spec_name = f"worker{index}.spec.json"
    while not done.is_set() and time.monotonic() < end:
        for proc in psutil.Process().children(recursive=True):
            try:
                cmd = proc.cmdline()
            except psutil.Error:
                continue
            specs = [Path(a) for a in cmd if Path(a).name == spec_name]
            if dist.WORKER_MODULE not in cmd or not specs:
                continue
            try:
                text = specs[0].with_name(f"worker{index}.log").read_text(errors="replace")
            except OSError:
                continue
            seen = [int(m) for m in re.findall(r"mxperf-dist-worker: rank=\d+ step=(\d+)", text)]
            if seen and max(seen) >= step:
                try:
                    proc.send_signal(signal.SIGKILL)
                except psutil.Error:
                    pass
                return
        done.wait(0.05)


def one(kind: str) -> dict:
    env = dist.base_env()
    spec = {"kvstore": "dist_sync", "num_workers": 2, "worker": WORKER, "timeout": 120}
    done = threading.Event()
    killer = None
    if kind == "error":
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(TESTS)])
        spec["worker_module"] = "failing_dist_worker"
    else:
        killer = threading.Thread(target=_kill_worker_after, args=(1, 5, 150, done), daemon=True)
        killer.start()
    try:
        out = runner.run_process(LAUNCHER, spec, timeout=180, env=env)
    finally:
        done.set()
        if killer is not None:
            killer.join(timeout=10)
    return out.payload or {"status": out.status, "message": out.message}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kinds", nargs="+", default=["error", "sigkill"], choices=["error", "sigkill"])
    ap.add_argument("--lock", default=None, help="hold this machine lock (flock) while measuring")
    a = ap.parse_args(argv)
    worst = 0.0
    with machine_lock(a.lock):
        for kind in a.kinds:
            seen = []
            for i in range(a.repeats):
                res = one(kind)
                t = res.get("teardown_seconds")
                print(f"{kind:8} repeat {i + 1}: status {res.get('status')}, teardown "
                      f"{'-' if t is None else f'{t:.2f} s'}, load average {os.getloadavg()[0]:.1f}", flush=True)
                if t is not None:
                    seen.append(t)
            if seen:
                worst = max(worst, max(seen))
                print(f"{kind:8} teardown median {statistics.median(seen):.2f} s, max {max(seen):.2f} s "
                      f"(promised within {dist.KILL_WITHIN_SECONDS:g} s)", flush=True)
    return 0 if worst <= dist.KILL_WITHIN_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
