"""N contexts vs 1 context: does data parallelism compute the same parameter update?

Run as ``python -m pytest_mxperf.workers.multidevice SPEC.json RESULT.json`` (through
``mxperf.run_module`` / ``runner.run_process``), in a fresh process.

From identical initial weights (numpy, from the seed) and one combined batch of
``batch_size x len(contexts)`` samples, it runs ``steps`` SGD steps (default 1, no
momentum, no weight decay, ``rescale_grad = 1 / total batch``) twice:

* reference: one Module on the first context with the whole batch (no kvstore);
* data parallel: one Module over all ``contexts`` with the given ``kvstore``
  (``local``, ``device``, ``nccl``): Module slices the batch across the contexts, the
  kvstore sums the per-device gradients, every device applies the same update.

The two updates must be equal up to float summation order. Result: ``max_abs_diff`` of
the final weights, ``update_rel_err`` = ||dW_parallel - dW_single|| / ||dW_single|| over
all parameters, ``per_param`` detail, and status ok / unavailable / error.

Tolerance used by the tests: ``UPDATE_REL_TOL`` (measured here: ~5e-7 for LeNet and
the MLP on two CPU contexts); ``UPDATE_REL_TOL_TF32`` where float32 ran as TF32 (compute
capability 8.0+, a CUDA 11 build: ``judge/gpu_expectations.update_tolerance`` says why).

Batches are placed as MXNet's Module places a data iterator's: in host memory, and Module
(``DataParallelExecutorGroup._load_general``) copies each slice to its own device.

Models with BatchNorm are refused: each device normalises its slice with its own batch
statistics, so N devices legitimately differ from one (use lenet or mlp).
"""

from __future__ import annotations

import json

from pytest_mxperf.workers.protocol import import_mxnet, mx_contexts, serve, unavailable_kvstore

UPDATE_REL_TOL = 1e-4
#: TF32 keeps 10 mantissa bits: one unit in their last place, relative (judge/gpu_expectations.py)
UPDATE_REL_TOL_TF32 = 2.0 ** -10


def train(mx, sym, init, xs, ys, ctxs, kvstore, lr):
    """SGD from weights ``init`` (name -> numpy array) over the batches ``xs`` / ``ys``,
    one step each, on the contexts ``ctxs`` with ``kvstore``; returns the final weights
    (name -> numpy array). ``rescale_grad`` is 1 / the combined batch, no momentum, no
    weight decay; with several contexts Module slices each batch across them (the batch is in
    host memory, as a data iterator's: each slice is copied to its own device)."""
    total = len(xs[0])
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=ctxs)
    mod.bind(data_shapes=[("data", xs[0].shape)], label_shapes=[("softmax_label", (total,))],
             for_training=True)
    mod.init_params(arg_params={k: mx.nd.array(v) for k, v in init.items()}, aux_params={},
                    allow_missing=False, force_init=True)
    mod.init_optimizer(kvstore=kvstore, optimizer="sgd",
                       optimizer_params={"learning_rate": lr, "momentum": 0.0, "wd": 0.0,
                                         "rescale_grad": 1.0 / total})
    for x, y in zip(xs, ys):
        host = mx.cpu()
        mod.forward(mx.io.DataBatch(data=[mx.nd.array(x, ctx=host)], label=[mx.nd.array(y, ctx=host)]),
                    is_train=True)
        mod.backward()
        mod.update()
    mx.nd.waitall()
    arg, _ = mod.get_params()
    return {k: v.asnumpy() for k, v in arg.items()}


def run(spec):
    """One check (``model``, ``kvstore``), or several in this one process: ``checks``, a list
    of {"model", "kvstore"} that share the rest of ``spec``. Several give {"status": "ok",
    "checks": [one check's result each, in order]}: MXNet is imported once for them all (the
    daily session's four CPU checks took four processes, each mostly its import)."""
    import numpy as np

    mx = import_mxnet()
    if "checks" not in spec:
        return _check(mx, np, spec)
    checks = list(spec["checks"])
    if not checks:
        return {"status": "error", "message": "no checks given"}
    base = {k: v for k, v in spec.items() if k != "checks"}
    return {"status": "ok", "message": "", "checks": [_check(mx, np, dict(base, **c)) for c in checks]}


def _check(mx, np, spec):
    from pytest_mxperf import zoo
    from pytest_mxperf.workers.dist_worker import initial_params

    model = spec.get("model", "lenet")
    names = list(spec.get("contexts") or ["cpu:0", "cpu:1"])
    kvstore = spec.get("kvstore", "device")
    b = int(spec.get("batch_size", 32))
    steps = int(spec.get("steps", 1))
    seed = int(spec.get("seed", 0))
    lr = float(spec.get("learning_rate", 0.1))
    if len(names) < 2:
        return {"status": "error", "message": "needs at least two contexts to compare with one"}
    unavailable = unavailable_kvstore(names, kvstore, mx.context.num_gpus)
    if unavailable:
        return {"status": "unavailable", "message": unavailable}
    mspec = zoo.get_model(model)
    sym = zoo.build_symbol(model)
    if any(op.get("op") == "BatchNorm" for op in json.loads(sym.tojson())["nodes"]):
        return {"status": "error", "message": f"{model} has BatchNorm: per-device batch statistics differ "
                                              "from one device's by design; use a model without BatchNorm"}
    total = b * len(names)
    rng = np.random.RandomState(seed)
    xs = [rng.uniform(-1, 1, size=(total,) + tuple(mspec.input_shape)).astype(np.float32) for _ in range(steps)]
    ys = [rng.randint(0, mspec.num_classes, size=(total,)).astype(np.float32) for _ in range(steps)]
    init = {k: v.asnumpy() for k, v in initial_params(mx, sym, mspec.input_shape, total, seed).items()}

    ctxs = mx_contexts(mx, names)
    single = train(mx, sym, init, xs, ys, [ctxs[0]], "local", lr)
    multi = train(mx, sym, init, xs, ys, ctxs, kvstore, lr)
    num = den = 0.0
    max_abs = 0.0
    per = {}
    for k in sorted(init):
        d1 = single[k].astype(np.float64) - init[k]
        dn = multi[k].astype(np.float64) - init[k]
        diff = float(np.abs(multi[k] - single[k]).max())
        max_abs = max(max_abs, diff)
        num += float(((dn - d1) ** 2).sum())
        den += float((d1 ** 2).sum())
        per[k] = {"max_abs_diff": diff, "update_norm": float(np.sqrt((d1 ** 2).sum()))}
    rel = (num ** 0.5) / (den ** 0.5) if den > 0 else None
    return {"status": "ok", "message": "", "model": model, "contexts": names, "kvstore": kvstore,
            "batch_per_device": b, "total_batch": total, "steps": steps, "max_abs_diff": max_abs,
            "update_rel_err": rel, "update_norm": den ** 0.5, "per_param": per}


def main(argv=None):
    # A failed multidevice worker writes a one-line error result; see worker.serve.
    return serve(run, argv, "pytest_mxperf.workers.multidevice")


if __name__ == "__main__":
    main()
