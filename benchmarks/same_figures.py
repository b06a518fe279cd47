"""Same figures (#26 part 2): a cell measured inside a multi-cell worker against the same
cell measured alone, and the suite against MXNet 1.9.1's own unmodified
``example/image-classification/benchmark_score.py``.

Six CPU scoring cells (AlexNet, Inception-BN, ResNet-50 v2 at batch 1 and 8 on cpu:0):

a. multi-cell vs alone: ``--pairs`` pairs; in each, one ``runner.run_cells`` process
   measures the six cells (their order rotated by one from pair to pair) and each cell is
   measured alone in its own ``runner.run_workload`` process; which side goes first
   alternates (AB, BA, ...). Per cell: the ratio multi/alone of each pair and their median
   (target 0.98-1.02). ``--alone alexnet:1`` measures only that cell alone (more pairs of one
   cell for the time of a few); the multi-cell process still measures all six.
b. the suite vs benchmark_score.py: per round and cell, the suite's ``run_workload`` and
   ``python benchmark_score.py --network NET --batch-size B`` (the script as released,
   run from its own directory, one network and batch an invocation, in the environment the
   suite gives its workers: ``runner.build_env``), which first alternating from round to
   round. Per cell: the median ratio suite/benchmark_score (target 0.97-1.03). The suite's
   figure is its own (batch / median seconds per batch of its timed rounds); the mean over
   its timed rounds (images / timed seconds, benchmark_score's estimator) is shown beside.

Before measuring, a worker-like subprocess compares the graphs: ``zoo.build_symbol(name)``
against benchmark_score.py's ``get_symbol`` (parameters, auxiliary states, MACs, operator
counts, and a structural hash of the whole graph, names ignored).

Every pair (part a) and round (part b) holds the machine lock (``--lock``), so nothing else
measures while it runs; other work gets the machine between them. What does not take the lock
(another engineer's tests) is caught from /proc/stat: each pair / cell waits until other
processes use under ``--quiet-cores``, and one they disturbed is measured again and listed as
discarded. Every measurement is appended to ``--raw`` as it is made; ``--resume`` continues a
stopped run from it (and, when nothing is left to measure, rewrites the report).

    .venv/bin/python benchmarks/same_figures.py --pairs 5 --lock /tmp/machine.lock \\
        --example-dir /work/mxnet-example-1.9.1/example/image-classification \\
        --out benchmarks/results/same-figures-2026-11-25.txt
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.machine_lock import machine_lock  # noqa: E402
from pytest_mxperf.measure import runner  # noqa: E402
from pytest_mxperf.model.workload import Workload  # noqa: E402

#: the suite's zoo name -> benchmark_score.py's --network
NETWORKS = {"alexnet": "alexnet", "inception-bn": "inception-bn", "resnet50_v2": "resnet-50"}
SOURCE = ("apache/mxnet, tag 1.9.1 = commit 3f8f3be9987e259491ddc5a78aa9c6903e0b21e3, "
          "example/image-classification/benchmark_score.py with symbols/ and common/ of that directory, "
          "unmodified")
#: other cells a multi-cell worker could measure together (#37 part 2): the default session's
#: weak-scaling cells, by environment (a process's cells share one: ``runner.run_cells``), as
#: perf_tests/test_multi_device.py asks for them
CELL_SETS = {
    "weak-scaling-1ctx": tuple(Workload(model=m, mode="train", batch_size=256, contexts=("cpu:0",), threads="auto")
                               for m in ("lenet", "mlp")),
    "weak-scaling-2ctx": tuple(Workload(model=m, mode="train", batch_size=256, contexts=("cpu:0", "cpu:1"),
                                        threads="per-context", kvstore="device") for m in ("lenet", "mlp")),
    # perf_tests/test_cpu_precision.py's cells: int8 and float16 beside float32 (float16 has no CPU
    # kernels in MXNet 1.x: unsupported in its first batch, a figure for none); --alone
    # resnet50_v2:8:int8,resnet50_v2:8:float32 compares the two that give one
    "precision": tuple(Workload(model="resnet50_v2", mode="score", batch_size=8, contexts=("cpu:0",), dtype=d)
                       for d in ("int8", "float16", "float32")),
}
MULTI_TARGET = (0.98, 1.02)
SCORE_TARGET = (0.97, 1.03)
_IPS = re.compile(r"batch size\s+(\d+), dtype (\w+), images/sec: ([0-9.eE+-]+)")

# Run in a worker-like subprocess (MXNet imported there, never here): the suite's zoo
# symbols against benchmark_score.py's get_symbol, as benchmark_score.py calls it.
GRAPH_CHECK = r'''
import hashlib, json, sys, warnings
from importlib import import_module
sys.path.insert(0, sys.argv[1])
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import mxnet as mx
from pytest_mxperf import zoo
from pytest_mxperf.zoo import count

PAIRS = json.loads(sys.argv[2])
# parameter defaults of MXNet 1.9.1's operators, so that an attribute left out and the same
# value written out compare equal
DEFAULTS = {
    "Convolution": {"stride": "(1,1)", "pad": "(0,0)", "dilate": "(1,1)", "num_group": "1", "no_bias": "False"},
    "Pooling": {"stride": "(1,1)", "pad": "(0,0)", "global_pool": "False", "pooling_convention": "valid",
                "count_include_pad": "None", "p_value": "None"},
    "FullyConnected": {"no_bias": "False", "flatten": "True"},
    "BatchNorm": {"eps": "0.001", "fix_gamma": "True", "use_global_stats": "False", "axis": "1",
                  "output_mean_var": "False"},
    "Dropout": {"mode": "training", "axes": "()"},
}
# what does not change the work done: cuDNN / workspace hints, training-only momentum
NO_WORK = {"workspace", "cudnn_tune", "cudnn_off", "layout", "momentum", "name"}

def norm(v):
    v = str(v).replace(" ", "")
    if v[:1] in "([":
        v = "(" + v.strip("()[]") + ")"
    return {"true": "True", "false": "False"}.get(v, v)

def attrs(n, loose):
    a = {k: norm(v) for k, v in (n.get("attrs") or {}).items() if not k.startswith("__")}
    full = dict({k: norm(v) for k, v in DEFAULTS.get(n["op"], {}).items()}, **a)
    out = {k: v for k, v in full.items() if k not in NO_WORK}
    if "eps" in out:
        out["eps"] = "%.6g" % float(out["eps"])
    if "p" in out:
        out["p"] = "%.6g" % float(out["p"])
    if loose:
        out.pop("eps", None)  # a constant added to the variance: the same work
        if n["op"] == "Pooling" and out.get("global_pool") == "True":
            for k in ("kernel", "stride", "pad", "pooling_convention"):  # ignored by a global pool
                out.pop(k, None)
    return out

def structure(sym, loose):
    """A hash of the whole graph (op, work attributes, inputs; names ignored); ``loose``: eps
    and a global pool's ignored kernel left out, and identity copies passed through."""
    g = json.loads(sym.tojson())
    h = []
    for n in g["nodes"]:
        if n["op"] == "null":
            nm = n["name"]
            h.append("data" if nm == "data" else ("label" if nm.endswith("label") else "param"))
            continue
        ins = [h[e[0]] + ":" + str(e[1]) for e in n["inputs"]]
        if loose and n["op"] in ("_copy", "identity"):
            h.append(h[n["inputs"][0][0]])
            continue
        if n["op"] in ("elemwise_add", "_Plus", "_plus", "ElementWiseSum", "add_n"):
            ins = sorted(ins)
        op = {"_Plus": "elemwise_add", "_plus": "elemwise_add"}.get(n["op"], n["op"])
        h.append(hashlib.sha1(json.dumps([op, attrs(n, loose), ins], sort_keys=True).encode()).hexdigest())
    return h[g["heads"][0][0]][:12]

