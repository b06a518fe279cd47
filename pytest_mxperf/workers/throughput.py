"""The measurement worker: one fresh process per measurement.

Run as ``python -m pytest_mxperf.workers.throughput SPEC.json RESULT.json``.
The parent (``runner.py``) builds the environment *before* this process starts, because
MXNet reads its threading variables only at import.

This module is deliberately standalone: the standard library, numpy, the model zoo and
MXNet APIs that exist across the 1.x releases (Module, DataBatch, nd.waitall), so it can
run under another MXNet install. It never imports pytest.

Method (MXNet's ``example/image-classification/benchmark_score.py``'s networks and random
input; it waits for every batch's outputs over one 10-batch window, this worker waits once
a round, ``waitall()``, over rounds of k batches after its warm-up: what that changes, a few
percent at small, short batches and under half a percent at b8, is in docs/how-it-measures.md,
"What a run does", *Scoring methodology*):
  bind -> init random weights (Xavier) -> first batch (timed separately, reported as
  "first batch") -> untimed warm-up -> rounds of k batches, each round
  ``waitall(); t0; k x step; waitall(); t1``. Throughput is computed from the median time
  per batch; the per-round images/s are the samples.

A latency cell (batch 1) times single batches, each between two ``waitall()``; its p50 /
p99 are over those batches. In a duet (A/B, the spec has ``control``) the parent sizes each
round to about 0.15 s of batches: a latency cell's round then runs its k batches each
synchronised (``protocol.TimedSteps.timed_each``), the round's seconds are their sum (what
the duet pairs), and p50 / p99 are over every batch of the timed rounds: the same quantity
as in a process (``latency_figures``). CPU utilisation and ``timed_seconds`` are the timed
rounds' in both modes, never the partner's turns.
``timed_windows`` ([start, end] in ``time.monotonic()`` seconds: one for a process's rounds,
which run back to back, one a round in a duet) lets the parent compute the GPU and CPU
utilisation it samples over the timed rounds only, never import, bind, warm-up or exit.

bfloat16 and int8 CPU cells bind the float32 network, convert it (``precision.py``: AMP /
oneDNN quantization, timed apart as ``convert_seconds``) and bind the result; the rounds
are the same. A dtype the CPU or build cannot run (float16 on CPU, bfloat16 below AVX-512,
either without MKLDNN) is an ``unsupported`` result with the reason, not an error.
"""

from __future__ import annotations

import json
import resource
import time

from pytest_mxperf.workers import answers
from pytest_mxperf.workers.precision import CONVERTED_DTYPES
from pytest_mxperf.workers.protocol import (  # memory figures
    ModuleSteps,
    await_warmup_turn,
    cudnn_choice,
    error_line,
    file_backed_bytes,
    import_mxnet,
    loaded_companions,
    missing_gpus,
    mx_contexts,
    resident_bytes,
    runtime_info,
    say_over,
    serve,
    serve_duet,
    thread_pools,
    timed_window,
    warm_up,
)


