"""A stand-in for an MXNet install, for end-to-end tests of the parent side.

It speaks the real worker protocol (``python -m pytest_mxperf.workers.<kind> SPEC RESULT``
and ``python -m pytest_mxperf.workers.protocol --probe RESULT``) and returns results of
the same shape as the real workers, with figures from its configuration instead of MXNet.
It is started through a small executable wrapper that ``--perf-python`` /
``--perf-reference`` point at (see ``make_stub_python`` in tests/conftest.py); the wrapper
sets ``MXPERF_STUB`` to a JSON configuration:

    {"rate": 100.0,               images/s of every cell (scaled by "factors")
     "factors": {"resnet50_v2": 0.9},
     "dtype_factors": {"float16": 1.6},   images/s multiplied by the cell's dtype's factor
     "scaling": 0.0,              each context beyond the first adds this fraction of one
                                  context's images/s (0: N contexts are as fast as one)
     "version": "1.9.1", "features": ["MKLDNN", ...],
     "gpus": 0,                   what mx.context.num_gpus() would say
     "probe_error": null,         the probe's import fails with this text as its last line, as
                                  a real one does (e.g. "OSError: libcudnn.so.8: cannot open
                                  shared object file: No such file or directory"): a traceback on
                                  stderr, no result, exit code 1
     "dists": [["mxnet", "1.9.1"]],   the MXNet distributions its metadata lists (``python -c``
                                  of installs.installed_mxnet_distributions); default: one,
                                  mxnet-cu117 when "features" has CUDA, else mxnet
     "install": {"name": "mxnet", "version": "1.9.1", "libmxnet_sha256": "..."},   what
                                  distributions.install_identity reads of its MXNet build
                                  (``python -c``); default: none (a build that cannot be read)
     "error": null,               a one-line error message to return instead (e.g. CUDA's)
     "raise": null,               an exception text the throughput worker raises (through the
                                  real protocol.serve, which makes it a one-line error/oom)
     "sleep_models": {"alexnet": 3600},   seconds a cell of that model sleeps before it measures
     "kvstore_factors": {"device": 0.8},   images/s multiplied by the cell's kvstore's factor
     "warmup_seconds": 0.0,       seconds its warm-up takes (slept; the window is in
                                  meta["warmup_window"], as the real worker's)
     "gpu_memory_mib": 2048.0,    what a GPU cell's process holds on its GPU once warmed up (its
                                  own pool): registered in "gpu_pool_dir" as <pid>.json, where a
                                  stand-in NVML whose device has that "processes_dir" lists it
     "gpu_pool_dir": null, "gpu_total_mib": 16280, "gpu_other_mib": 0,
                                  the GPU's memory and other tenants' use: a warm-up whose pool
                                  does not fit beside the live ones registered there fails as
                                  CUDA's out of memory (through the real protocol.serve)
     "cudnn": "8.5.0",            the cuDNN version a CUDA stand-in says MXNet loaded
     "phases": {"file": path, "warmup_reads": 10, "timed_reads": 6, "timed_min_s": 1.1}
                                  the throughput worker writes its phase ("warmup", "timed",
                                  "after") to ``file`` and stays in each until the stand-in
                                  NVML read it there that many times (fake_nvml.phase_value),
                                  the timed phase at least ``timed_min_s``; its result's
                                  ``timed_windows`` is the timed phase. Without it the window
                                  is the instant its rounds are computed in.
     "peak_gflops": 150.0,        what the peak worker measures (fc and conv alike), or a dict
                                  by dtype: {"float32": 9000.0, "float16": 18000.0}
     "operators": {"_sg_mkldnn_conv": 100.0, ...},  the profile worker's operators, in ms
                                  per batch (scaled by 100 / rate, so a slower stub has
                                  slower operators); default: a fused conv net's
     "spin": false,               a thread computes for the whole life of the process, while it
                                  waits on its duet pipe too: a side whose threads spin
     "duet_sleep": null,          seconds every duet round of it lasts (slept), whatever it
                                  reports, so that its partner waits that long; by default a
                                  round is computed in an instant
     "unit_seconds": 0.05,        the input-pipeline worker's seconds per unit (epoch or fed step)
     "after_rounds_s": 0.0,       seconds it works after a duet's rounds (as a training cell's
                                  parts); its result says when: ``after_rounds_started``, ``_ended``
     "epochs": 2, "rounds_per_epoch": 4, "round_seconds": 0.01,   the time-to-accuracy worker's
                                  run: its epochs to the target, each of that many rounds
     "env_factors": {"OMP_NUM_THREADS=1": 0.5}}   images/s multiplied by the factor of each
                                  variable set to that value in its environment

Nothing here imports mxnet; no GPU is involved even when it pretends to have GPUs.
"""

