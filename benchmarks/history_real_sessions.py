"""A real history on this machine: sessions of the CPU scoring suite under three MXNet
releases in turn (oldest first, as an upgrade path would go), each appended to one history
store, then its change points.

    python benchmarks/history_real_sessions.py --store /tmp/real-history.sqlite \
        --release 1.6.0=PYTHON --release 1.8.0.post0=PYTHON --release 1.9.1=PYTHON \
        --sessions 3,3,4 [--models alexnet,resnet50_v2] [--batch-sizes 2] [--lock /tmp/machine.lock]

Each PYTHON is an interpreter with that MXNet (e.g. the cached reference venvs that
``--perf-reference mxnet==X`` builds). Prints each session's exit code and time, then
``python -m pytest_mxperf.history changes`` on the store.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine_lock import machine_lock  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--release", action="append", required=True, help="VERSION=PYTHON, oldest first")
    ap.add_argument("--sessions", required=True, help="sessions per release, e.g. 3,3,4")
    ap.add_argument("--models", default="alexnet,resnet50_v2")
    ap.add_argument("--batch-sizes", default="2")
    ap.add_argument("--lock", default=None)
    args = ap.parse_args()
    releases = [r.split("=", 1) for r in args.release]
    counts = [int(n) for n in args.sessions.split(",")]
    for (version, python), n in zip(releases, counts):
        for i in range(n):
            cmd = [sys.executable, "-m", "pytest", "perf_tests/test_scoring.py", "-m", "cpu", "-q", "-p",
                   "no:cacheprovider", "--perf-models", args.models, "--perf-batch-sizes", args.batch_sizes,
                   "--perf-python", python, "--perf-store", args.store]
            with machine_lock(args.lock):
                t0 = time.time()
                r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            kept = [ln for ln in r.stdout.splitlines() if "history store" in ln or "new step" in ln]
            print(f"{time.strftime('%H:%M:%S')} mxnet {version} session {i + 1}/{n}: exit {r.returncode}, "
                  f"{time.time() - t0:.0f} s; " + " | ".join(kept), flush=True)
    out = subprocess.run([sys.executable, "-m", "pytest_mxperf.history", "--store", args.store, "changes"],
                         capture_output=True, text=True)
    print(out.stdout + out.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
