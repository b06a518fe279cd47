"""The throughput worker with one cell that misbehaves on purpose, for the tests of workers
that measure several cells (tests/test_multicell.py).

Usage: python dying_cell_worker.py MODE SPEC.json RESULT.json. The cell whose batch size is
3 does what MODE says once MXNet is imported and it begins: ``kill`` (SIGKILL, as the
kernel's OOM killer would), ``hang`` (sleeps through its warm-up bound) or ``raise`` (a
Python error, as MXNet raises one); every other cell is measured as usual.
"""
import os
import signal
import sys
import time

from pytest_mxperf.workers import throughput

mode = sys.argv[1]
_measure_cell = throughput.measure_cell


def measure_cell(mx, spec, process_meta):
    if spec["workload"]["batch_size"] == 3:
        if mode == "kill":
            print("killing myself in the middle of a cell", file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        elif mode == "hang":
            time.sleep(600)
        elif mode == "raise":
            raise RuntimeError("MXNetError: a cell that cannot be measured")
    return _measure_cell(mx, spec, process_meta)


throughput.measure_cell = measure_cell
sys.exit(throughput.main(sys.argv[2:]))