import json
import os
import sys
from time import monotonic  # CLOCK_MONOTONIC, the clock of the parent's utilisation readings


def _cfg():
    return json.loads(os.environ.get("MXPERF_STUB") or "{}")


def _write(path, payload):
    with open(path, "w") as fh:
        json.dump(payload, fh)


def probe(out):
    c = _cfg()
    if c.get("probe_error"):  # import mxnet fails in the probe, as the real one's does
        print("Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
              + c["probe_error"], file=sys.stderr)
        return 1
    from pytest_mxperf.workers import protocol
    found = {"status": "ok", "mxnet_version": c.get("version", "1.9.1"),
             "features": c.get("features", ["MKLDNN", "OPENMP"]), "num_gpus": c.get("gpus", 0),
             "python": sys.version.split()[0], "threads": {"openmp": 2},
             "worker_env": dict(protocol.STARTED_ENV)}  # as protocol.runtime_info reports it
    if c.get("conv_gflops") is not None:  # the MXNet speed figures, as protocol.probe reports them
        found["mxnet_speed"] = {"conv_gflops": c["conv_gflops"], "seconds": 0.25}
        if c.get("import_cpu_s") is not None:
            found["mxnet_speed"].update(import_cpu_s=c["import_cpu_s"], compiled=0)
    _write(out, found)


def throughput(spec_path, result_path):
    c = _cfg()
    if c.get("raise"):  # an exception in the worker: the real protocol makes its one-line result
        from pytest_mxperf.workers import protocol

        def run(spec):
            raise RuntimeError(c["raise"])
        return protocol.serve(run, [spec_path, result_path])
    with open(spec_path) as fh:
        spec = json.load(fh)
    if "cells" in spec:  # several cells in this process, with progress lines, as the real worker
        results = []
        for i, one in enumerate(spec["cells"]):
            _progress(spec["progress_path"], {"cell": i, "phase": "start"})
            one = dict(one, progress=(spec["progress_path"], i))
            if spec.get("control"):  # a duet pair of several cells: each cell's rounds in turn
                one["control"] = spec["control"]
            r = _one_cell(one, c)
            r["meta"]["process_cells"] = {"index": i, "of": len(spec["cells"])}
            results.append(r)
            _progress(spec["progress_path"], {"cell": i, "result": r})
            if spec.get("control") and r["status"] in ("unsupported", "unavailable"):
                from pytest_mxperf.workers import protocol
                protocol.say_over(spec["control"], r["status"], r["message"])
            if r["status"] not in ("ok", "unsupported", "unavailable"):
                break
        _write(result_path, {"status": "ok", "message": "", "cells": results})
        return
    _write(result_path, _one_cell(spec, c))


def _progress(path, obj):
    import time
    with open(path, "a") as fh:
        fh.write(json.dumps(dict(obj, t=time.monotonic())) + "\n")