def facts(sym):
    g = json.loads(sym.tojson())
    ops, eps = {}, {}
    for n in g["nodes"]:
        if n["op"] != "null":
            ops[n["op"]] = ops.get(n["op"], 0) + 1
        if n["op"] == "BatchNorm":
            e = "%.6g" % float((n.get("attrs") or {}).get("eps", 1e-3))
            eps[e] = eps.get(e, 0) + 1
    pools = [attrs(n, False) for n in g["nodes"] if n["op"] == "Pooling" and norm((n.get("attrs") or {}).get("global_pool", "False")) == "True"]
    _, _, aux = sym.infer_shape(data=(1, 3, 224, 224))
    return {"params": count.count_params(sym, (3, 224, 224)), "aux": sum(count.prod(s) for s in aux),
            "macs": sum(m for _, _, m in count.mac_layers(sym, (3, 224, 224))), "ops": ops, "bn_eps": eps,
            "global_pools": pools, "exact": structure(sym, False), "loose": structure(sym, True)}

out = {}
for suite_name, network in PAIRS:
    # as benchmark_score.get_symbol does it
    num_layers, module = 0, network
    if "resnet" in network:
        num_layers, module = int(network.split("-")[1]), network.split("-")[0]
    ref = import_module("symbols." + module).get_symbol(num_classes=1000, image_shape="3,224,224",
                                                         num_layers=num_layers, dtype="float32")
    out[suite_name] = {"network": network, "suite": facts(zoo.build_symbol(suite_name)),
                       "benchmark_score": facts(ref), "symbols_file": "symbols/%s.py" % module}
