"""Reduced precision judged like MLPerf: a LeNet trained in float32 on the shipped digits,
scored in float32, bfloat16 and int8 on the same held-out images, each with its accuracy
and its scoring speed.

Run as ``python -m pytest_mxperf.workers.digits_precision SPEC.json RESULT.json`` (through
``mxperf.measure_module`` / ``runner.run_process``), in a fresh process.

Data: ``pytest_mxperf/data/digits28.npz`` through ``convergence.load_digits`` (1438
training images, a shuffled, stratified hold-out of 359). The hold-out is split once: its
first ``calib_fraction`` (default 0.2: 71 images) is the *calibration part*, used only to
calibrate int8; the rest (288) is the *evaluation part*, on which every dtype is scored.
The network never trains on either.

Method, seeded from ``seed`` (MXNet's and numpy's RNGs: the initial weights; a
``numpy.random.RandomState(seed)`` for the per-epoch shuffle). Seeded is not bitwise
reproducible: under MXNet's threaded engine (the default, and what the scoring speed is
measured under) the weights one seed trains to differed between processes in 3 of 10 runs
here (float32: 278-282 of the 288 right), while under ``MXNET_ENGINE_TYPE=NaiveEngine``
6 of 6 were identical. The gate does not need more: every dtype is scored on the weights
of its own process.

* training, float32, as the convergence worker trains: a Module on cpu, Xavier init,
  SGD (``learning_rate`` 0.1, momentum 0.9, wd 1e-4, rescale 1/``batch_size``), one epoch
  a shuffled pass over the training set (last partial batch dropped); with ``epochs`` in
  the spec exactly that many epochs, else until the float32 accuracy on the evaluation part
  reaches ``target_accuracy`` (the convergence worker's, 0.95) or ``max_epochs``. Stopping
  on the evaluation part picks the epoch; every dtype is then scored on the same network
  and images, so the choice favours none of them;
* conversion of the trained network (``precision.convert_symbol``): float32 unchanged;
  bfloat16 by AMP, only where ``precision.cpu_support`` says this CPU and build run it
  (else the row says why); int8 by oneDNN post-training quantization calibrated
  (``calib_mode``, default 'naive': min / max) on the calibration part;
* accuracy: every dtype's top-1 on the evaluation part (batches of ``score_batch``, the
  last padded and the padding ignored); ``changed_predictions``: evaluation images whose
  predicted class differs from float32's;
* speed: each dtype's Module bound once (its first batches are the accuracy pass), an
  untimed warm-up of at least 2 batches and ``warmup_seconds``, then timed rounds of k
  batches of the evaluation part (k sized to ``round_seconds``), each between two
  ``mx.nd.waitall()``; the dtypes' rounds run in turn (float32, bfloat16, int8, float32,
  ...), so a drift of the machine touches them alike; ``img_per_s`` = k x ``score_batch``
  / median round seconds; ``speedup_vs_float32`` the ratio of those medians.

Result: per dtype (``dtypes``) ``{status ("ok", "unsupported", "error"), supported, reason,
accuracy, correct, gap_vs_float32 (accuracy - float32's: negative when it lost),
changed_predictions, img_per_s, speedup_vs_float32, batches_per_round, round_seconds,
convert_seconds, ops (the converted graph's census: precision.marker_ops)}``; the
evaluation and calibration sizes, the seed, the epochs and their history, the MXNet
version. ``meta``: the runtime facts, ``timed_windows`` and ``precision`` (the sizes and
the same per-dtype rows, for the parent, which reads a run's facts from its meta).
A dtype that fails (conversion, bind, first synchronisation) is a row with status
"error" and the error's line; the others are still measured.
"""

from __future__ import annotations

import statistics
import time

from pytest_mxperf.workers import precision
from pytest_mxperf.workers.convergence import DATA, DEFAULT_TARGET, load_digits, padded_batches
from pytest_mxperf.workers.protocol import (TimedSteps, error_line, import_mxnet, runtime_info, serve,
                                            thread_pools, timed_window, warm_up)

DTYPES = ("float32", "bfloat16", "int8")
CALIB_FRACTION = 0.2