def _one_cell(spec, c):
    """One cell's result, as the real throughput worker's ``measure_cell``."""
    w = spec["workload"]
    if c.get("error"):
        return {"status": "error", "message": c["error"], "meta": {}}
    if w["model"] in (c.get("unsupported_models") or ()):
        return {"status": "unsupported", "message": f"{w['model']} is not supported by this build", "meta": {}}
    gpus = [x for x in w["contexts"] if x.startswith("gpu")]
    if gpus and max(int(x.split(":")[1]) for x in gpus) >= c.get("gpus", 0):
        return {"status": "unavailable", "meta": {},
                "message": f"needs {','.join(gpus)} but this machine has {c.get('gpus', 0)} GPU(s)"}
    if w["model"] in (c.get("sleep_models") or {}):  # a cell that takes this long (seconds)
        import time
        time.sleep(float(c["sleep_models"][w["model"]]))
    from pytest_mxperf.workers import protocol
    warmup_window = protocol.await_warmup_turn(spec)  # a GPU duet's side: its turn to warm up alone
    device_used = _allocate_pool(c, gpus) if gpus else None
    import time
    if c.get("warmup_seconds"):
        time.sleep(float(c["warmup_seconds"]))
    warmup_window["ended"] = time.monotonic()
    if spec.get("progress"):  # its warm-up is over, as the real worker says
        _progress(spec["progress"][0], {"cell": spec["progress"][1], "phase": "measuring"})
    rate = float(c.get("rate", 100.0)) * float((c.get("factors") or {}).get(w["model"], 1.0))
    rate *= float((c.get("dtype_factors") or {}).get(w.get("dtype", "float32"), 1.0))
    rate *= float((c.get("kvstore_factors") or {}).get(w.get("kvstore") or "", 1.0))
    rate *= 1.0 + float(c.get("scaling", 0.0)) * (len(w["contexts"]) - 1)
    for setting, factor in (c.get("env_factors") or {}).items():  # "NAME=value": a variable that slows it
        name, _, value = setting.partition("=")
        if os.environ.get(name) == value:
            rate *= float(factor)
    total = w["batch_size"] * len(w["contexts"])
    seed = int(spec.get("seed", 0))
    # deterministic between-process spread of +-1%, within-process +-0.5%
    proc = 1.0 + 0.01 * (((seed * 7919) % 21) - 10) / 10.0
    windows = _timed_phases(c["phases"]) if c.get("phases") else None
    mono0 = monotonic()
    rounds = [total / (rate * proc * (1.0 + 0.005 * ((i % 3) - 1))) for i in range(6)]
    windows = windows or [[mono0, monotonic()]]  # as the real worker: [start, end] of its rounds
    k = 1
    if spec.get("control"):  # a duet: serve rounds through the real protocol code
        rounds, k = _serve_duet(spec, c, total / (rate * proc), warmup_window)
    figures, gpu_meta = {}, {}
    if gpus:  # as the real worker: the device-wide reading, named so (the judged figure is the parent's)
        figures["gpu_device_memory_used_mib"] = device_used
        gpu_meta["cudnn"] = c.get("cudnn", "8.5.0")
        gpu_meta["cudnn_choice"] = protocol.cudnn_choice(gpu_meta, warmup_window)
        _free_pool(c)
    return {
        "status": "ok", "message": "", "batches_per_round": k, "round_seconds": rounds, "figures": figures,
        "meta": {"mxnet_version": c.get("version", "1.9.1"), "features": c.get("features", ["MKLDNN", "OPENMP"]),
                 "python": sys.version.split()[0], "num_gpus": c.get("gpus", 0),
                 "worker_env": dict(protocol.STARTED_ENV),  # as protocol.runtime_info reports it
                 "threads": {"openmp": 2}, "cpu_utilization": 1.0 if gpus else 1.98,
                 "peak_rss_bytes": int(c.get("rss_mib", 800)) * 2 ** 20, "bind_seconds": 0.1,
                 "first_batch_seconds": 0.05, "timed_windows": windows, "warmup_window": warmup_window,
                 **gpu_meta}}


def _pool_path(c):
    return os.path.join(c["gpu_pool_dir"], f"{os.getpid()}.json") if c.get("gpu_pool_dir") else None


def _allocate_pool(c, gpus):
    """This stand-in's GPU pool: registered where the stand-in NVML reads per-process figures,
    or CUDA's out-of-memory error when it does not fit beside the live pools registered there.
    Returns the device-wide MiB in use afterwards (what mx.context.gpu_memory_info says)."""
    mine = float(c.get("gpu_memory_mib", 2048.0))
    others = float(c.get("gpu_other_mib", 0.0))
    folder = c.get("gpu_pool_dir")
    if folder:
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):
            try:
                os.kill(int(name[:-5]), 0)
                with open(os.path.join(folder, name)) as fh:
                    others += json.load(fh)["used_bytes"] / 2 ** 20
            except (OSError, ValueError, KeyError):
                continue
    if mine + others > float(c.get("gpu_total_mib", 16280)):
        from pytest_mxperf.workers import protocol

        def run(spec):
            raise RuntimeError("MXNetError: Traceback (most recent call last):\n  [bt] (0) libmxnet.so(+0x1f5e3a)\n"
                               "MXNetError: cudaMalloc retry failed: out of memory")
        protocol.serve(run, sys.argv[-2:])  # writes the oom result and exits
    if folder:
        with open(_pool_path(c), "w") as fh:
            json.dump({"gpu": int(gpus[0].split(":")[1]), "used_bytes": int(mine * 2 ** 20)}, fh)
    return mine + others


