"""Why the suite and benchmark_score.py differ at AlexNet b1 (#26 part 2): the two ways of
timing, decomposed inside one process.

benchmark_score.py (MXNet 1.9.1, unmodified) binds a network, runs 5 untimed batches, then
times 10 batches, waiting for every batch's outputs (``output.wait_to_read()``). The suite's
worker warms up for about a second and times rounds of k batches, each round ending in one
``mx.nd.waitall()`` (workers/throughput.py). Each process of this script, in the environment
the suite gives its workers (``runner.build_env``):

1. ``first``: benchmark_score.py's own ``score()`` (imported from the script, as released),
   called once: the figure the script prints;
2. the same network bound again as ``score()`` binds it, warmed up for 1 s (untimed), then
   ``--alternations`` times, in alternating order:
   ``sync``:      10 batches, each followed by ``wait_to_read()`` of its outputs (the script's
                  loop, in steady state);
   ``pipelined``: the suite's round, ``protocol.ModuleSteps.timed(k)``: k batches (about
                  0.2 s) then one ``waitall()``;
3. ``again``: ``score()`` once more, in the now warm process.

Per cell, over the processes (the unit of replication): the median of each, and the ratios
pipelined/sync (what waiting for every batch costs), sync/first (steady state against the
script's first window) and pipelined/first (the suite's way against the script's figure).

    .venv/bin/python benchmarks/score_window.py --processes 6 --lock /tmp/machine.lock \\
        --example-dir /work/mxnet-example-1.9.1/example/image-classification \\
        --out benchmarks/results/score-window-2026-11-26.txt
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine_lock import machine_lock  # noqa: E402
from benchmarks.same_figures import NETWORKS, SOURCE, Foreign, wait_quiet  # noqa: E402
from pytest_mxperf.measure import runner  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402

CHILD = r'''
import json, sys, time
example_dir, network, batch, alternations = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, example_dir)
sys.argv = ["benchmark_score.py", "--network", network, "--batch-size", str(batch)]
import logging
import benchmark_score as bs          # the script as released: its main block does not run on import
logging.disable(logging.CRITICAL)
mx = bs.mx
cpu = mx.cpu()
first = bs.score(network=network, dev=cpu, batch_size=batch, num_batches=10, dtype="float32")

# the same module as score() binds it
sym, data_shape = bs.get_symbol(network, batch, "float32")
mod = mx.mod.Module(symbol=sym, context=cpu)
mod.bind(for_training=False, inputs_need_grad=False, data_shapes=data_shape)
mod.init_params(initializer=mx.init.Xavier(magnitude=2.))
data = [mx.random.uniform(-1.0, 1.0, shape=shape, ctx=cpu) for _, shape in mod.data_shapes]
b = mx.io.DataBatch(data, [])

def sync(n):
    mx.nd.waitall()
    t0 = time.perf_counter()
    for _ in range(n):
        mod.forward(b, is_train=False)
        for o in mod.get_outputs():
            o.wait_to_read()
    return time.perf_counter() - t0

# the suite's own round (workers/protocol.py): n forward passes between two waitall()
from pytest_mxperf.workers.protocol import ModuleSteps
steps = ModuleSteps()
steps.mx, steps.mod, steps.batch, steps.train = mx, mod, b, False
pipelined = steps.timed

t_w = time.perf_counter()
per = []
while time.perf_counter() - t_w < 1.0 or len(per) < 3:
    per.append(sync(1))
k = max(1, round(0.2 / min(per[-2:])))
s, p = [], []
for i in range(alternations):
    if i % 2 == 0:
        s.append(sync(10)); p.append(pipelined(k))
    else:
        p.append(pipelined(k)); s.append(sync(10))
again = bs.score(network=network, dev=cpu, batch_size=batch, num_batches=10, dtype="float32")
print(json.dumps({"first": first, "again": again, "k": k, "sync": [10 * batch / x for x in s],
                  "pipelined": [k * batch / x for x in p]}))
'''


def one_process(python, example_dir, model, batch, alternations):
    env, _ = runner.build_env(Workload(model, batch_size=batch))
    out = subprocess.run([python, "-c", CHILD, str(example_dir), NETWORKS[model], str(batch), str(alternations)],
                         env=env, cwd=str(example_dir), capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{model} b{batch}: exit {out.returncode}: {out.stderr.strip()[-1500:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["sync_med"], r["pipelined_med"] = statistics.median(r["sync"]), statistics.median(r["pipelined"])
    return r


def main(argv=None):
    today = datetime.date.today().isoformat()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--alternations", type=int, default=20)
    ap.add_argument("--cells", default="alexnet:1,alexnet:8", help="model:batch, comma-separated")
    ap.add_argument("--example-dir", type=Path, default=Path("/work/mxnet-example-1.9.1/example/image-classification"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--lock", default=None)
    ap.add_argument("--quiet-cores", type=float, default=0.05)
    ap.add_argument("--max-redo", type=int, default=4)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / f"score-window-{today}.txt"))
    a = ap.parse_args(argv)
    cells = [(m, int(b)) for m, b in (c.split(":") for c in a.cells.split(","))]
    started = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    rows, raw = {}, []
    for i in range(a.processes):
        for model, batch in (cells if i % 2 == 0 else cells[::-1]):
            for attempt in range(a.max_redo + 1):
                with machine_lock(a.lock):
                    wait_quiet(a.quiet_cores, 3600.0, f"{model} b{batch}")
                    f = Foreign()
                    r = one_process(a.python, a.example_dir, model, batch, a.alternations)
                    foreign = f.cores()
                disturbed = foreign >= a.quiet_cores
                line = (f"process {i + 1} {model} b{batch}: first {r['first']:.2f}  sync {r['sync_med']:.2f}  "
                        f"pipelined {r['pipelined_med']:.2f} (k={r['k']})  again {r['again']:.2f}  "
                        f"other cores {foreign:.2f}" + ("  DISTURBED, discarded" if disturbed else ""))
                print(line, flush=True)
                raw.append(line)
                if not disturbed or attempt == a.max_redo:
                    rows.setdefault((model, batch), []).append(r)
                    break
    ended = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    med = statistics.median
    out = [f"# Timing windows: benchmark_score.py against the suite's rounds, in one process (#26 part 2), "
           f"{started} - {ended}", "",
           "command: " + " ".join([Path(sys.executable).name, *sys.argv]),
           f"benchmark_score.py: {SOURCE}; its score() imported and called as released",
           f"processes per cell: {a.processes} (the unit of replication), {a.alternations} alternations of "
           f"sync / pipelined in each; worker environment: runner.build_env (the suite's)",
           "quiet machine: the machine lock held per process; a process other work disturbed "
           f"(>= {a.quiet_cores} cores beside it, /proc/stat) is measured again", "",
           "img/s, medians over processes; ratios: the median over processes of each process's ratio", "",
           f"{'cell':12s} {'first':>8s} {'sync':>8s} {'pipelined':>9s} {'again':>8s}   "
           f"{'pipel/sync':>10s} {'sync/first':>10s} {'pipel/first':>11s} {'again/first':>11s}"]
    for (model, batch), rs in rows.items():
        def m(key):
            return med(r[key] for r in rs)

        def ratio(x, y):
            return med(r[x] / r[y] for r in rs)
        out.append(f"{model + ' b' + str(batch):12s} {m('first'):8.2f} {m('sync_med'):8.2f} "
                   f"{m('pipelined_med'):9.2f} {m('again'):8.2f}   {ratio('pipelined_med', 'sync_med'):10.3f} "
                   f"{ratio('sync_med', 'first'):10.3f} {ratio('pipelined_med', 'first'):11.3f} "
                   f"{ratio('again', 'first'):11.3f}")
        out.append(f"{'':12s} pipelined/sync per process: "
                   + ", ".join(f"{r['pipelined_med'] / r['sync_med']:.3f}" for r in rs))
        out.append(f"{'':12s} sync/first per process:     "
                   + ", ".join(f"{r['sync_med'] / r['first']:.3f}" for r in rs))
    out += ["", "## Every process", "", *raw]
    Path(a.out).write_text("\n".join(out) + "\n")
    print("\n".join(out[:14 + 3 * len(rows)]))


if __name__ == "__main__":
    main()
