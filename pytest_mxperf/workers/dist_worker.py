"""One worker of a (possibly distributed) kvstore training run.

Run as ``python -m pytest_mxperf.workers.dist_worker SPEC.json RESULT.json`` by ``dist.py``: with
the DMLC environment of a ps-lite worker for ``dist_sync`` / ``dist_async`` /
``dist_device_sync``, or with no DMLC environment for the single-process ``local``
reference run.

What it does, deterministically from ``seed``:

* the model is a zoo symbol (default the MNIST ``mlp``); initial weights are drawn with
  numpy from the seed (never MXNet's RNG), so a local run and every distributed worker
  start from exactly the same weights (and the kvstore's ``init`` takes rank 0's anyway);
* the data is a fixed pool of synthetic batches of ``global_batch`` samples (inputs
  uniform in [-1, 1), labels from a fixed random linear "teacher", so the loss really
  falls); at step ``i`` every worker takes *its shard* of combined batch ``i``: rows
  ``rank*b:(rank+1)*b`` with ``b = global_batch / num_workers``. A local run takes the
  whole combined batch, so both see the same total data per step;
* plain SGD (optionally with momentum) with ``rescale_grad = 1 / global_batch``: the
  ``dist_sync`` server sums the workers' gradients, so its update equals the local one
  up to float summation order.

It prints ``mxperf-dist-worker: rank=R step=I`` lines (the launcher's progress checks
and its "last output" report rely on them), writes the final weights to
``weights_path`` (npz) when given, and a JSON result with status, samples/s (timed steps
after warm-up, ``waitall`` at both ends), rank and a weights checksum.

**Resident** (the spec has ``control``: a duet of two clusters, ``measure/cluster.py`` relaying
the parent's rounds to every worker of its cluster): after its warm-up steps the worker serves
rounds (``protocol.serve_duet``), a round of k being k more steps between two ``mx.nd.waitall()``,
until "finish"; then it finishes as above, its samples/s from the median timed round.
"""

from __future__ import annotations

import os
import sys
import time

from pytest_mxperf.workers.protocol import (
    TimedSteps,
    await_warmup_turn,
    import_mxnet,
    mx_contexts,
    serve,
    serve_duet,
)

PREFIX = "mxperf-dist-worker:"



def _say(msg):
    print(f"{PREFIX} {msg}", flush=True)


def initial_params(mx, sym, input_shape, global_batch, seed):
    """Deterministic numpy initial weights (uniform, Xavier-like scale) for every argument."""
    import numpy as np

    arg_shapes, _, _ = sym.infer_shape(data=(global_batch,) + tuple(input_shape),
                                       softmax_label=(global_batch,))
    rng = np.random.RandomState(seed + 7919)
    params = {}
    for name, shape in sorted(zip(sym.list_arguments(), arg_shapes)):
        if name in ("data", "softmax_label"):
            continue
        if name.endswith("_bias") or len(shape) == 1:
            arr = np.zeros(shape, dtype=np.float32)
        else:
            fan_in = int(np.prod(shape[1:]))
            scale = np.sqrt(3.0 / max(1, fan_in))
            arr = rng.uniform(-scale, scale, size=shape).astype(np.float32)
        params[name] = mx.nd.array(arr)
    return params


def make_pool(input_shape, num_classes, global_batch, pool_batches, seed):
    import numpy as np

    rng = np.random.RandomState(seed)
    dim = int(np.prod(input_shape))
    teacher = rng.normal(size=(dim, num_classes)).astype(np.float32)
    xs, ys = [], []
    for _ in range(pool_batches):
        x = rng.uniform(-1.0, 1.0, size=(global_batch,) + tuple(input_shape)).astype(np.float32)
        y = np.argmax(x.reshape(global_batch, -1) @ teacher, axis=1).astype(np.float32)
        xs.append(x)
        ys.append(y)
    return xs, ys


