"""A stand-in worker that misbehaves on purpose, for the runner's fault tests.

Usage: python fault_worker.py MODE SPEC.json RESULT.json
"""
import json
import os
import signal
import subprocess
import sys
import time

mode, spec_path, result_path = sys.argv[1:4]

if mode == "segfault":
    print("about to segfault", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)
elif mode == "hang":
    # A child that would outlive us if the runner only killed the worker itself.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(spec_path + ".child", "w") as fh:
        fh.write(str(child.pid))
    print(f"hanging with child {child.pid}", file=sys.stderr, flush=True)
    time.sleep(600)
elif mode == "orphan":
    # Leaves a grandchild running after a successful exit.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(spec_path + ".child", "w") as fh:
        fh.write(str(child.pid))
    with open(result_path, "w") as fh:
        json.dump({"status": "ok", "message": ""}, fh)
elif mode == "exit3":
    print("something went wrong: ValueError: bad thing", file=sys.stderr, flush=True)
    sys.exit(3)
elif mode == "garbage":
    with open(result_path, "w") as fh:
        fh.write("{not json")
elif mode == "oom-abort":
    print("terminate called after throwing an instance of 'std::bad_alloc'", file=sys.stderr, flush=True)
    os.abort()
elif mode == "ok":
    with open(result_path, "w") as fh:
        json.dump({"status": "ok", "message": "", "batches_per_round": 2, "round_seconds": [0.5, 0.4, 0.6],
                   "meta": {"mxnet_version": "fake"}}, fh)
else:
    sys.exit(f"unknown mode {mode}")