def _free_pool(c):
    path = _pool_path(c)
    if path and os.path.exists(path):
        os.remove(path)


def _timed_phases(ph):
    """Untimed "warmup", then "timed", then "after", each written to ``ph["file"]`` and held
    until the stand-in NVML read that phase ``*_reads`` times (the timed one at least
    ``timed_min_s`` too): the windows [[start, end]] of the timed phase. The phase is
    written before its start is taken and its end before the next phase is written, so a
    reading taken inside the window saw "timed" (but for the one that ran across its end).
    A hang guard (``max_wait_s``) ends a phase that is never read."""
    import time

    path, log = ph["file"], ph["file"] + ".reads"

    def write(phase):
        with open(path + ".tmp", "w") as fh:
            fh.write(phase)
        os.replace(path + ".tmp", path)  # a reader sees the old phase or the new one

    def hold(phase, reads, min_s=0.0):
        offset = os.path.getsize(log) if os.path.exists(log) else 0
        write(phase)
        start = time.monotonic()
        while time.monotonic() - start < float(ph.get("max_wait_s", 120.0)):
            with open(log) if os.path.exists(log) else open(os.devnull) as fh:
                fh.seek(offset)
                seen = sum(1 for line in fh.read().splitlines() if line == phase)
            if seen >= reads and time.monotonic() - start >= min_s:
                break
            time.sleep(0.02)
        return start

    hold("warmup", int(ph.get("warmup_reads", 10)))
    start = hold("timed", int(ph.get("timed_reads", 6)), float(ph.get("timed_min_s", 1.1)))
    end = time.monotonic()
    write("after")
    return [[start, end]]


def _serve_duet(spec, c, per_batch, warmup_window=None):
    """A resident worker's rounds through ``protocol.serve_rounds``: round i of k batches
    takes k x per_batch x (1 +- 0.5%) seconds (returned, not slept). ``duet_crash_after``
    / ``duet_hang_after`` (rounds) make it die or hang inside the timed part."""
    import itertools
    import time
    from pytest_mxperf.workers import protocol
    count = itertools.count()

    class Cell:
        def timed(self, k):
            i = next(count)
            if (spec.get("workload") or {}).get("model") in (c.get("duet_crash_models") or ()):  # this cell's rounds crash it
                os._exit(3)
            if c.get("duet_crash_after") is not None and i >= c["duet_crash_after"]:
                os._exit(3)
            if c.get("duet_hang_after") is not None and i >= c["duet_hang_after"]:
                time.sleep(3600)
            t = k * per_batch * (1.0 + 0.005 * ((i % 3) - 1))
            if c.get("duet_sleep"):
                time.sleep(float(c["duet_sleep"]))
            return t
    return protocol.serve_rounds(Cell(), spec["control"], {"per_batch": per_batch, "warmup_window": warmup_window})