def run(spec):
    import numpy as np

    mx = import_mxnet()
    from pytest_mxperf import zoo

    kv_type = spec.get("kvstore", "local")
    model = spec.get("model", "mlp")
    global_batch = int(spec.get("global_batch", 128))
    steps = int(spec.get("steps", 50))
    warmup = int(spec.get("warmup_steps", 2))
    seed = int(spec.get("seed", 0))
    report_every = max(1, int(spec.get("report_every", 1)))
    step_sleep = float(spec.get("step_sleep", 0.0))
    mspec = zoo.get_model(model)

    kv = mx.kv.create(kv_type)
    rank, nworkers = kv.rank, kv.num_workers
    _say(f"rank={rank} num_workers={nworkers} kvstore={kv.type} pid={os.getpid()}")
    if global_batch % nworkers:
        raise ValueError(f"global batch {global_batch} is not divisible by {nworkers} workers")
    b = global_batch // nworkers

    sym = zoo.build_symbol(model)
    ctx_names = spec.get("contexts") or ["cpu:0"]
    ctxs = mx_contexts(mx, ctx_names)
    if b % len(ctxs):
        raise ValueError(f"worker batch {b} is not divisible by {len(ctxs)} contexts")
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=ctxs)
    mod.bind(data_shapes=[("data", (b,) + tuple(mspec.input_shape))],
             label_shapes=[("softmax_label", (b,))], for_training=True)
    mod.init_params(arg_params=initial_params(mx, sym, mspec.input_shape, global_batch, seed),
                    aux_params={}, allow_missing=False, force_init=True)
    opt_params = {"learning_rate": float(spec.get("learning_rate", 0.1)),
                  "wd": float(spec.get("wd", 0.0)),
                  "rescale_grad": 1.0 / global_batch}
    optimizer = spec.get("optimizer", "sgd")
    if optimizer == "sgd":
        opt_params["momentum"] = float(spec.get("momentum", 0.0))
    mod.init_optimizer(kvstore=kv, optimizer=optimizer, optimizer_params=opt_params)

    xs, ys = make_pool(mspec.input_shape, mspec.num_classes, global_batch,
                       int(spec.get("pool_batches", 8)), seed)
    batches = [mx.io.DataBatch(data=[mx.nd.array(x[rank * b:(rank + 1) * b])],
                               label=[mx.nd.array(y[rank * b:(rank + 1) * b])])
               for x, y in zip(xs, ys)]
    metric = mx.metric.Accuracy()
    losses = []
    done = [0]  # steps run so far

    def step():
        i = done[0]
        batch = batches[i % len(batches)]
        mod.forward(batch, is_train=True)
        mod.backward()
        mod.update()
        done[0] = i + 1
        if (i + 1) % report_every == 0 or (not duet and i == steps - 1):
            out = mod.get_outputs()[0].asnumpy()
            lab = batch.label[0].asnumpy().astype(int)
            losses.append(float(-np.mean(np.log(out[np.arange(len(lab)), lab] + 1e-12))))
            _say(f"rank={rank} step={i + 1} loss={losses[-1]:.4f}")
        if step_sleep:
            time.sleep(step_sleep)

    duet = bool(spec.get("control"))
    rounds_meta = {}
    if duet:
        window = await_warmup_turn(spec)
        for _ in range(max(1, warmup)):
            step()
        mx.nd.waitall()
        _say(f"rank={rank} step={done[0]} warmed up")  # the launcher reads its listening ports from here
        window["ended"] = time.monotonic()
        served = serve_duet(_Rounds(mx, step), spec["control"], {"units": "steps", "warmup_window": window})
        rounds = sorted(served.seconds)
        timed_steps = served.batches
        timed = rounds[len(rounds) // 2] if rounds else 0.0  # the median round (one side's steps each)
        rounds_meta = {"round_seconds": served.seconds, "batches_per_round": served.batches,
                       "meta": {"warmup_window": window}}
    else:
        t_timed = None
        for i in range(steps):
            if i == min(warmup, steps - 1):
                mx.nd.waitall()
                t_timed = time.perf_counter()
                timed_from = i
            step()
        mx.nd.waitall()
        timed = time.perf_counter() - t_timed
        timed_steps = steps - timed_from

    # Final weights: with update_on_kvstore the module pulls them after each update.
    arg, _ = mod.get_params()
    weights = {k: v.asnumpy() for k, v in sorted(arg.items())}
    if spec.get("weights_path"):
        np.savez(spec["weights_path"], **weights)
    # Accuracy of the final weights on this worker's shards of the pool.
    metric.reset()
    for batch in batches:
        mod.forward(batch, is_train=False)
        mod.update_metric(metric, batch.label)
    checksum = float(sum(np.abs(w).astype(np.float64).sum() for w in weights.values()))
    _say(f"rank={rank} done timed_seconds={timed:.3f}")
    return {
        "status": "ok", "message": "", "rank": rank, "num_workers": nworkers, "kvstore": kv.type,
        "worker_batch": b, "global_batch": global_batch, "steps": done[0], "timed_steps": timed_steps,
        "timed_seconds": timed,
        "samples_per_second": b * timed_steps / timed if timed > 0 else None,
        "first_loss": losses[0] if losses else None, "final_loss": losses[-1] if losses else None,
        "train_accuracy": metric.get()[1], "weights_checksum": checksum,
        "weights_path": spec.get("weights_path"), "pid": os.getpid(), **rounds_meta,
    }


class _Rounds(TimedSteps):
    """A duet round of the worker: ``timed(k)`` runs k more steps between two ``waitall``."""

    def __init__(self, mx, step):
        self.mx, self.step = mx, step


def main(argv=None):
    # A failed dist_worker worker must not wait in ps-lite's finalize barrier: it exits
    # at once with code 1 and the launcher stops the rest of the cluster; a normal exit
    # lets the kvstore's destructor finalise ps-lite, so the scheduler and servers exit too.
    return serve(run, argv, "pytest_mxperf.workers.dist_worker", exit_on_success=False, error_exit_code=1)


if __name__ == "__main__":
    sys.exit(main())
