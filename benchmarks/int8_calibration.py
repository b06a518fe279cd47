"""int8's 'naive' calibration through MXNet's reductions against numpy's (``workers/precision.py``
``_min_max_through_numpy``): the same graph, thresholds and quantized parameters, and what each
costs in a worker.

Alternating fresh processes (mxnet, numpy, mxnet, ...; ``--rounds`` of each per seed), each of
them as the throughput worker prepares an int8 cell (``answers.initializer`` weights of the
seed, the two calibration batches ``answers.input_batch(1000 + seed + k)``), then
``precision.convert_symbol(..., "int8")`` with MXNet's own collector (``mxnet``: the numpy
collector switched off) or the product's (``numpy``). Each process reports the conversion's wall
seconds, its resident high-water mark over the conversion (VmHWM reset before it) and a sha256
of what it made (the graph's JSON, every quantized parameter's bytes, in name order). The
digests of one seed must agree between the arms; a difference is said and the exit status is 1.

    .venv/bin/python benchmarks/int8_calibration.py --model resnet50_v2 --batch 8 --seeds 3 --rounds 2 \\
        --out benchmarks/results/int8-calibration-2026-11-29.txt
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import worker_start  # noqa: E402

_CHILD = r"""
import contextlib, hashlib, json, sys, time
import numpy as np
from pytest_mxperf.workers import answers, precision, protocol
from pytest_mxperf import zoo
arm, model, batch, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
mx = protocol.import_mxnet()
if arm == "mxnet":  # MXNet's own collector: the product's switched off
    precision._min_max_through_numpy = lambda mx, q: contextlib.nullcontext()
shape = (batch,) + tuple(zoo.get_model(model).input_shape)
sym = zoo.build_symbol(model, dtype="float32")
mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=[mx.cpu()])
mod.bind(data_shapes=[mx.io.DataDesc("data", shape, np.float32)], for_training=False)
mod.init_params(initializer=answers.initializer(mx, seed))
arg, aux = mod.get_params()
calib = np.concatenate([answers.input_batch(shape, 1000 + seed + k) for k in range(2)])
mx.nd.waitall()
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
t = time.perf_counter()
qsym, qarg, qaux = precision.convert_symbol(mx, sym, arg, aux, "int8", shape, mx.cpu(), seed=seed, calib_data=calib)
mx.nd.waitall()
seconds = time.perf_counter() - t
with open("/proc/self/status") as fh:
    hwm = [int(l.split()[1]) * 1024 for l in fh if l.startswith("VmHWM")][0]
h = hashlib.sha256(qsym.tojson().encode())
for params in (qarg, qaux):
    for name in sorted(params):
        h.update(name.encode())
        h.update(params[name].asnumpy().tobytes())
print(json.dumps({"seconds": seconds, "hwm": hwm, "digest": h.hexdigest()}))
"""


def one(python: str, arm: str, model: str, batch: int, seed: int) -> dict:
    from pytest_mxperf.proc import spawn
    env = spawn.with_package_path(dict(os.environ))
    r = subprocess.run([python, "-c", _CHILD, arm, model, str(batch), str(seed)], capture_output=True, text=True,
                       env=env, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"{arm} seed {seed}: exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50_v2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rows = {"mxnet": [], "numpy": []}
    lines = ["# int8 'naive' calibration: MXNet's reductions (mxnet) against numpy's (numpy), through "
             "precision.convert_symbol",
             f"# CPU: {worker_start.cpu_model()}, {os.cpu_count()} CPUs; python {sys.version.split()[0]}; "
             f"interpreter {args.python}",
             f"# command: python benchmarks/int8_calibration.py --model {args.model} --batch {args.batch} "
             f"--seeds {args.seeds} --rounds {args.rounds}" + (f" --python {args.python}" if args.python != sys.executable
                                                                 else ""),
             "seed  arm     seconds  hwm_mib  digest"]
    differ = []
    for seed in range(args.seeds):
        digests = {}
        for _ in range(args.rounds):
            for arm in ("mxnet", "numpy"):
                r = one(args.python, arm, args.model, args.batch, seed)
                rows[arm].append(r)
                digests.setdefault(arm, set()).add(r["digest"])
                lines.append(f"{seed:4d}  {arm:<6} {r['seconds']:8.2f} {r['hwm'] / 2 ** 20:8.1f}  {r['digest'][:16]}")
        if len(digests["mxnet"] | digests["numpy"]) != 1:
            differ.append(seed)
    for arm, rs in rows.items():
        lines.append(f"{arm}: {len(rs)} processes, conversion {statistics.median(r['seconds'] for r in rs):.2f} s "
                     f"median [{min(r['seconds'] for r in rs):.2f}, {max(r['seconds'] for r in rs):.2f}], "
                     f"high-water mark {statistics.median(r['hwm'] for r in rs) / 2 ** 20:.1f} MiB median")
    lines.append("the same bytes in every process of a seed: " + ("yes" if not differ else f"NO (seeds {differ})"))
    worker_start.report(lines, args.out)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