def commbench(spec_path, result_path):
    """The kvstore worker's result shape: seconds per push+pull round, sizes, the sum's error.
    With ``control`` in the spec (a duet) it serves rounds of k push+pull rounds through the
    real protocol code, as the real worker does, and reports them."""
    c = _cfg()
    with open(spec_path) as fh:
        spec = json.load(fh)
    seed = int(spec.get("seed", 0))
    comm = float(c.get("comm_seconds", 0.05)) * (1.0 + 0.01 * (((seed * 7919) % 21) - 10) / 10.0)
    duet = {}
    if spec.get("control"):  # a duet: the parent's rounds, k push+pull rounds each
        from pytest_mxperf.workers import protocol
        import time
        window = protocol.await_warmup_turn(spec)  # a GPU duet's side: its turn to warm up alone
        window["ended"] = time.monotonic()
        rounds, k = _serve_duet(spec, c, comm, window)
        comm = sorted(r / k for r in rounds)[len(rounds) // 2]
        duet = {"round_seconds": rounds, "batches_per_round": k, "duet": True}
    n = len(spec.get("contexts") or ["cpu:0"])
    size = 102.2e6
    _write(result_path, dict({"status": "ok", "message": "", "comm_seconds": comm, "error": 0.0,
                              "size_mb": size / 1e6, "bandwidth_gbps": size * 2 * (n - 1) / n / comm / 1e9,
                              "moved_gbps": size * 2 * n / comm / 1e9, "kvstore": spec.get("kvstore"),
                              "contexts": spec.get("contexts"), "meta": {"mxnet_version": c.get("version", "1.9.1")}},
                             **duet))


def pipeline(spec_path, result_path):
    """The input-pipeline worker's result shape (samples/s, batches, the train split's end to
    end rate); in a duet it serves rounds of k units of ``unit_seconds`` each."""
    import time
    c = _cfg()
    with open(spec_path) as fh:
        spec = json.load(fh)
    unit = float(c.get("unit_seconds", 0.05))
    rounds, k = [unit] * 6, 1
    if spec.get("control"):
        rounds, k = _serve_duet(spec, c, unit)
    samples = int(spec.get("batch_size", 32)) * k * len(rounds)
    rate = samples / sum(rounds)
    # as the real worker measures a training cell's parts after the rounds: when, and for how long
    finished = monotonic()
    time.sleep(float(c.get("after_rounds_s", 0.0)))
    train = {}
    if spec.get("train_model"):  # a training cell's parts and split, as the real worker names them
        train = {"synthetic_samples_per_s": rate, "load_seconds_per_batch": unit / 4,
                 "compute_seconds_per_batch": unit * 3 / 4, "load_share": 0.25}
    _write(result_path, {"status": "ok", "message": "", "samples_per_s": rate, "end_to_end_samples_per_s": rate,
                         "batches": k * len(rounds), "round_seconds": rounds, "batches_per_round": k,
                         "after_rounds_started": finished, "after_rounds_ended": monotonic(), **train,
                         "meta": {"mxnet_version": c.get("version", "1.9.1"),
                                  "peak_rss_bytes": int(c.get("rss_mib", 800)) * 2 ** 20}})


def _spin_while_alive(c):
    if c.get("spin"):
        import threading

        def spin():
            while True:
                pass
        threading.Thread(target=spin, daemon=True).start()


def _spec_and_cfg(spec_path):
    with open(spec_path) as fh:
        return json.load(fh), _cfg()


def peak(spec_path, result_path):
    """The peak worker's result shape (workers/peak.py): best-round GFLOP/s per kernel."""
    spec, c = _spec_and_cfg(spec_path)
    context, dtype = spec.get("context", "cpu:0"), spec.get("dtype", "float32")
    if context.startswith("gpu") and int(context.split(":")[1]) >= c.get("gpus", 0):
        _write(result_path, {"status": "unavailable", "meta": {},
                             "message": f"needs {context} but this machine has {c.get('gpus', 0)} GPU(s)"})
        return
    g = c.get("peak_gflops", 150.0)
    g = float(g.get(dtype, 0.0) if isinstance(g, dict) else g)
    kernels = {k: {"gflops": g, "round_gflops": [g], "what": f"stand-in {k}"} for k in spec.get("kernels", ["fc"])}
    _write(result_path, {"status": "ok", "message": "", "kernels": kernels,
                         "fc_gflops": g if "fc" in kernels else None, "conv_gflops": g if "conv" in kernels else None,
                         "dot_gflops": None, "peak_gflops": g, "context": context, "dtype": dtype,
                         "meta": {"mxnet_version": c.get("version", "1.9.1"), "threads": {"openmp": 2}}})


#: a fused (MKLDNN) convolution network's operators, ms per batch at 100 img/s
STUB_OPERATORS = {"_sg_mkldnn_conv": 80.0, "BatchNorm": 5.0, "Pooling": 3.0, "_sg_mkldnn_fully_connected": 2.0}


def profile(spec_path, result_path):
    """The profile worker's result shape (workers/profile.py), and a small chrome trace."""
    spec, c = _spec_and_cfg(spec_path)
    if c.get("error"):
        _write(result_path, {"status": "error", "message": c["error"], "meta": {}})
        return
    slow = 100.0 / (float(c.get("rate", 100.0)) * float((c.get("factors") or {}).get(spec["workload"]["model"], 1.0)))
    ops = {name: ms * slow for name, ms in (c.get("operators") or STUB_OPERATORS).items()}
    total = sum(ops.values()) or 1.0
    batches = 5
    records = [{"name": n, "calls": batches, "total_ms": ms * batches, "avg_ms": ms, "ms_per_batch": ms,
                "share": ms / total} for n, ms in sorted(ops.items(), key=lambda kv: -kv[1])]
    trace = spec.get("trace_path")
    if trace:
        os.makedirs(os.path.dirname(trace) or ".", exist_ok=True)
        _write(trace, {"traceEvents": [{"name": r["name"], "ph": "X", "ts": 0, "dur": r["avg_ms"] * 1e3,
                                        "pid": 0, "tid": 0} for r in records]})
    _write(result_path, {"status": "ok", "message": "", "operators": records, "trace_path": trace,
                         "batches": batches, "warmup_batches": 3, "seconds": total * batches / 1e3,
                         "meta": {"mxnet_version": c.get("version", "1.9.1"), "bulk_exec": {"inference": "0"}}})


def convergence(spec_path, result_path):
    """The time-to-accuracy worker's result shape: ``epochs`` epochs (config) of
    ``rounds_per_epoch`` rounds of ``round_seconds`` each (returned, not slept). In a duet
    (``control`` in the spec) it serves the parent's rounds through the real protocol code
    (``protocol.serve_duet``), saying in each reply whether its run is finished, as the real
    worker does; ``duet_hang_after`` (rounds) makes it hang in the timed part."""
    import time
    c = _cfg()
    with open(spec_path) as fh:
        spec = json.load(fh)
    epochs, per = int(c.get("epochs", 2)), int(c.get("rounds_per_epoch", 4))
    unit = float(c.get("round_seconds", 0.01))
    rounds = []

    class Run:
        finished = False

        def timed(self, k):
            if c.get("duet_hang_after") is not None and len(rounds) >= c["duet_hang_after"]:
                time.sleep(3600)
            rounds.append(unit)
            self.finished = len(rounds) >= epochs * per
            return unit

    if spec.get("control"):
        from pytest_mxperf.workers import protocol
        window = protocol.await_warmup_turn(spec)  # a GPU duet's side: its turn to bind alone
        window["ended"] = time.monotonic()
        protocol.serve_duet(Run(), spec["control"], {"units": "rounds of training", "warmup_window": window})
    else:
        rounds = [unit] * (epochs * per)
    duet = {"round_seconds": rounds, "batches_per_round": 1} if spec.get("control") else {}
    _write(result_path, dict({"status": "ok", "message": "", "reached": True, "epochs": len(rounds) // per,
                              "seconds_to_accuracy": sum(rounds), "rounds": len(rounds), "seed": spec.get("seed"),
                              "meta": {"mxnet_version": c.get("version", "1.9.1")}}, **duet))


def list_distributions():
    c = _cfg()
    version = c.get("version", "1.9.1")
    default = [["mxnet-cu117" if "CUDA" in c.get("features", []) else "mxnet", version]]
    json.dump({"python": sys.executable, "distributions": c.get("dists", default)}, sys.stdout)


def install_identity():
    c = _cfg()
    json.dump({"mxnet": c.get("install"), "numpy_version": "1.23.5"}, sys.stdout)


def main(argv):
    if argv[:1] == ["-m"] and argv[1].startswith("pytest_mxperf."):
        import pytest_mxperf  # noqa: F401  (a worker's first import: arms its parent-death signal)
    _spin_while_alive(_cfg())
    if len(argv) >= 2 and argv[0] == "-c" and "libmxnet_sha256" in argv[1]:
        return install_identity()
    if len(argv) >= 2 and argv[0] == "-c" and "distributions" in argv[1]:
        return list_distributions()
    if len(argv) >= 2 and argv[0] == "-m":
        module, rest = argv[1], argv[2:]
        if module == "pytest_mxperf.workers.protocol" and rest[:1] == ["--probe"]:
            return probe(rest[1])
        if module == "pytest_mxperf.workers.throughput":
            return throughput(*rest)
        if module == "pytest_mxperf.workers.commbench":
            return commbench(*rest)
        if module == "pytest_mxperf.workers.pipeline":
            return pipeline(*rest)
        if module == "pytest_mxperf.workers.convergence":
            return convergence(*rest)
        if module == "pytest_mxperf.workers.peak":
            return peak(*rest)
        if module == "pytest_mxperf.workers.profile":
            return profile(*rest)
        if not module.startswith("pytest_mxperf."):  # a project's own worker (its own kind of cell)
            import runpy
            sys.argv = [module] + rest
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            return 0
    print(f"stub worker: unsupported call {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
