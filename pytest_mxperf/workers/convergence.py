"""Time-to-accuracy, in the manner of MLPerf: train until a validation accuracy is reached.

Run as ``python -m pytest_mxperf.workers.convergence SPEC.json RESULT.json`` (through
``mxperf.run_module`` / ``runner.run_process``), in a fresh process.

Data: ``pytest_mxperf/data/digits28.npz`` (the UCI hand-written digits at 28x28, a fixed
train / hold-out split; see data/README.md). Model: a zoo network on 1x28x28 (LeNet by
default). Method, all seeded from ``seed`` (MXNet's and numpy's RNGs: initial weights
and the per-epoch shuffle):

* Module over ``contexts`` (batch per device ``batch_size``; total = per device x
  devices), Xavier init, SGD (learning rate, momentum 0.9, wd 1e-4, rescale 1/total) or
  the optimizer given, kvstore ``device`` for several contexts;
* one epoch = one shuffled pass over the training set (last partial batch discarded);
* after each epoch, accuracy on the whole hold-out set (padding removed);
* stop at the first epoch whose validation accuracy >= ``target_accuracy`` or after
  ``max_epochs``.

Result: ``reached`` (bool), ``epochs`` (to target, or run), ``seconds_to_accuracy``
(training plus evaluation time from the first batch to the evaluation that reached the
target, as MLPerf counts it; bind and init excluded), ``train_seconds`` (without the
evaluations), per-epoch ``history`` of validation accuracy and seconds, and the
samples/s of the training passes.
"""

from __future__ import annotations

import time
from pathlib import Path

from pytest_mxperf.workers.protocol import import_mxnet, missing_gpus, mx_contexts, serve

DATA = Path(__file__).resolve().parent.parent / "data" / "digits28.npz"
DEFAULT_TARGET = 0.95



def load_digits(path=DATA):
    """(x_train, y_train, x_val, y_val) as float32 N x 1 x 28 x 28 in [0, 1] and float32 labels."""
    import numpy as np

    with np.load(path) as z:
        def img(a):
            return (a.astype(np.float32) / 255.0).reshape(len(a), 1, 28, 28)
        return img(z["x_train"]), z["y_train"].astype(np.float32), img(z["x_val"]), z["y_val"].astype(np.float32)


def padded_batches(x, y, batch):
    """[(images, labels, n)] in batches of ``batch``, the last padded with zeros; n: the
    real images of the batch."""
    import numpy as np

    out = []
    for i in range(0, len(x), batch):
        xb, yb = x[i:i + batch], y[i:i + batch]
        n = len(xb)
        if n < batch:
            xb = np.concatenate([xb, np.zeros((batch - n,) + xb.shape[1:], xb.dtype)])
            yb = np.concatenate([yb, np.zeros(batch - n, yb.dtype)])
        out.append((xb, yb, n))
    return out


def run(spec):
    import numpy as np

    from pytest_mxperf import zoo

    model = spec.get("model", "lenet")
    names = list(spec.get("contexts") or ["cpu:0"])
    b = int(spec.get("batch_size", 32))
    seed = int(spec.get("seed", 0))
    target = float(spec.get("target_accuracy", DEFAULT_TARGET))
    max_epochs = int(spec.get("max_epochs", 30))
    total = b * len(names)
    # what the spec alone decides, before MXNet's import (2-3 s)
    mspec = zoo.get_model(model)
    if tuple(mspec.input_shape) != (1, 28, 28):
        return {"status": "error", "message": f"{model} does not take 1x28x28 input"}
    xtr, ytr, xva, yva = load_digits(spec.get("data") or DATA)
    if total > len(xtr):
        return {"status": "error", "message": f"total batch {total} exceeds the {len(xtr)} training samples"}

    mx = import_mxnet()
    missing = missing_gpus(names, mx.context.num_gpus)
    if missing:
        return {"status": "unavailable", "message": missing}
    ctxs = mx_contexts(mx, names)

    mx.random.seed(seed)
    np.random.seed(seed)
    rng = np.random.RandomState(seed)
    sym = zoo.build_symbol(model)
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=ctxs)
    mod.bind(data_shapes=[("data", (total, 1, 28, 28))], label_shapes=[("softmax_label", (total,))],
             for_training=True)
    mod.init_params(initializer=mx.init.Xavier(magnitude=2.0))
    optimizer = spec.get("optimizer", "sgd")
    params = {"learning_rate": float(spec.get("learning_rate", 0.1)), "wd": float(spec.get("wd", 1e-4)),
              "rescale_grad": 1.0 / total}
    if optimizer == "sgd":
        params["momentum"] = float(spec.get("momentum", 0.9))
    kv = spec.get("kvstore") or ("device" if len(ctxs) > 1 else "local")
    mod.init_optimizer(kvstore=kv, optimizer=optimizer, optimizer_params=params)

    # Validation batches, padded to the bound batch size; the padding is ignored.
    val_batches = [(mx.io.DataBatch(data=[mx.nd.array(x)], label=[mx.nd.array(y)]), n)
                   for x, y, n in padded_batches(xva, yva, total)]

    def evaluate():
        correct = 0
        for batch, n in val_batches:
            mod.forward(batch, is_train=False)
            pred = mod.get_outputs()[0].asnumpy()[:n].argmax(axis=1)
            correct += int((pred == batch.label[0].asnumpy()[:n]).sum())
        return correct / len(xva)

    steps_per_epoch = len(xtr) // total
    history = []
    reached = False
    train_seconds = 0.0
    t_start = time.perf_counter()
    epoch = 0
    for epoch in range(1, max_epochs + 1):
        order = rng.permutation(len(xtr))
        batches = [mx.io.DataBatch(data=[mx.nd.array(xtr[idx])], label=[mx.nd.array(ytr[idx])])
                   for idx in (order[s * total:(s + 1) * total] for s in range(steps_per_epoch))]
        mx.nd.waitall()
        t0 = time.perf_counter()
        for batch in batches:
            mod.forward(batch, is_train=True)
            mod.backward()
            mod.update()
        mx.nd.waitall()
        dt = time.perf_counter() - t0
        train_seconds += dt
        acc = evaluate()
        history.append({"epoch": epoch, "val_accuracy": acc, "train_seconds": dt,
                        "elapsed": time.perf_counter() - t_start})
        print(f"mxperf-convergence: epoch={epoch} val_accuracy={acc:.4f} train_seconds={dt:.3f}", flush=True)
        if acc >= target:
            reached = True
            break
    elapsed = time.perf_counter() - t_start
    samples = steps_per_epoch * total * epoch
    return {
        "status": "ok", "message": "", "model": model, "contexts": names, "batch_per_device": b,
        "total_batch": total, "seed": seed, "optimizer": optimizer, "kvstore": kv,
        "target_accuracy": target, "max_epochs": max_epochs, "reached": reached, "epochs": epoch,
        "final_val_accuracy": history[-1]["val_accuracy"] if history else None,
        "seconds_to_accuracy": elapsed if reached else None, "elapsed_seconds": elapsed,
        "train_seconds": train_seconds, "train_samples_per_second": samples / train_seconds if train_seconds else None,
        "steps_per_epoch": steps_per_epoch, "train_samples": len(xtr), "val_samples": len(xva),
        "history": history,
    }


def main(argv=None):
    # A failed convergence worker writes a one-line error result; see worker.serve.
    return serve(run, argv, "pytest_mxperf.workers.convergence")


if __name__ == "__main__":
    main()