class _Cell(ModuleSteps):
    """A bound Module plus one synthetic batch and the step that a round repeats."""

    def __init__(self, mx, w, seed):
        import numpy as np

        from pytest_mxperf import zoo

        spec = zoo.get_model(w["model"])
        self.mx = mx
        #: a converted cell's: whether its high-water mark was started again after the
        #: conversion (``_setup_left_behind``); None for any other cell
        self.peak_reset = None
        ctxs = mx_contexts(mx, w["contexts"])
        total = w["batch_size"] * len(ctxs)
        self.total_batch = total
        mx.random.seed(seed)
        np.random.seed(seed)
        # float16 as MXNet's benchmark_score.py / train_imagenet.py: the network casts its
        # float32 input to float16 and its output back (zoo.build_symbol), weights float16
        fp16 = w["dtype"] == "float16"
        sym = zoo.build_symbol(w["model"], dtype="float16" if fp16 else "float32")
        data_desc = [mx.io.DataDesc("data", (total,) + tuple(spec.input_shape), np.float32)]
        train = w["mode"] == "train"
        self.precision = None
        t0 = time.perf_counter()
        if train:
            mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=ctxs)
            mod.bind(data_shapes=data_desc, label_shapes=[("softmax_label", (total,))], for_training=True)
        else:
            # As benchmark_score.py: the label is declared but not bound when scoring.
            mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=ctxs)
            mod.bind(data_shapes=data_desc, for_training=False)
        # the same numbers under every MXNet and numpy release (answers.py): the weights by
        # name and shape from the seed, then the inputs
        mod.init_params(initializer=answers.initializer(mx, seed))
        self.sym = sym
        if w["dtype"] in CONVERTED_DTYPES:
            # bfloat16 (AMP) / int8 (oneDNN quantization): the float32 network with its
            # random weights, converted, then bound again for inference
            from pytest_mxperf.workers import precision
            arg, aux = mod.get_params()
            t_c = time.perf_counter()
            # int8's calibration batches from numpy too: the same ranges under every release
            calib = np.concatenate([answers.input_batch(data_desc[0].shape, 1000 + seed + k) for k in range(2)])
            csym, carg, caux = precision.convert_symbol(mx, sym, arg, aux, w["dtype"], data_desc[0].shape,
                                                        ctxs[0], seed=seed, calib_data=calib)
            self.sym = csym
            convert_seconds = time.perf_counter() - t_c
            mod = mx.mod.Module(csym, data_names=["data"], label_names=["softmax_label"], context=ctxs)
            mod.bind(data_shapes=data_desc, for_training=False)
            mod.set_params(carg, caux)
            # the float32 network, its calibration and the conversion are the cell's setup: its
            # memory figure is what the converted network holds running (measurement.
            # MEMORY_METHOD_CONVERTED), its high-water mark started again from here
            del arg, aux, carg, caux, calib
            setup_peak = _peak_rss()  # over the import, the float32 network and its conversion: shown
            self.peak_reset = _setup_left_behind(mx)
            self.precision = {"dtype": w["dtype"], "convert_seconds": convert_seconds,
                              "ops": precision.marker_ops(precision.graph_ops(csym)),
                              "setup_peak_rss_bytes": setup_peak}
        if train:
            params = {"learning_rate": 0.01, "wd": 1e-4, "rescale_grad": 1.0 / total}
            if w.get("optimizer", "sgd") == "sgd":
                params["momentum"] = 0.9
            if fp16:
                params["multi_precision"] = True  # float32 master weights, as train_imagenet.py
            kv = w.get("kvstore") or ("device" if len(ctxs) > 1 else "local")
            self.optimizer = {"kvstore": kv, "optimizer": w.get("optimizer", "sgd"), "optimizer_params": params}
            mod.init_optimizer(**self.optimizer)
        mx.nd.waitall()
        self.bind_seconds = time.perf_counter() - t0
        # Random input, as benchmark_score.py: uniform in [-1, 1), on the context of a
        # one-context cell. Several contexts: in host memory, as a data iterator's batch,
        # and Module copies each slice to its own device (executor_group._load_general),
        # not every slice from the first GPU.
        host = ctxs[0] if len(ctxs) == 1 else mx.cpu()
        self.seed = seed
        data = mx.nd.array(answers.input_batch((total,) + tuple(spec.input_shape), seed), ctx=host)
        label = [mx.nd.array(answers.labels(total, spec.num_classes, seed))] if train else []
        self.batch = mx.io.DataBatch(data=[data], label=label)
        self.mod = mod
        self.train = train

    def answers(self, ops: bool) -> dict:
        """What this cell computes on its batch, from its initial weights (``answers.py``):
        scoring, the outputs; training, ``answers.TRAIN_STEPS`` steps from the initial weights
        (the timed rounds moved them): the outputs and loss, the weights after. With ``ops``,
        every operator's output on the batch's first sample, to name the first that differs.
        Never inside the timed rounds."""
        mx = self.mx
        return answers.module_answers(
            mx, self.mod, self.sym, self.batch, self.seed, ops=ops,
            optimizer=self.optimizer if self.train else None,
            reset=lambda: self.mod.init_params(initializer=answers.initializer(mx, self.seed), force_init=True))


def _cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(spec: dict) -> dict:
    """One cell in this process (``measure_cells`` for several)."""
    w = spec["workload"]
    if not w.get("source"):  # an unknown zoo name fails here, before MXNet's import (2-3 s)
        from pytest_mxperf import zoo
        zoo.get_model(w["model"])
    mx, process_meta = _import_mxnet()
    return measure_cell(mx, spec, process_meta)


