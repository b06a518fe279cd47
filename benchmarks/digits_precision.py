"""Reduced precision on the digits, judged like MLPerf (issue #27): a LeNet trained in
float32 on ``pytest_mxperf/data/digits28.npz``, scored in float32, bfloat16 (where this CPU
and build run it) and int8 (calibrated on held-out digits that are not scored): each
dtype's accuracy on the same 288 held-out images, its gap to float32 beside its img/s and
its speed-up, and the converted graph.

Each process is one run of the worker (``python -m pytest_mxperf.workers.digits_precision
SPEC.json RESULT.json`` through ``pytest_mxperf.measure.runner.run_process``, with the
suite's environment: OpenMP threads = physical cores unless you set them), with its own
seed (``--seeds``, one process each): it trains its network (to the convergence worker's
target, or ``--epochs``), converts it, scores the evaluation part in every dtype, then
times each dtype's scoring (untimed warm-up, timed rounds each between two
``mx.nd.waitall()``, the dtypes' rounds in turn; img/s = batch x batches a round / median
round seconds). Around every process the load of *other* processes is read from /proc/stat
(``other_cpus``, ``machine_state.LoadMeter``): this machine is shared, and a figure measured
beside a neighbour is slower: before each process the script waits (up to ``--wait-quiet``
s) for other processes to use under ``--quiet-below`` CPUs, and a process they disturbed
anyway (``other_cpus`` at or above it) is measured again (up to ``--retries`` times) and
listed as discarded, never used in the table. Run it under the machine lock (``flock /tmp/machine.lock
...``), so that other measurements wait; the command written into the report is the one
run, with its ``flock`` when the script's parent is flock.

The table: per dtype, each seed's accuracy, its gap to float32 in points (accuracy minus
float32's, from the same process), the images whose answer changed from float32's, img/s
(median over processes, min-max), the speed-up (median of each process's own ratio to
float32, min-max) and the converted graph's marker operators (``precision.marker_ops``);
then each seed's verdict under ``judge.accuracy`` (1 point absolute).

Usage: flock /tmp/machine.lock python benchmarks/digits_precision.py [--seeds 0,1,2] [--epochs N]
       [--batch 64] [--time-budget 2] [--quiet-below 0.3] [--wait-quiet 120] [--retries 3]
       [--out benchmarks/results/digits-precision-<today>.txt]
"""
import argparse
import datetime
import json
import os
import shlex
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_mxperf.judge.accuracy import ACCURACY_TOLERANCE, judge_accuracies  # noqa: E402
from pytest_mxperf.machine import topology  # noqa: E402
from pytest_mxperf.machine.state import LoadMeter, wait_for_quiet  # noqa: E402
from pytest_mxperf.proc import spawn, worker  # noqa: E402
from pytest_mxperf.measure import runner  # noqa: E402

from input_pipeline import cpu_model  # noqa: E402  (lscpu's model name)

WORKER = [sys.executable, "-m", "pytest_mxperf.workers.digits_precision"]
DTYPES = ("float32", "bfloat16", "int8")


def isa_flags():
    """The flags that decide bfloat16 and int8 on oneDNN (precision.py's lists)."""
    from pytest_mxperf.workers import precision
    have = precision.cpu_flags()
    wanted = precision.AVX512_CORE_FLAGS + precision.NATIVE_BF16_FLAGS + precision.VNNI_FLAGS
    return [f for f in wanted if f in have]