print(json.dumps(out))
'''


class Foreign:
    """CPU time the rest of the machine used while this script measured: the machine's busy
    time (/proc/stat: user, nice, system, irq, softirq) less this process's and its reaped
    children's (every worker and benchmark_score.py run is a child, reaped before it is
    read), in cores over the wall time. The machine lock keeps scripts that take it away;
    this catches what does not take it (another engineer's tests, a build)."""

    def __init__(self):
        self.t, self.busy, self.own = time.monotonic(), self._busy(), self._own()

    @staticmethod
    def _busy():
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
        return (f[0] + f[1] + f[2] + f[5] + f[6]) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _own():
        a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

    def cores(self) -> float:
        wall = max(time.monotonic() - self.t, 1e-6)
        return max(0.0, (self._busy() - self.busy) - (self._own() - self.own)) / wall


def wait_quiet(limit: float, max_wait: float, what: str) -> float:
    """Wait until the rest of the machine uses under ``limit`` cores over 3 s; the seconds waited."""
    t0 = time.monotonic()
    said = 0.0
    while True:
        f = Foreign()
        time.sleep(3.0)
        load = f.cores()
        waited = time.monotonic() - t0
        if load < limit:
            return waited
        if waited > max_wait:
            print(f"  {what}: still {load:.2f} foreign cores after {waited:.0f} s: measuring anyway", flush=True)
            return waited
        if waited - said >= 60 or said == 0.0:
            said = waited or 1e-9
            print(f"  {what}: waiting for a quiet machine (other processes use {load:.2f} cores)", flush=True)


def graph_check(python: str, example_dir: Path, models) -> dict:
    env, _ = runner.build_env(Workload(models[0]))
    pairs = [[m, NETWORKS[m]] for m in models]
    out = subprocess.run([python, "-c", GRAPH_CHECK, str(example_dir), json.dumps(pairs)], env=env,
                         capture_output=True, text=True, timeout=600, cwd=str(example_dir))
    if out.returncode != 0:
        raise SystemExit(f"graph check failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def graph_lines(check: dict):
    lines = []
    for name, r in check.items():
        a, b = r["suite"], r["benchmark_score"]
        same = "identical" if a["exact"] == b["exact"] else (
            "the same work (identical once BatchNorm eps, a global pool's unused kernel and identity copies "
            "are set aside)" if a["loose"] == b["loose"] else "DIFFERENT")
        lines.append(f"{name} (suite zoo) vs {r['network']} ({r['symbols_file']}): graphs {same}")
        for k in ("params", "aux", "macs"):
            mark = "" if a[k] == b[k] else "   <-- differs"
            lines.append(f"    {k:7s} suite {a[k]:>12,d}   benchmark_score {b[k]:>12,d}{mark}")
        ops = sorted(set(a["ops"]) | set(b["ops"]))
        diff = {o: (a["ops"].get(o, 0), b["ops"].get(o, 0)) for o in ops if a["ops"].get(o, 0) != b["ops"].get(o, 0)}
        lines.append(f"    operators: {sum(a['ops'].values())} vs {sum(b['ops'].values())}"
                     + (f"; differing counts (suite, benchmark_score): {diff}" if diff else ", same counts per type"))
        if a["bn_eps"] != b["bn_eps"]:
            lines.append(f"    BatchNorm eps: suite {a['bn_eps']}, benchmark_score {b['bn_eps']}")
        if a["global_pools"] != b["global_pools"]:
            def pools(ps):
                return ", ".join(f"kernel {p.get('kernel')} {p.get('pooling_convention')}" for p in ps)
            lines.append(f"    global average pool (global_pool=True, so kernel and convention are unused): "
                         f"suite {pools(a['global_pools'])}, benchmark_score {pools(b['global_pools'])}")
    return lines


def run_benchmark_score(python: str, example_dir: Path, network: str, batch: int, env: dict) -> dict:
    t0 = time.time()
    out = subprocess.run([python, "benchmark_score.py", "--network", network, "--batch-size", str(batch)],
                         cwd=str(example_dir), env=env, capture_output=True, text=True, timeout=900)
    wall = time.time() - t0
    found = [m for m in _IPS.finditer(out.stdout + out.stderr) if m.group(2) == "float32"]
    if out.returncode != 0 or not found:
        tail = (out.stderr or out.stdout).strip().splitlines()[-3:]
        return {"ok": False, "message": f"exit {out.returncode}: {' | '.join(tail)}", "wall": wall}
    return {"ok": True, "ips": float(found[-1].group(3)), "wall": wall}


def suite_facts(r) -> dict:
    """The suite's figure of one process and what lies behind it."""
    if r is None or not r.ok:
        return {"ok": False, "message": "not reached" if r is None else f"{r.status}: {r.message}"}
    images = r.workload.total_batch * r.batches_per_round * len(r.round_seconds)
    return {"ok": True, "ips": r.value("throughput"), "mean_ips": images / sum(r.round_seconds),
            "rounds": len(r.round_seconds), "k": r.batches_per_round,
            "warmup_batches": r.meta.get("warmup_batches"), "threads": r.meta.get("env", {}).get("OMP_NUM_THREADS"),
            "wall": round(r.wall_seconds or 0.0, 2)}


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def measured(fn):
    """``fn()`` and the foreign cores while it ran."""
    f = Foreign()
    out = fn()
    return out, round(f.cores(), 3)


def settle(args, what):
    return wait_quiet(args.quiet_cores, args.max_wait, what)


def part_a(cells, args, log, done=(), alone=None):
    """``alone``: the cells measured alone and compared (default: every cell); the multi-cell
    process measures all of ``cells`` either way."""
    alone = list(cells if alone is None else alone)
    per = {w.key(): [] for w in alone}
    for r in done:
        per[r["cell"]].append(r)
    for i in range(args.pairs):
        if {w.key() for w in alone} <= {r["cell"] for r in done if r["pair"] == i and r["kept"]}:
            continue
        shift = i % len(cells)
        order = cells[shift:] + cells[:shift]
        multi_first = i % 2 == 0
        for attempt in range(args.max_redo + 1):
            with machine_lock(args.lock):
                waited = settle(args, f"pair {i + 1}, lock held")
                stamp = time.strftime("%H:%M:%S", time.gmtime())
                sides, foreign = {}, {}
                for side in (("multi", "alone") if multi_first else ("alone", "multi")):
                    if side == "multi":
                        runs, foreign["multi"] = measured(lambda: runner.run_cells(order, time_budget=args.time_budget,
                                                                                   seed=i))
                        sides["multi"] = {w.key(): suite_facts(r) for w, r in zip(order, runs)}
                    else:
                        sides["alone"] = {}
                        for w in alone:
                            r, foreign[w.key()] = measured(lambda: runner.run_workload(w, time_budget=args.time_budget,
                                                                                       seed=i))
                            sides["alone"][w.key()] = suite_facts(r)
            worst = max(foreign.values())
            disturbed = worst >= args.quiet_cores
            final = not disturbed or attempt == args.max_redo
            for pos, w in enumerate(order):
                if w.key() not in sides["alone"]:
                    continue
                m, a = sides["multi"][w.key()], sides["alone"][w.key()]
                row = {"part": "a", "pair": i, "attempt": attempt, "time": stamp, "waited": round(waited, 1),
                       "first": "multi" if multi_first else "alone", "cell": w.key(), "position": pos,
                       "multi": m, "alone": a, "foreign_multi": foreign["multi"], "foreign_alone": foreign[w.key()],
                       "disturbed": disturbed, "kept": final,
                       "ratio": m["ips"] / a["ips"] if m["ok"] and a["ok"] else None}
                per[w.key()].append(row)
                log(row)
            shown = "  ".join(f"{label(w)} {fmt(per[w.key()][-1]['ratio'], '.3f')}" for w in alone)
            print(f"[a] pair {i + 1}/{args.pairs} {stamp} ({'multi first' if multi_first else 'alone first'}): "
                  f"multi/alone {shown}; other processes up to {worst:.2f} cores"
                  + (" - DISTURBED, " + ("again" if not final else "kept (redo limit)") if disturbed else ""),
                  flush=True)
            if final:
                break
    return per


def part_b(cells, args, log, done=()):
    per = {w.key(): [] for w in cells}
    for r in done:
        per[r["cell"]].append(r)
    for i in range(args.rounds):
        suite_first = i % 2 == 0
        todo = [w for w in cells if not any(r["round"] == i and r["cell"] == w.key() and r["kept"] for r in done)]
        if not todo:
            continue
        with machine_lock(args.lock):  # one round holds the lock; each cell waits for quiet
            for w in todo:
                env, _ = runner.build_env(w)
                for attempt in range(args.max_redo + 1):
                    waited = settle(args, f"round {i + 1} {w.model}/b{w.batch_size}, lock held")
                    stamp = time.strftime("%H:%M:%S", time.gmtime())
                    got, foreign = {}, {}
                    for side in (("suite", "bs") if suite_first else ("bs", "suite")):
                        if side == "suite":
                            r, foreign["suite"] = measured(lambda: runner.run_workload(
                                w, time_budget=args.time_budget, seed=i))
                            got["suite"] = suite_facts(r)
                        else:
                            got["bs"], foreign["bs"] = measured(lambda: run_benchmark_score(
                                args.python, args.example_dir, NETWORKS[w.model], w.batch_size, env))
                    s, b = got["suite"], got["bs"]
                    worst = max(foreign.values())
                    disturbed = worst >= args.quiet_cores
                    final = not disturbed or attempt == args.max_redo
                    row = {"part": "b", "round": i, "attempt": attempt, "time": stamp, "waited": round(waited, 1),
                           "first": "suite" if suite_first else "benchmark_score", "cell": w.key(), "suite": s,
                           "benchmark_score": b, "foreign_suite": foreign["suite"], "foreign_bs": foreign["bs"],
                           "disturbed": disturbed, "kept": final,
                           "ratio": s["ips"] / b["ips"] if s["ok"] and b["ok"] else None,
                           "mean_ratio": s["mean_ips"] / b["ips"] if s["ok"] and b["ok"] else None}
                    per[w.key()].append(row)
                    log(row)
                    print(f"[b] round {i + 1}/{args.rounds} {stamp} {w.model}/b{w.batch_size} "
                          f"({'suite first' if suite_first else 'benchmark_score first'}): suite {fmt(s.get('ips'))} "
                          f"benchmark_score {fmt(b.get('ips'))} ratio {fmt(row['ratio'], '.3f')}; other processes up "
                          f"to {worst:.2f} cores" + (" - DISTURBED, " + ("again" if not final else "kept (redo limit)")
                                                     if disturbed else ""), flush=True)
                    if final:
                        break
    return per


def kept(rows):
    return [r for r in rows if r["kept"]]


def label(w):
    return (f"{w.model} b{w.batch_size}" + (f" {w.mode} {len(w.contexts)}ctx" if w.mode != "score" else "")
            + (f" {w.dtype}" if w.dtype != "float32" else ""))


def alone_name(w):
    """How ``--alone`` names a cell: model:batch, and :dtype when it is not float32 (either
    form matches a float32 cell)."""
    return f"{w.model}:{w.batch_size}" + (f":{w.dtype}" if w.dtype != "float32" else "")


def _short(key):
    """``score/alexnet/b1/cpu:0/...`` as ``alexnet b1``."""
    parts = key.split("/")
    return f"{parts[1]} {parts[2]}" if len(parts) > 2 else key


def _noisy(rows):
    n = sum(r["disturbed"] for r in rows)
    return f", {n} kept disturbed" if n else ""


def _mark(r):
    return "" if not r["disturbed"] else ("  DISTURBED, kept" if r["kept"] else "  DISTURBED, discarded")


def _ratio_table(cells, per, sides, heads, target, unit, mean_ratio=False):
    """One row a cell: each side's median img/s over the kept measurements, the median and range
    of their ratios, whether the median meets ``target``; with ``mean_ratio`` also the median of
    the suite's mean-based ratio."""
    extra = f" {'mean/b_s':>8s}" if mean_ratio else ""
    lines = [f"{'cell':16s} {heads[0]:>11s} {heads[1]:>11s} {'ratio med':>9s} {'ratio min-max':>13s}{extra}  "
             f"target {target[0]}-{target[1]}"]
    for w in cells:
        rows = kept(per[w.key()])
        ratios = [r["ratio"] for r in rows if r["ratio"] is not None]
        x, y = (med([r[side]["ips"] for r in rows if r[side]["ok"]]) for side in sides)
        rm = med(ratios)
        ok = rm is not None and target[0] <= rm <= target[1]
        extra = (" " + f"{fmt(med([r['mean_ratio'] for r in rows if r['mean_ratio'] is not None]), '.3f'):>8s}"
                 if mean_ratio else "")
        lines.append(f"{label(w):16s} {fmt(x):>11s} {fmt(y):>11s} {fmt(rm, '.3f'):>9s} "
                     f"{(fmt(min(ratios), '.3f') + '-' + fmt(max(ratios), '.3f')) if ratios else '-':>13s}{extra}  "
                     f"{'met' if ok else 'MISSED'} ({len(ratios)} {unit}{_noisy(rows)})")
    return lines


def table_a(cells, per):
    return _ratio_table(cells, per, ("multi", "alone"), ("multi img/s", "alone img/s"), MULTI_TARGET, "pairs")


def table_b(cells, per):
    return _ratio_table(cells, per, ("suite", "benchmark_score"), ("suite img/s", "b_s img/s"), SCORE_TARGET,
                        "rounds", mean_ratio=True)


def raw_lines(per_a, per_b):
    lines = []
    for key, rows in (per_a or {}).items():
        for r in rows:
            m, a = r["multi"], r["alone"]
            lines.append(f"a pair {r['pair'] + 1} {r['time']} {r['first']:>5s} first  {_short(key):16s} pos {r['position']}  "
                         f"multi {fmt(m.get('ips'))} ({m.get('rounds', '-')}x{m.get('k', '-')}, warm-up "
                         f"{m.get('warmup_batches', '-')})  alone {fmt(a.get('ips'))} ({a.get('rounds', '-')}x"
                         f"{a.get('k', '-')}, warm-up {a.get('warmup_batches', '-')})  ratio {fmt(r['ratio'], '.3f')}"
                         f"  other cores {r['foreign_multi']:.2f}/{r['foreign_alone']:.2f}" + _mark(r)
                         + ("" if m["ok"] and a["ok"] else f"  [{m.get('message') or a.get('message')}]"))
    for key, rows in (per_b or {}).items():
        for r in rows:
            s, b = r["suite"], r["benchmark_score"]
            lines.append(f"b round {r['round'] + 1} {r['time']} {r['first']:>15s} first  {_short(key):16s} suite "
                         f"{fmt(s.get('ips'))} (mean {fmt(s.get('mean_ips'))}, {s.get('rounds', '-')}x{s.get('k', '-')})"
                         f"  benchmark_score {fmt(b.get('ips'))}  ratio {fmt(r['ratio'], '.3f')}"
                         f"  other cores {r['foreign_suite']:.2f}/{r['foreign_bs']:.2f}" + _mark(r)
                         + ("" if s["ok"] and b["ok"] else f"  [{s.get('message') or b.get('message')}]"))
    return lines


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main(argv=None) -> int:
    today = datetime.date.today().isoformat()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5, help="part a: multi-cell / alone pairs")
    ap.add_argument("--rounds", type=int, default=None, help="part b: suite / benchmark_score rounds (default: --pairs)")
    ap.add_argument("--example-dir", type=Path, default=Path("/work/mxnet-example-1.9.1/example/image-classification"),
                    help="MXNet 1.9.1's example/image-classification (benchmark_score.py, symbols/, common/)")
    ap.add_argument("--cells", default="scoring", choices=["scoring", *CELL_SETS],
                    help="scoring: --models x --batches on cpu:0; the others: the default session's multi-device "
                         "cells that share an environment (weak scaling's 1-context cells, its 2-context cells)")
    ap.add_argument("--models", default="alexnet,inception-bn,resnet50_v2")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--alone", default=None,
                    help="part a: the cells measured alone and compared, as model:batch,... (default: every cell; "
                         "the multi-cell process measures every cell either way)")
    ap.add_argument("--parts", default="a,b", help="a (multi vs alone), b (suite vs benchmark_score)")
    ap.add_argument("--time-budget", type=float, default=runner.TIME_BUDGET_S,
                    help="the suite's timed seconds per cell (its default)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter with MXNet 1.9.1 for benchmark_score.py")
    ap.add_argument("--lock", default=None, help="machine lock file held by each pair / round")
    ap.add_argument("--quiet-cores", type=float, default=0.05,
                    help="a pair whose processes saw other processes use this many cores or more is measured again")
    ap.add_argument("--max-redo", type=int, default=4, help="times a disturbed pair is measured again")
    ap.add_argument("--resume", action="store_true",
                    help="keep what the raw file holds from an earlier run of the same command and measure the rest")
    ap.add_argument("--max-wait", type=float, default=3600.0, help="seconds to wait for a quiet machine")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / f"same-figures-{today}.txt"))
    ap.add_argument("--raw", default=None, help="JSON lines of every measurement (default: /tmp/same-figures-<date>.jsonl)")
    args = ap.parse_args(argv)
    args.rounds = args.pairs if args.rounds is None else args.rounds
    parts = set(args.parts.split(","))
    scoring = args.cells == "scoring"
    if not scoring and parts != {"a"}:
        raise SystemExit(f"--cells {args.cells}: only part a (benchmark_score.py scores; it does not train)")
    args.example_dir = args.example_dir.resolve()
    if "b" in parts and not (args.example_dir / "benchmark_score.py").exists():
        raise SystemExit(f"{args.example_dir}/benchmark_score.py not found (--example-dir)")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    cells = ([Workload(model=m, mode="score", batch_size=int(b), contexts=("cpu:0",))
              for m in models for b in args.batches.split(",")] if scoring else list(CELL_SETS[args.cells]))
    named = set(args.alone.split(",")) if args.alone else set()
    alone = cells if not args.alone else [w for w in cells
                                          if alone_name(w) in named or f"{w.model}:{w.batch_size}:{w.dtype}" in named]
    if not alone:
        raise SystemExit(f"--alone {args.alone}: none of the cells (model:batch[:dtype])")
    raw = Path(args.raw or f"/tmp/same-figures-{today}.jsonl")
    command = " ".join([os.path.relpath(sys.executable, ROOT) if sys.executable.startswith(str(ROOT)) else sys.executable,
                        "benchmarks/same_figures.py"] + [a for a in (sys.argv[1:] if argv is None else argv) if a != "--resume"])

    def log(row):
        with open(raw, "a") as fh:
            fh.write(json.dumps(row) + "\n")

    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cached = raw.with_suffix(".graphs.json")
    if not scoring:  # no benchmark_score.py graph to compare with; the start of the first run kept
        graphs = []
        if args.resume and cached.exists():
            started = json.loads(cached.read_text()).get("started", started)
        else:
            cached.write_text(json.dumps({"started": started}))
    elif args.resume and cached.exists():  # the graph check and the start of the first run
        kept_doc = json.loads(cached.read_text())
        check, started = kept_doc["check"], kept_doc.get("started", started)
        graphs = graph_lines(check)
    else:
        print(f"graph check: {', '.join(models)} against {args.example_dir}/symbols", flush=True)
        with machine_lock(args.lock):  # a short MXNet process: not beside someone's measurement
            check = graph_check(args.python, args.example_dir, models)
        cached.write_text(json.dumps({"started": started, "check": check}))
        graphs = graph_lines(check)
    print("\n".join(graphs), flush=True)
    env, defaults = runner.build_env(cells[0])
    done = []
    if args.resume and raw.exists():  # what an earlier run of this command measured
        keys = {w.key() for w in cells}
        done = [r for r in map(json.loads, raw.read_text().splitlines()) if r["cell"] in keys]
        print(f"resuming from {raw}: {len(done)} measurements", flush=True)
    elif raw.exists():
        raw.unlink()
    per_a = part_a(cells, args, log, [r for r in done if r["part"] == "a"], alone) if "a" in parts else None
    per_b = part_b(cells, args, log, [r for r in done if r["part"] == "b"]) if "b" in parts else None
    ended = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    stamps = [r["time"] for per in (per_a, per_b) if per for rows in per.values() for r in rows]
    if stamps and len(stamps) == len(done):  # nothing measured now: the report of an earlier run
        ended = f"{started[:10]} {max(stamps)[:5]} UTC"

    doc = [f"# Same figures ({'#26' if scoring else '#37'} part 2), {started} - {ended}", "",
           f"command: {command}" + ("  (stopped and continued with --resume, same settings: the measurements of "
                                    "every part are below)" if done else ""),
           f"machine: {cpu_model()}, {os.cpu_count()} logical CPUs; worker environment OMP_NUM_THREADS="
           f"{env.get('OMP_NUM_THREADS')} ({'set by the suite' if 'OMP_NUM_THREADS' in defaults else 'inherited'})"
           + (", the same for benchmark_score.py" if scoring else ""),
           f"MXNet {metadata.version('mxnet')} ({args.python}); suite time budget {args.time_budget} s per cell",
           *([f"benchmark_score.py: {SOURCE}; run from {args.example_dir} as "
              f"`python benchmark_score.py --network NET --batch-size B`",
              f"networks: {', '.join(f'{m} = --network {NETWORKS[m]}' for m in models)}"] if scoring else
             [f"cells ({args.cells}): " + "; ".join(w.key() for w in cells)]),
           f"quiet machine: each pair (a) / round (b) holds the machine lock ({args.lock}); each pair / cell "
           f"of a round waits until other processes use under {args.quiet_cores} cores, and is measured again (up to "
           f"{args.max_redo} times) when other processes used {args.quiet_cores} cores or more while one of its "
           "processes ran (/proc/stat busy time less this script's and its children's); the tables hold the "
           "pairs kept", "",
           *(["## Graphs: the suite's zoo against benchmark_score.py's get_symbol", ""] + graphs if scoring else [])]
    if per_a is not None:
        doc += ["", f"## a. multi-cell worker vs alone ({args.pairs} pairs, AB/BA alternating, the multi-cell "
                    "process's order rotated by one each pair"
                    + (f"; measured alone: {', '.join(label(w) for w in alone)}" if len(alone) < len(cells) else "")
                    + ")", ""] + table_a(alone, per_a)
    if per_b is not None:
        doc += ["", f"## b. the suite vs benchmark_score.py ({args.rounds} rounds, which first alternating; "
                    "mean/b_s: the suite's mean over its timed rounds against benchmark_score)", ""] + table_b(cells, per_b)
    doc += ["", "## Every measurement", ""] + raw_lines(per_a, per_b)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(doc) + "\n")
    if scoring:
        print("\n".join(doc[doc.index("## Graphs: the suite's zoo against benchmark_score.py's get_symbol"):]
                        [:len(graphs) + 2]), flush=True)
    for title, tab in (("a", per_a and table_a(alone, per_a)), ("b", per_b and table_b(cells, per_b))):
        if tab:
            print(f"## {title}\n" + "\n".join(tab), flush=True)
    print(f"written: {args.out} (raw: {raw})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