def _import_mxnet():
    """MXNet imported, with what the process's figures depend on: the runtime, the import's
    time and the resident memory before and after it."""
    rss_before = resident_bytes()
    t_start = time.perf_counter()
    mx = import_mxnet()
    import_seconds = time.perf_counter() - t_start
    rss_after = resident_bytes()
    meta = runtime_info(mx)
    meta["import_seconds"] = import_seconds
    # where the peak comes from: the interpreter before MXNet, what `import mxnet` loaded
    meta["rss_before_mxnet_bytes"] = rss_before
    meta["rss_after_mxnet_bytes"] = rss_after
    return mx, meta


def measure_cells(spec: dict) -> dict:
    """Several cells in this one process, in the order of ``spec["cells"]`` (each a cell's
    spec as ``measure`` takes it): MXNet imported once, then each cell bound, warmed up and
    timed on its own, and released before the next (``gc.collect()``, ``waitall()``).

    Each cell's result is appended, as soon as it is known, as one JSON line
    ``{"cell": i, "result": {...}}`` to ``spec["progress_path"]``, after a line
    ``{"cell": i, "phase": "start"}`` (and ``"measuring"`` when its warm-up is over): the
    parent bounds each cell's warm-up and measurement from these lines, and when the
    process dies it knows which cell did it and which cells it did not reach. A cell that
    fails (``error`` / ``oom``) ends the process after its line: the parent measures the
    cells after it in a fresh process. ``unsupported`` / ``unavailable`` cells do not.

    A cell's ``peak_rss_bytes`` is the peak of the resident set while it ran: the kernel's
    high-water mark (VmHWM) is reset before each cell (``/proc/self/clear_refs``) and read
    after its timed rounds (``measure_cell``, before its answer record, as a process's own
    peak is). Before that reset the allocator gives back what it holds freed
    (``_give_back_freed``), so a cell's peak does not hold what the cells before it left
    in glibc's heap (AlexNet b1 scored last in its process read 848-863 MiB, first 670)."""
    cells = list(spec["cells"])
    progress = spec["progress_path"]
    control = spec.get("control")  # a duet of several cells: each cell's rounds served in turn
    for c in cells:  # unknown zoo names fail here, before the import
        if not c["workload"].get("source"):
            from pytest_mxperf import zoo
            zoo.get_model(c["workload"]["model"])
    mx, process_meta = _import_mxnet()
    results = []
    first_start = None
    for i, cell_spec in enumerate(cells):
        _progress(progress, {"cell": i, "phase": "start"})
        cell_spec = dict(cell_spec, phase_path=None, progress=(progress, i))
        if control:
            cell_spec["control"] = control
        trimmed = _give_back_freed()
        hwm = _reset_peak_rss()
        start = _anonymous_bytes()
        first_start = start if i == 0 else first_start
        try:
            r = measure_cell(mx, cell_spec, process_meta)
        except BaseException as exc:  # noqa: BLE001 - the cell's line, then the process ends
            import traceback

            from pytest_mxperf.workers.protocol import error_line, looks_like_oom
            text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            traceback.print_exc()
            status = "oom" if isinstance(exc, MemoryError) or looks_like_oom(text) else "error"
            r = {"status": status, "message": error_line(text, type(exc).__name__), "meta": {}}
        meta = r.setdefault("meta", {})
        meta["process_cells"] = {"index": i, "of": len(cells),  # import_seconds: the process's, once
                                 "freed_given_back": trimmed}
        if start is not None and first_start is not None:
            # what the cells before this one left resident (caches of MXNet and oneDNN, the
            # heap's pieces still in use): this cell's memory figure leaves it out
            meta["carried_rss_bytes"] = max(0, start - first_start)
        if r.get("status") == "ok" and not (hwm and meta.get("peak_rss_bytes") is not None):
            # no per-cell high-water mark here: a process-wide one would not be this cell's
            meta.pop("peak_rss_bytes", None)
        results.append(r)
        _progress(progress, {"cell": i, "result": r})
        if control and r.get("status") in ("unsupported", "unavailable"):
            # it ended before its rounds: the parent, waiting for this cell's "ready", hears why
            say_over(control, r.get("status"), r.get("message", ""))
        if r.get("status") not in ("ok", "unsupported", "unavailable"):
            break
        import gc
        gc.collect()
        mx.nd.waitall()
    return {"status": "ok", "message": "", "cells": results}


def _progress(path, obj):
    """One progress line, with its ``time.monotonic()`` (``t``: the parent's clock too)."""
    with open(path, "a") as fh:
        fh.write(json.dumps(dict(obj, t=time.monotonic())) + "\n")
        fh.flush()