def invoked_command():
    """The command as run: the parent's when it is ``flock`` (``flock LOCK python script ...``),
    else this interpreter's own argv as given."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
            parent = [a.decode() for a in fh.read().split(b"\0") if a]
    except OSError:
        parent = []
    if parent and os.path.basename(parent[0]) == "flock":
        return parent
    return list(getattr(sys, "orig_argv", [sys.executable] + sys.argv))


def run_one(spec, env):
    meter = LoadMeter()
    meter.start()
    out = runner.run_process(WORKER, dict(spec, memory_limit=worker.default_memory_limit()), timeout=900, env=env)
    load = meter.stop() or {}
    res = out.payload or {}
    if res.get("status") != "ok":
        raise SystemExit(f"worker failed on {json.dumps(spec)}: {out.status}: {res.get('message') or out.message}")
    res["other_cpus"] = load.get("other_cpus")
    return res


def fmt_range(values, fmt):
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def table(results, emit):
    seeds = [r["seed"] for r in results]
    head = ["dtype", f"accuracy (seeds {','.join(map(str, seeds))})", "gap vs float32 (points)",
            f"answers changed (of {results[0]['evaluation_images']})", f"img/s median (min-max, n={len(results)})",
            "speed-up (min-max)", "converted ops"]
    rows = [head]
    for d in DTYPES:
        rs = [r["dtypes"][d] for r in results]
        ran = [row for row in rs if row["status"] == "ok"]
        if not ran:
            rows.append([d, f"{rs[0]['status']}: {rs[0]['reason']}", "-", "-", "-", "-", "-"])
            continue
        acc = " ".join(f"{row['accuracy']:.4f}" if row["status"] == "ok" else row["status"] for row in rs)
        gap = " ".join(f"{100 * row['gap_vs_float32']:+.2f}" if row["status"] == "ok" else "-" for row in rs)
        changed = " ".join(str(row["changed_predictions"]) if row["status"] == "ok" else "-" for row in rs)
        ips = fmt_range([row["img_per_s"] for row in ran], ".0f")
        speed = fmt_range([row["speedup_vs_float32"] for row in ran], ".2f") + "x"
        ops = json.dumps(ran[0]["ops"], sort_keys=True) if ran[0]["ops"] else "(unchanged)"
        rows.append([d, acc, gap if d != "float32" else "-", changed if d != "float32" else "-", ips,
                     speed if d != "float32" else "1 (reference)", ops])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    for r in rows:
        emit("  " + " | ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + " | " + r[-1])


def main():
    today = datetime.date.today().isoformat()
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="0,1,2", help="one process per seed")
    ap.add_argument("--epochs", type=int, default=None, help="train exactly N epochs (default: to the target)")
    ap.add_argument("--batch", type=int, default=64, help="training and scoring batch")
    ap.add_argument("--time-budget", type=float, default=2.0, help="timed seconds per dtype per process")
    ap.add_argument("--quiet-below", type=float, default=0.3, help="other processes' CPUs that count as quiet")
    ap.add_argument("--wait-quiet", type=float, default=120.0, help="seconds to wait for quiet before a process")
    ap.add_argument("--retries", type=int, default=3, help="re-measurements of a disturbed process")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / f"digits-precision-{today}.txt"))
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]

    env, defaults = topology.worker_env(dict(os.environ), "auto", 1)
    env = spawn.with_package_path(env)
    spec = {"model": "lenet", "batch_size": args.batch, "score_batch": args.batch, "dtypes": list(DTYPES),
            "time_budget": args.time_budget}
    if args.epochs is not None:
        spec["epochs"] = args.epochs

    lines = []

    def emit(text=""):
        print(text, flush=True)
        lines.append(text)

    started = datetime.datetime.now(datetime.timezone.utc)
    results, discarded = [], []
    for seed in seeds:
        for attempt in range(args.retries + 1):
            waited, other = wait_for_quiet(args.quiet_below, args.wait_quiet)
            r = run_one(dict(spec, seed=seed), env)
            r["waited_for_quiet"] = waited
            rows = r["dtypes"]
            print(f"seed {seed}: epochs {r['epochs']} "
                  + "  ".join(f"{d} acc {rows[d]['accuracy']:.4f} {rows[d]['img_per_s']:.0f} img/s"
                              if rows[d]["status"] == "ok" else f"{d} {rows[d]['status']}" for d in DTYPES)
                  + f"  other_cpus {r['other_cpus']}", flush=True)
            if r["other_cpus"] is None or r["other_cpus"] < args.quiet_below or attempt == args.retries:
                results.append(r)
                break
            discarded.append(r)

    first = results[0]
    meta = first["meta"]
    emit(f"Reduced precision on the digits, judged like MLPerf (issue #27), {today} "
         f"(started {started:%H:%M} UTC)")
    emit(f"Machine: {cpu_model()}, {topology.available_physical_cores()} physical cores available; ISA flags for oneDNN's "
         f"bfloat16 / int8: {' '.join(isa_flags()) or 'none'}")
    emit(f"MXNet {first['mxnet_version']} (features: {' '.join(meta.get('features') or [])}); "
         f"python {meta.get('python')}, numpy {meta.get('numpy_version')}; "
         f"OMP_NUM_THREADS={env.get('OMP_NUM_THREADS')}"
         + (" (the suite's fill-in)" if "OMP_NUM_THREADS" in defaults else " (set by the caller)"))
    emit("Command:")
    emit("  $ " + shlex.join(invoked_command()))
    emit("")
    emit(f"LeNet (zoo 'lenet'), trained in float32 on the {first['train_samples']} training digits, batch "
         f"{first['batch_size']}, SGD lr 0.1 momentum 0.9 wd 1e-4, "
         + (f"{args.epochs} epochs" if args.epochs is not None else
            f"until {first['target_accuracy']} accuracy on the evaluation part (max 20 epochs)") + ";")
    emit(f"hold-out of {first['calibration_images'] + first['evaluation_images']}: the first "
         f"{first['calibration_images']} calibrate int8 ({first['calib_mode']}: min / max), the other "
         f"{first['evaluation_images']} are scored in every dtype (batch {first['score_batch']}).")
    emit(f"One process per seed; timed rounds of each dtype in turn, {args.time_budget:g} s a dtype; "
         "img/s = batch x batches a round / median round seconds.")
    emit("")
    for r in results:
        status = "reached" if r.get("reached") else ("fixed epochs" if r.get("fixed_epochs") else "NOT reached")
        other = r.get("other_cpus")
        emit(f"  seed {r['seed']}: {r['epochs']} epoch(s) ({status}), train {r['train_seconds']:.1f} s; "
             f"other_cpus {'n/a' if other is None else f'{other:.2f}'}; "
             + ", ".join(f"{d} k={r['dtypes'][d]['batches_per_round']} x {len(r['dtypes'][d]['round_seconds'])} "
                         "rounds" for d in DTYPES if r["dtypes"][d]["status"] == "ok"))
    if discarded:
        emit(f"  discarded (other processes kept >= {args.quiet_below:g} CPUs busy; measured again):")
        for r in discarded:
            emit(f"    seed {r['seed']}: other_cpus {r['other_cpus']:.2f}; "
                 + ", ".join(f"{d} acc {r['dtypes'][d]['accuracy']:.4f} {r['dtypes'][d]['img_per_s']:.0f} img/s"
                             for d in DTYPES if r["dtypes"][d]["status"] == "ok"))
    disturbed = [r["seed"] for r in results if r["other_cpus"] is not None and r["other_cpus"] >= args.quiet_below]
    if disturbed:
        emit(f"  NOTE: seed(s) {disturbed} stayed disturbed after {args.retries} re-measurements and are in the table")
    emit("")
    table(results, emit)
    emit("")
    emit(f"Verdicts (judge/accuracy.py: a reduced precision passes when its accuracy is at most "
         f"{100 * ACCURACY_TOLERANCE:g} point below float32's, from the same process):")
    for r in results:
        rows = r["dtypes"]
        verdicts = judge_accuracies({d: rows[d]["accuracy"] for d in DTYPES},
                                    unmeasured={d: rows[d]["reason"] for d in DTYPES})
        for d, v in verdicts.items():
            word = {True: "PASS", False: "FAIL", None: "n/a "}[v.passed]
            emit(f"  seed {r['seed']} {d:9s} {word}  {v.reason}")
    emit("")
    for d in DTYPES:
        emit(f"cpu_support {d}: {first['support'][d][1]}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