def split_holdout(n: int, fraction: float = CALIB_FRACTION):
    """(calibration slice, evaluation slice) of a hold-out of ``n``: the first
    ``int(n * fraction)`` images calibrate, the rest are scored."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"calib_fraction must be in (0, 1), got {fraction}")
    k = int(n * fraction)
    if k < 1 or k >= n:
        raise ValueError(f"calib_fraction {fraction} of {n} images leaves an empty part")
    return slice(0, k), slice(k, n)


class ScoringRounds(TimedSteps):
    """A bound inference Module stepped over the evaluation batches in turn."""

    def __init__(self, mx, mod, batches):
        self.mx, self.mod, self.batches, self.i = mx, mod, batches, 0

    def step(self):
        self.mod.forward(self.batches[self.i % len(self.batches)], is_train=False)
        self.i += 1


def train(mx, np, model, xtr, ytr, xev, yev, spec, seed):
    """The float32 network, trained as the module docstring says: (sym, arg, aux, facts)."""
    from pytest_mxperf import zoo

    b = int(spec.get("batch_size", 64))
    fixed = spec.get("epochs")
    target = None if fixed is not None else float(spec.get("target_accuracy", DEFAULT_TARGET))
    max_epochs = int(fixed) if fixed is not None else int(spec.get("max_epochs", 20))
    mx.random.seed(seed)
    np.random.seed(seed)
    rng = np.random.RandomState(seed)
    sym = zoo.build_symbol(model)
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=mx.cpu())
    mod.bind(data_shapes=[("data", (b, 1, 28, 28))], label_shapes=[("softmax_label", (b,))], for_training=True)
    mod.init_params(initializer=mx.init.Xavier(magnitude=2.0))
    mod.init_optimizer(optimizer="sgd", optimizer_params={
        "learning_rate": float(spec.get("learning_rate", 0.1)), "momentum": float(spec.get("momentum", 0.9)),
        "wd": float(spec.get("wd", 1e-4)), "rescale_grad": 1.0 / b})
    val = [(mx.io.DataBatch(data=[mx.nd.array(xb)]), yb, n) for xb, yb, n in padded_batches(xev, yev, b)]

    def evaluate():
        correct = 0
        for batch, yb, n in val:
            mod.forward(batch, is_train=False)
            correct += int((mod.get_outputs()[0].asnumpy()[:n].argmax(axis=1) == yb[:n]).sum())
        return correct / len(xev)

    steps = len(xtr) // b
    history, reached, t0 = [], False, time.perf_counter()
    for epoch in range(1, max_epochs + 1):
        order = rng.permutation(len(xtr))
        for s in range(steps):
            idx = order[s * b:(s + 1) * b]
            mod.forward(mx.io.DataBatch(data=[mx.nd.array(xtr[idx])], label=[mx.nd.array(ytr[idx])]), is_train=True)
            mod.backward()
            mod.update()
        acc = evaluate()
        history.append({"epoch": epoch, "eval_accuracy": acc})
        print(f"mxperf-digits-precision: epoch={epoch} eval_accuracy={acc:.4f}", flush=True)
        if target is not None and acc >= target:
            reached = True
            break
    arg, aux = mod.get_params()
    facts = {"batch_size": b, "epochs": len(history), "fixed_epochs": fixed is not None, "target_accuracy": target,
             "reached": reached if target is not None else None, "history": history,
             "train_seconds": time.perf_counter() - t0}
    return sym, arg, aux, facts


def _row(dtype, support):
    ok, reason = support[dtype]
    return {"dtype": dtype, "status": "ok" if ok else "unsupported", "supported": bool(ok), "reason": reason,
            "accuracy": None, "correct": None, "gap_vs_float32": None, "changed_predictions": None,
            "img_per_s": None, "speedup_vs_float32": None, "batches_per_round": None, "round_seconds": [],
            "convert_seconds": None, "ops": {}}


def run(spec):
    import numpy as np

    from pytest_mxperf import zoo

    model = spec.get("model", "lenet")
    seed = int(spec.get("seed", 0))
    sb = int(spec.get("score_batch", 64))
    dtypes = list(spec.get("dtypes") or DTYPES)
    unknown = [d for d in dtypes if d not in precision.CPU_DTYPES]
    if unknown:
        return {"status": "error", "message": f"unknown dtype(s) {unknown} (known: {', '.join(precision.CPU_DTYPES)})"}
    dtypes = ["float32"] + [d for d in dict.fromkeys(dtypes) if d != "float32"]  # the reference first
    if tuple(zoo.get_model(model).input_shape) != (1, 28, 28):
        return {"status": "error", "message": f"{model} does not take 1x28x28 input"}
    xtr, ytr, xva, yva = load_digits(spec.get("data") or DATA)
    cal, ev = split_holdout(len(xva), float(spec.get("calib_fraction", CALIB_FRACTION)))
    xcal, xev, yev = xva[cal], xva[ev], yva[ev]

    mx = import_mxnet()
    meta = runtime_info(mx)
    meta["threads"] = thread_pools()
    support = precision.cpu_support(mx)
    sym, arg, aux, trained = train(mx, np, model, xtr, ytr, xev, yev, spec, seed)

    shape = (sb, 1, 28, 28)
    batches = padded_batches(xev, yev, sb)
    nd_batches = [mx.io.DataBatch(data=[mx.nd.array(xb)]) for xb, _, _ in batches]
    rows, cells, preds = {}, {}, {}
    for d in dtypes:
        row = rows[d] = _row(d, support)
        if not row["supported"]:
            continue
        try:
            t0 = time.perf_counter()
            csym, carg, caux = precision.convert_symbol(
                mx, sym, arg, aux, d, shape, mx.cpu(), calib_mode=spec.get("calib_mode", "naive"),
                calib_data=xcal, seed=seed)
            row["convert_seconds"] = time.perf_counter() - t0
            row["ops"] = precision.marker_ops(precision.graph_ops(csym))
            cmod = precision.bound_for_inference(mx, csym, carg, caux, shape)
            p = []
            for nb, (_, _, n) in zip(nd_batches, batches):
                cmod.forward(nb, is_train=False)
                p.append(cmod.get_outputs()[0].astype("float32").asnumpy()[:n].argmax(axis=1))
        except Exception as exc:  # this dtype failed; the others are still measured
            row.update(status="error", reason=error_line(str(exc), type(exc).__name__))
            continue
        preds[d] = np.concatenate(p)
        row["correct"] = int((preds[d] == yev).sum())
        row["accuracy"] = row["correct"] / len(yev)
        cells[d] = ScoringRounds(mx, cmod, nd_batches)
    if "float32" not in preds:
        return {"status": "error", "message": f"float32 scoring failed: {rows['float32']['reason']}"}

    # untimed warm-up, then the round size of each dtype (as the throughput worker sizes its rounds)
    from pytest_mxperf.workers.throughput import timed_rounds
    warmup_seconds = float(spec.get("warmup_seconds", 0.5))
    round_target = float(spec.get("round_seconds", 0.1))
    budget = float(spec.get("time_budget", 2.0))
    min_rounds = int(spec.get("min_rounds", 5))
    planned = {}
    for d, cell in cells.items():
        warm = warm_up(cell, 2, warmup_seconds, 50)
        k, n = timed_rounds({"time_budget": budget, "round_seconds": round_target, "min_rounds": min_rounds},
                            max(min(warm[-2:]), 1e-6), latency=False)
        planned[d] = (k, n)
        rows[d]["batches_per_round"] = k
    windows = []
    for r in range(max((n for _, n in planned.values()), default=0)):
        for d, cell in cells.items():
            k, n = planned[d]
            if r < n:
                start = time.monotonic()
                rows[d]["round_seconds"].append(cell.timed(k))
                windows.append(timed_window(start))
    for d in cells:
        k = planned[d][0]
        rows[d]["img_per_s"] = k * sb / statistics.median(rows[d]["round_seconds"])
    base = rows["float32"]
    for d in cells:
        rows[d]["gap_vs_float32"] = rows[d]["accuracy"] - base["accuracy"]
        rows[d]["changed_predictions"] = int((preds[d] != preds["float32"]).sum())
        rows[d]["speedup_vs_float32"] = rows[d]["img_per_s"] / base["img_per_s"]

    sizes = {"calibration_images": len(xcal), "evaluation_images": len(xev), "calib_mode": spec.get("calib_mode", "naive")}
    meta["timed_windows"] = windows
    meta["precision"] = dict(sizes, dtypes=rows)
    return dict({"status": "ok", "message": "", "model": model, "seed": seed, "score_batch": sb,
                 "train_samples": len(xtr), "mxnet_version": meta.get("mxnet_version"),
                 "support": {k: list(v) for k, v in support.items()}, "dtypes": rows, "meta": meta},
                **sizes, **trained)


def main(argv=None):
    return serve(run, argv, "pytest_mxperf.workers.digits_precision")


if __name__ == "__main__":
    main()