def _give_back_freed():
    """Give the memory glibc's allocator holds freed back to the kernel (``malloc_trim(0)``:
    the top of the heap and the free pages inside it), before a shared process's next cell;
    False where there is no glibc (nothing given back: that cell's peak may hold what the
    cells before it freed)."""
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.malloc_trim(0)
        return True
    except (OSError, AttributeError):
        return False


def _setup_left_behind(mx):
    """What a cell's setup freed given back (collected, synchronised, ``_give_back_freed``), then
    the high-water mark started again (``_reset_peak_rss``): whether it was."""
    import gc
    gc.collect()
    mx.nd.waitall()
    _give_back_freed()
    return _reset_peak_rss()


def _anonymous_bytes():
    """This process's resident set less the pages that map files, now (None where unread)."""
    rss, files = resident_bytes(), file_backed_bytes()
    return rss - files if rss is not None and files is not None else None


def _reset_peak_rss():
    """Reset this process's resident high-water mark (Linux >= 4.0: ``5`` to
    /proc/self/clear_refs); False where it cannot be."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _peak_rss():
    """VmHWM of /proc/self/status in bytes, or None."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


#: the untimed warm-up after the first batch (``protocol.warm_up``): at least WARMUP_BATCHES
#: batches, until WARMUP_SECONDS have passed or WARMUP_MAX_BATCHES have run. Half a second reads the figures
#: a second did, within one process (docs/how-it-measures.md, "What a run does", *Isolated measurement*)
WARMUP_BATCHES = 2
WARMUP_SECONDS = 0.5
WARMUP_MAX_BATCHES = 20
#: a timed round's target length, and the shortest a small budget makes (a round of one batch
#: is as long as the batch, whatever the target)
ROUND_SECONDS = 0.2
MIN_ROUND_SECONDS = 0.02


def round_seconds_for(spec: dict) -> float:
    """The target length of a timed round: the spec's ``round_seconds``, else ROUND_SECONDS,
    shorter when the time budget cannot hold ``min_rounds`` of them (a 0.3-s budget: five
    rounds of 0.06 s), never under MIN_ROUND_SECONDS: the budget is the timed seconds asked for."""
    if spec.get("round_seconds") is not None:
        return float(spec["round_seconds"])
    budget = float(spec.get("time_budget", 3.0))
    return max(MIN_ROUND_SECONDS, min(ROUND_SECONDS, budget / max(1, int(spec.get("min_rounds", 5)))))


