"""Reduced precision on CPU: does ResNet-50 v2 scoring run in float32, bfloat16 and int8
under this MXNet and on this CPU, how fast, and what does float16 do?

Each figure is one fresh worker process (this script re-run with ``--child``, started by
``pytest_mxperf.measure.runner.run_process`` with the suite's environment: OpenMP threads = physical
cores unless you set them). A process binds the float32 network (random Xavier weights),
converts it with ``pytest_mxperf.workers.precision.convert_symbol``, binds the converted
network, times the first batch, runs untimed warm-up batches, then timed rounds of k
batches, each ``waitall(); t0; k x forward; waitall(); t1``; its figure is batch / median
time per batch (the suite's estimator). The dtypes run in rotating order, one process each
per round, so the machine's drift spreads over all of them; the ratio to float32 is taken
within a round. Around every process the load of *other* processes is read from /proc/stat
(``other_cpus``: average CPUs busy with work that was not ours) and printed: this machine
is shared, and a figure measured beside a neighbour is slower. ``--wait-quiet S`` waits up
to S seconds before each process for other_cpus below ``--quiet-below``.

A dtype that ``precision.cpu_support`` calls unsupported here is reported with the reason
and left out of the rounds.

Also run once each: float16 (the error at the first synchronisation); on an AVX-512 CPU,
bfloat16 with oneDNN capped by ``DNNL_MAX_CPU_ISA`` to AVX512_CORE (AVX-512 without
avx512_bf16: oneDNN's emulation) and to AVX2 (no AVX-512), with float32 under the same
AVX512_CORE cap as its reference; on a CPU without AVX-512, bfloat16 forced past the
support check (what MXNet itself does). Then the machine's peak (``workers/peak.py``: oneDNN
FullyConnected and 3x3 Convolution, and OpenBLAS's ``mx.nd.dot`` beside them, best round)
and each dtype's achieved GFLOP/s against it. ``--rounds 0`` runs only these.

Usage: python benchmarks/cpu_precision.py [--rounds 4] [--model resnet50_v2] [--batch 8]
       [--time-budget 3] [--no-isa-checks] [--no-peak] [--wait-quiet 0] [--quiet-below 0.3]
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DTYPES = ("float32", "bfloat16", "int8")


# ---------------------------------------------------------------- child side (imports MXNet)

def child(spec):
    from pytest_mxperf.workers import precision
    from pytest_mxperf.workers.protocol import error_line, import_mxnet, thread_pools

    import numpy as np

    mx = import_mxnet()
    batch, dtype = int(spec["batch_size"]), spec["dtype"]
    mx.random.seed(int(spec.get("seed", 0)))
    np.random.seed(int(spec.get("seed", 0)))
    sym, arg, aux, shape = precision.float32_network(mx, spec["model"], batch)
    support = {k: list(v) for k, v in precision.cpu_support(mx).items()}
    out = {"status": "ok", "message": "", "dtype": dtype, "support": support,
           "isa_cap": precision.onednn_isa_cap()}
    if dtype in ("bfloat16", "int8") and not support[dtype][0] and not spec.get("force"):
        out.update(status="unsupported", message=support[dtype][1])
        return out

    t0 = time.perf_counter()
    if dtype == "float16":
        # No convert_symbol here (it refuses float16 on CPU): AMP's float16 conversion, to
        # record what MXNet itself does.
        from mxnet.contrib import amp
        csym, carg, caux = amp.convert_model(sym, arg, aux, target_dtype="float16")
    else:
        csym, carg, caux = precision.convert_symbol(mx, sym, arg, aux, dtype, shape, mx.cpu())
    out["convert_seconds"] = time.perf_counter() - t0
    out["ops"] = precision.graph_ops(csym)

    cmod = precision.bound_for_inference(mx, csym, carg, caux, shape)
    data = mx.random.uniform(-1.0, 1.0, shape=shape)
    batch_ = mx.io.DataBatch(data=[data])

    def timed(n):
        mx.nd.waitall()
        t = time.perf_counter()
        for _ in range(n):
            cmod.forward(batch_, is_train=False)
        mx.nd.waitall()
        return time.perf_counter() - t

    try:
        out["first_batch_seconds"] = timed(1)
    except Exception as exc:  # float16: the failure surfaces at the first synchronisation
        out.update(status="error", stage="first synchronisation (mx.nd.waitall)",
                   message=error_line(str(exc), type(exc).__name__))
        return out
    y = cmod.get_outputs()[0].asnumpy()
    out["output_finite"] = bool(np.isfinite(y.astype("float32")).all())
    out["output_dtype"] = str(y.dtype)

    warm, tw = [], time.perf_counter()
    while len(warm) < 2 or (time.perf_counter() - tw < 1.0 and len(warm) < 20):
        warm.append(timed(1))
    per_batch = min(warm[-2:])
    k = max(1, int(round(0.2 / max(per_batch, 1e-6))))
    rounds = max(5, min(60, int(float(spec["time_budget"]) // max(k * per_batch, 1e-6))))
    secs = [timed(k) for _ in range(rounds)]
    out["batches_per_round"] = k
    out["round_seconds"] = secs
    out["img_per_s"] = batch / statistics.median(s / k for s in secs)
    out["openmp_threads"] = thread_pools().get("openmp")
    return out


# ---------------------------------------------------------------- parent side (no MXNet)

def run_one(model, batch, dtype, time_budget, extra_env=None, seed=0, force=False):
    from pytest_mxperf.machine import state as machine_state, topology
    from pytest_mxperf.proc import spawn
    from pytest_mxperf.measure import runner
    from pytest_mxperf.proc import worker

    base = dict(os.environ)
    base.update(extra_env or {})
    env, defaults = topology.worker_env(base, "auto", 1)
    env = spawn.with_package_path(env)
    spec = {"model": model, "batch_size": batch, "dtype": dtype, "time_budget": time_budget, "seed": seed,
            "force": force,
            "memory_limit": worker.default_memory_limit()}
    meter = machine_state.LoadMeter()
    meter.start()
    out = runner.run_process([sys.executable, str(Path(__file__).resolve()), "--child"], spec, timeout=900,
                             env=env)
    load = meter.stop() or {}
    payload = out.payload or {"status": out.status, "message": out.message}
    payload["other_cpus"] = load.get("other_cpus")
    payload["omp_num_threads"] = env.get("OMP_NUM_THREADS")
    if out.status != "ok" and not payload.get("message"):
        payload["message"] = out.message
    return payload


def fmt_load(r):
    v = r.get("other_cpus")
    return "other_cpus   n/a" if v is None else f"other_cpus {v:4.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--model", default="resnet50_v2")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--time-budget", type=float, default=3.0)
    ap.add_argument("--no-isa-checks", action="store_true")
    ap.add_argument("--no-peak", action="store_true")
    ap.add_argument("--quiet-below", type=float, default=0.3)
    ap.add_argument("--wait-quiet", type=float, default=0.0,
                    help="before each process, wait up to this many seconds for other_cpus < --quiet-below")
    args = ap.parse_args()

    def quiet():
        if args.wait_quiet > 0:
            from pytest_mxperf.machine.state import wait_for_quiet
            waited, other = wait_for_quiet(args.quiet_below, args.wait_quiet)
            if waited > 2.5:
                print(f"  (waited {waited:.0f} s for a quiet machine; other_cpus now "
                      f"{'n/a' if other is None else f'{other:.2f}'})", flush=True)

    results = {d: [] for d in DTYPES}
    quiet_results = {d: [] for d in DTYPES}
    ratios = {d: [] for d in DTYPES if d != "float32"}
    support_shown = False
    dropped = set()
    for i in range(args.rounds):
        order = list(DTYPES[i % len(DTYPES):] + DTYPES[:i % len(DTYPES)])
        if i % 2:
            order.reverse()
        this = {}
        for d in order:
            if d in dropped:
                continue
            quiet()
            r = run_one(args.model, args.batch, d, args.time_budget, seed=i)
            if not support_shown and r.get("support"):
                print("cpu_support:", json.dumps(r["support"]))
                print(f"OMP_NUM_THREADS={r['omp_num_threads']} (threadpoolctl: {r.get('openmp_threads')})")
                support_shown = True
            if r.get("status") == "unsupported":
                print(f"round {i + 1} {d:9s} unsupported here, left out of later rounds: {r.get('message')}",
                      flush=True)
                dropped.add(d)
                continue
            if r.get("status") != "ok":
                print(f"round {i + 1} {d:9s} FAILED: {r.get('message')}", flush=True)
                continue
            this[d] = r["img_per_s"]
            results[d].append(r["img_per_s"])
            if r.get("other_cpus") is not None and r["other_cpus"] < args.quiet_below:
                quiet_results[d].append(r["img_per_s"])
            ops = r["ops"]
            marks = {k: v for k, v in ops.items() if k.startswith(("amp_cast", "_contrib_quantize", "_sg_mkldnn"))}
            print(f"round {i + 1} {d:9s} {r['img_per_s']:7.2f} img/s  first batch {r['first_batch_seconds']:.3f} s  "
                  f"convert {r['convert_seconds']:.2f} s  k={r['batches_per_round']} x {len(r['round_seconds'])} "
                  f"rounds  finite={r['output_finite']}  {fmt_load(r)}  {json.dumps(marks, sort_keys=True)}",
                  flush=True)
        for d in ratios:
            if d in this and "float32" in this:
                ratios[d].append(this[d] / this["float32"])

    if args.rounds:
        summary(args, results, quiet_results, ratios)
    checks(args, quiet)
    if not args.no_peak:
        peak(args, results)


def summary(args, results, quiet_results, ratios):
    print()
    print(f"{args.model} b{args.batch} scoring on CPU, {args.rounds} rounds (one process per dtype per round):")
    for d in DTYPES:
        v = results[d]
        if v:
            print(f"  {d:9s} median {statistics.median(v):7.2f} img/s  (min {min(v):.2f}, max {max(v):.2f}, "
                  f"n={len(v)})")
        else:
            print(f"  {d:9s} no successful process")
    for d in DTYPES:
        v = quiet_results[d]
        if v:
            print(f"  {d:9s} processes without neighbour load (other_cpus < {args.quiet_below}): median "
                  f"{statistics.median(v):7.2f} img/s (n={len(v)})")
    for d, r in ratios.items():
        if r:
            print(f"  {d} / float32 within a round: median {statistics.median(r):.2f}x "
                  f"(min {min(r):.2f}, max {max(r):.2f}, n={len(r)})")


def checks(args, quiet):
    print()
    r = run_one(args.model, args.batch, "float16", args.time_budget)
    print(f"float16 (mx.contrib.amp.convert_model target_dtype='float16', bound on cpu): status={r.get('status')} "
          f"at {r.get('stage', 'n/a')}: {r.get('message')}")
    if args.no_isa_checks:
        return
    from pytest_mxperf.workers import precision
    flags = precision.cpu_flags()
    if not all(f in flags for f in precision.AVX512_CORE_FLAGS):
        # DNNL_MAX_CPU_ISA only lowers what oneDNN uses: below AVX-512 there is nothing to
        # cap; show instead what MXNet does when bfloat16 is forced on this CPU
        print()
        r = run_one(args.model, args.batch, "bfloat16", args.time_budget, extra_env={}, force=True)
        print(f"bfloat16 forced on this CPU (no avx512_core; cpu_support said {r.get('support', {}).get('bfloat16')}): "
              f"status={r.get('status')} at {r.get('stage', 'n/a')}: {r.get('message') or r.get('img_per_s')}")
        return
    print()
    print("oneDNN capped with DNNL_MAX_CPU_ISA (one process each):")
    for cap, d in (("AVX512_CORE", "float32"), ("AVX512_CORE", "bfloat16"), ("AVX2", "bfloat16")):
        quiet()
        r = run_one(args.model, args.batch, d, args.time_budget, extra_env={"DNNL_MAX_CPU_ISA": cap})
        what = (f"{r['img_per_s']:7.2f} img/s  {fmt_load(r)}" if r.get("status") == "ok"
                else f"FAILED at {r.get('stage', 'run')}: {r.get('message')}")
        print(f"  {cap:11s} {d:9s} {what}  cpu_support said: {(r.get('support') or {}).get(d)}")


def peak(args, results):
    """The machine's peak through oneDNN (and OpenBLAS's dot beside it), one process, and
    each dtype's median GFLOP/s against it."""
    from pytest_mxperf.proc import spawn
    from pytest_mxperf.measure import runner
    from pytest_mxperf.proc import worker
    from pytest_mxperf.machine import topology
    from pytest_mxperf.zoo import flops

    env, _ = topology.worker_env(dict(os.environ), "auto", 1)
    env = spawn.with_package_path(env)
    out = runner.run_process([sys.executable, "-m", "pytest_mxperf.workers.peak"],
                             {"kernels": ["fc", "conv", "dot"], "memory_limit": worker.default_memory_limit()},
                             timeout=600, env=env)
    print()
    if out.status != "ok":
        print(f"peak worker: {out.status}: {out.message}")
        return
    p = out.payload
    for name, k in p["kernels"].items():
        rounds = ", ".join(f"{g:.1f}" for g in k["round_gflops"])
        print(f"peak {name:4s} {k['gflops']:7.1f} GFLOP/s best round ({k['what']}; rounds: {rounds})")
    print(f"peak (oneDNN, best of fc and conv): {p['peak_gflops']:.1f} GFLOP/s; "
          f"OMP_NUM_THREADS={env.get('OMP_NUM_THREADS')}")
    fps = flops.flops_per_sample(args.model, "score")
    for d, v in results.items():
        if v:
            g = statistics.median(v) * fps / 1e9
            print(f"  {d:9s} {statistics.median(v):7.2f} img/s x {fps / 1e9:.3f} GFLOP = {g:6.1f} GFLOP/s = "
                  f"{100 * g / p['peak_gflops']:.1f}% of the peak")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--child":
        from pytest_mxperf.workers.protocol import serve
        serve(child, sys.argv[2:], "benchmarks/cpu_precision.py --child")
    else:
        main()