def timed_rounds(spec: dict, per_batch: float, latency: bool):
    """(k, rounds): the timed part's rounds of k batches, from the warm-up's seconds a batch.
    A latency cell times batch by batch, each one synchronised (what a server answering one
    request sees): at least ``min_latency_batches``, as many as the budget holds, at most 2000.
    Otherwise k batches make a round of about ``round_seconds_for``, and the budget holds
    ``min_rounds`` to ``max_rounds`` of them."""
    budget = float(spec.get("time_budget", 3.0))
    if latency:
        return 1, max(int(spec.get("min_latency_batches", 50)), min(2000, int(budget // max(per_batch, 1e-6))))
    k = max(1, int(round(round_seconds_for(spec) / max(per_batch, 1e-6))))
    rounds = int(budget // max(k * per_batch, 1e-6))
    return k, max(int(spec.get("min_rounds", 5)), min(int(spec.get("max_rounds", 60)), rounds))


def measure_cell(mx, spec: dict, process_meta: dict) -> dict:
    """One cell in a process that has imported MXNet (``process_meta``: ``_import_mxnet``'s)."""
    w = spec["workload"]
    warmup_min = int(spec.get("warmup_batches", WARMUP_BATCHES))
    warmup_seconds = float(spec.get("warmup_seconds", WARMUP_SECONDS))
    smoke = bool(spec.get("smoke", False))

    meta = dict(process_meta)
    missing = missing_gpus(w["contexts"], lambda: meta["num_gpus"])
    if missing:
        return {"status": "unavailable", "meta": meta, "message": missing}

    refused = _unsupported_precision(mx, w)
    if refused:
        return {"status": "unsupported", "message": refused, "meta": meta}

    # a GPU duet's side binds, runs its first batches and autotunes alone (the parent's turn)
    warmup_window = await_warmup_turn(spec)
    if w.get("source"):  # the user's own network
        from pytest_mxperf.workers import usermodel
        cell = usermodel.load(mx, json.loads(w["source"]), mx_contexts(mx, w["contexts"]), w["batch_size"],
                              w["mode"], int(spec.get("seed", 0)))
    else:
        cell = _Cell(mx, w, int(spec.get("seed", 0)))
    meta["bind_seconds"] = cell.bind_seconds
    if w.get("source"):  # the user's network: its FLOPs are counted here, from its graph
        meta["macs_per_sample"] = cell.macs_per_sample
        if cell.macs_per_sample is None:
            meta["macs_unknown"] = cell.macs_unknown
        for k in ("params", "labels"):  # what its params file gave, its own loss outputs' labels
            if getattr(cell, k, None):
                meta[k] = getattr(cell, k)
    if getattr(cell, "precision", None):
        meta["precision"] = cell.precision
    try:
        first = cell.timed(1)
    except Exception as exc:  # MXNet raises a missing kernel at the first synchronisation
        reason = _unsupported_at_first_batch(w, exc)
        if reason is None:
            raise
        return {"status": "unsupported", "message": reason, "meta": meta}
    meta["first_batch_seconds"] = first

    # Untimed warm-up: at least warmup_min batches, and until warmup_seconds have passed.
    warm = warm_up(cell, warmup_min, warmup_seconds, WARMUP_MAX_BATCHES) if not smoke else [cell.timed(1)]
    meta["warmup_batches"] = len(warm) + 1
    warmup_window["ended"] = time.monotonic()
    meta["warmup_window"] = warmup_window
    if any(c.startswith("gpu") for c in w["contexts"]):
        meta["cudnn_choice"] = cudnn_choice(meta, warmup_window)
    if spec.get("phase_path"):  # tell the parent the warm-up is over: its timeout starts now
        open(spec["phase_path"], "w").close()
    if spec.get("progress"):  # a cell of several in this process: the same, on the progress lines
        _progress(spec["progress"][0], {"cell": spec["progress"][1], "phase": "measuring"})
    per_batch = min(warm[-2:]) if len(warm) >= 2 else warm[-1]

    latency = w["mode"] == "latency"
    k, rounds = (1, 1) if smoke else timed_rounds(spec, per_batch, latency)

    if spec.get("control"):
        # a duet (A/B): the parent decides the rounds and alternates them with its partner.
        # A latency cell's round synchronises each of its k batches, whose seconds are its
        # latencies, as the single batches of a process; CPU and wall time are the timed
        # rounds', never the settling or sizing rounds nor the partner's turns.
        served = serve_duet(cell, spec["control"], {"per_batch": per_batch, "warmup_window": warmup_window},
                            each_batch=latency)
        round_seconds, k = served.seconds, served.batches
        batch_seconds = served.batch_seconds
        cpu, wall = served.cpu_seconds, served.wall_seconds
        windows = served.windows  # one a timed round: the partner's turns lie between them
    else:
        cpu0, wall0, mono0 = _cpu_seconds(), time.perf_counter(), time.monotonic()
        round_seconds = [cell.timed(k) for _ in range(rounds)]
        batch_seconds = round_seconds  # a latency cell's rounds are single batches (k = 1)
        windows = [timed_window(mono0)]  # the rounds run back to back: one window
        wall = time.perf_counter() - wall0
        cpu = _cpu_seconds() - cpu0
    # the parent cuts its utilisation samples to these (machine/utilisation.py)
    meta["timed_windows"] = windows
    meta["cpu_utilization"] = cpu / wall if wall > 0 else None
    meta["threads"] = thread_pools()
    # the peak resident set, judged by the rule "growth", read before the answer record: the
    # whole process's (Linux: KiB), or for a cell of several its high-water mark since
    # ``measure_cells`` reset it (None where it could not be read)
    # (a converted cell's since its conversion: None where the mark could not be started again)
    reset = getattr(cell, "peak_reset", None)
    meta["peak_rss_bytes"] = (None if reset is False else _peak_rss() if reset or spec.get("progress")
                              else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    meta["rss_file_bytes"] = file_backed_bytes()
    meta["loaded_companions"] = loaded_companions()
    meta["total_batch"] = cell.total_batch
    meta["timed_seconds"] = wall
    figures = latency_figures(batch_seconds) if latency and not smoke else {}
    first = int(spec.get("seed", 0)) == 0
    if first or not cell.train:  # never in the timed rounds
        # every scoring process sketches its outputs (one batch); the first process of a cell
        # (seed 0) also each operator's output, and a training cell's step there
        t_a = time.perf_counter()
        try:
            rec = cell.answers(ops=first)
        except Exception as exc:  # noqa: BLE001 - a release that cannot give them: said, its speed still judged
            import traceback
            rec = None
            meta["answers_unavailable"] = error_line(traceback.format_exc(), f"{type(exc).__name__}: {exc}")
        if rec is not None:
            meta["answers"] = dict(rec, seconds=round(time.perf_counter() - t_a, 4))
    gpu_mem = _gpu_memory_used_mib(mx, w["contexts"])
    if gpu_mem is not None:  # device-wide: shown, never judged (the judged figure is the parent's, per process)
        figures["gpu_device_memory_used_mib"] = gpu_mem
    return {
        "status": "ok",
        "message": "",
        "batches_per_round": k,
        "round_seconds": round_seconds,
        "figures": figures,
        "meta": meta,
    }


def _unsupported_precision(mx, w):
    """Why this MXNet / CPU cannot run the cell's dtype (one line), or None when it can.

    float16 on CPU contexts (no FP16 gemm on CPU in MXNet 1.x); bfloat16 / int8 where the
    build or the CPU lacks them (``precision.cpu_support``), on GPU contexts (these
    conversions are oneDNN's) and for the user's own networks (converted by the user)."""
    dtype = w.get("dtype", "float32")
    if dtype == "float32":
        return None
    on_cpu = all(not c.startswith("gpu") for c in w["contexts"])
    if dtype == "float16":
        if not on_cpu:
            return None
        from pytest_mxperf.workers import precision
        return "float16 on CPU: " + precision.FP16_REASON
    if dtype in CONVERTED_DTYPES:
        if not on_cpu:
            return f"{dtype} cells here are CPU cells (MXNet's {dtype} conversion runs oneDNN kernels)"
        if w.get("source"):
            return (f"{dtype} conversion is done for the zoo networks; for your own network, convert it "
                    "(mx.contrib.amp / mx.contrib.quantization) and measure the converted graph as float32")
        from pytest_mxperf.workers import precision
        ok, reason = precision.cpu_support(mx)[dtype]
        return None if ok else f"{dtype} on this CPU: {reason}"
    return None


# What MXNet 1.9.1 says at the first synchronisation when a dtype has no kernel on CPU.
_NO_KERNEL_MARKERS = ("not implemented", "could not create a primitive descriptor", "unsupported",
                      "unimplemented")


def _unsupported_at_first_batch(w, exc):
    """The one-line reason when a reduced-precision cell fails at its first batch because a
    kernel is missing; None for any other failure (which stays an error)."""
    if w.get("dtype", "float32") == "float32":
        return None
    from pytest_mxperf.workers.protocol import error_line
    line = error_line(str(exc), type(exc).__name__)
    if not any(m in line.lower() for m in _NO_KERNEL_MARKERS):
        return None
    return f"{w['dtype']} has no kernel here (first synchronisation): {line}"


def latency_figures(batch_seconds):
    """p50 and p99 (ms) of single synchronised batches' seconds (a process's rounds of one
    batch, or every batch of a duet's timed rounds): the latency a batch-1 request sees."""
    if not batch_seconds:
        return {}
    ms = sorted(1000.0 * t for t in batch_seconds)
    return {"latency_p50_ms": _percentile(ms, 0.50), "latency_p99_ms": _percentile(ms, 0.99)}


def _percentile(sorted_values, q):
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _gpu_memory_used_mib(mx, contexts):
    """GPU memory in use on the cell's GPUs after the timed part, device-wide
    (``mx.context.gpu_memory_info``: total minus free, so every other process on those GPUs,
    a duet partner included, is in it); None on CPU. Shown as ``gpu_device_memory_used_mib``;
    the judged ``gpu_memory_mib`` is this process's own, read by the parent from NVML."""
    used = 0.0
    gpus = [int(c.split(":")[1]) for c in contexts if c.startswith("gpu")]
    if not gpus:
        return None
    for i in gpus:
        free, total = mx.context.gpu_memory_info(i)
        used += (total - free) / 2 ** 20
    return used


def run(spec: dict) -> dict:
    """A spec with ``cells`` measures several cells in this process; else one."""
    return measure_cells(spec) if "cells" in spec else measure(spec)


def main(argv=None) -> int:
    return serve(run, argv, "pytest_mxperf.workers.throughput")


if __name__ == "__main__":
    main()
