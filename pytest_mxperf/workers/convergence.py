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

from pytest_mxperf.workers.protocol import (await_warmup_turn, import_mxnet, missing_gpus, mx_contexts, serve,
                                            serve_duet)

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


#: rounds an epoch is cut into when a duet alternates two training runs (``duet.run_to_the_end``):
#: LeNet's epoch of the shipped digits takes 0.5-0.9 s on a 2-vCPU VM, so a round is about
#: as long as a throughput duet's (0.15 s); both sides cut their epochs alike (same spec)
DUET_EPOCH_ROUNDS = 4


class Training:
    """One training run to the target, stepped in rounds: ``timed(k)`` runs k rounds, an
    epoch cut into ``epoch_rounds`` of ``steps_per_round`` steps each (a round never crosses
    the end of an epoch; the round that
    ends an epoch evaluates on the hold-out set, and stops the run when the target is
    reached) and returns their seconds, each round ending in ``mx.nd.waitall()``. Its
    seconds to accuracy are the sum of its rounds: training and evaluation from the first
    batch to the evaluation that reached the target, as MLPerf counts it (bind and init are
    done before). ``finished``: the target reached or ``max_epochs`` run."""

    def __init__(self, mx, spec, ctxs, data, epoch_rounds=1):
        import numpy as np

        from pytest_mxperf import zoo

        self.mx = mx
        xtr, ytr, xva, yva = data
        self.xtr, self.ytr, self.n_val = xtr, ytr, len(xva)
        self.model = spec.get("model", "lenet")
        self.seed = int(spec.get("seed", 0))
        self.target = float(spec.get("target_accuracy", DEFAULT_TARGET))
        self.max_epochs = int(spec.get("max_epochs", 30))
        self.total = int(spec.get("batch_size", 32)) * len(ctxs)
        mx.random.seed(self.seed)
        np.random.seed(self.seed)
        self.rng = np.random.RandomState(self.seed)
        mod = mx.mod.Module(zoo.build_symbol(self.model), data_names=["data"], label_names=["softmax_label"],
                            context=ctxs)
        mod.bind(data_shapes=[("data", (self.total, 1, 28, 28))],
                 label_shapes=[("softmax_label", (self.total,))], for_training=True)
        mod.init_params(initializer=mx.init.Xavier(magnitude=2.0))
        self.optimizer = spec.get("optimizer", "sgd")
        params = {"learning_rate": float(spec.get("learning_rate", 0.1)), "wd": float(spec.get("wd", 1e-4)),
                  "rescale_grad": 1.0 / self.total}
        if self.optimizer == "sgd":
            params["momentum"] = float(spec.get("momentum", 0.9))
        self.kv = spec.get("kvstore") or ("device" if len(ctxs) > 1 else "local")
        mod.init_optimizer(kvstore=self.kv, optimizer=self.optimizer, optimizer_params=params)
        self.mod = mod
        # validation batches, padded to the bound batch size; the padding is ignored
        self.val_batches = [(mx.io.DataBatch(data=[mx.nd.array(x)], label=[mx.nd.array(y)]), n)
                            for x, y, n in padded_batches(xva, yva, self.total)]
        self.steps_per_epoch = len(xtr) // self.total
        self.steps_per_round = max(1, -(-self.steps_per_epoch // int(epoch_rounds)))
        self.epoch, self.step, self.batches = 0, 0, None
        self.history, self.round_seconds = [], []
        self.reached = self.finished = False
        self.train_seconds = 0.0
        self._epoch_train = 0.0

    def _evaluate(self):
        correct = 0
        for batch, n in self.val_batches:
            self.mod.forward(batch, is_train=False)
            pred = self.mod.get_outputs()[0].asnumpy()[:n].argmax(axis=1)
            correct += int((pred == batch.label[0].asnumpy()[:n]).sum())
        return correct / self.n_val

    def _round(self):
        mx = self.mx
        t0 = time.perf_counter()
        if self.batches is None:  # a new epoch: its shuffle and its batches
            self.epoch += 1
            order = self.rng.permutation(len(self.xtr))
            self.batches = [mx.io.DataBatch(data=[mx.nd.array(self.xtr[idx])], label=[mx.nd.array(self.ytr[idx])])
                            for idx in (order[s * self.total:(s + 1) * self.total]
                                        for s in range(self.steps_per_epoch))]
            self.step, self._epoch_train = 0, 0.0
        t_train = time.perf_counter()
        for batch in self.batches[self.step:self.step + self.steps_per_round]:
            self.mod.forward(batch, is_train=True)
            self.mod.backward()
            self.mod.update()
        mx.nd.waitall()
        self.step = min(self.steps_per_epoch, self.step + self.steps_per_round)
        self._epoch_train += time.perf_counter() - t_train
        if self.step >= self.steps_per_epoch:  # the epoch's last round evaluates it
            self.batches = None
            self.train_seconds += self._epoch_train
            acc = self._evaluate()
            self.history.append({"epoch": self.epoch, "val_accuracy": acc, "train_seconds": self._epoch_train,
                                 "elapsed": sum(self.round_seconds) + time.perf_counter() - t0})
            print(f"mxperf-convergence: epoch={self.epoch} val_accuracy={acc:.4f} "
                  f"train_seconds={self._epoch_train:.3f}", flush=True)
            self.reached = acc >= self.target
            self.finished = self.reached or self.epoch >= self.max_epochs
        took = time.perf_counter() - t0
        self.round_seconds.append(took)
        return took

    def timed(self, k):
        """k rounds (fewer when the run finishes first); their seconds."""
        took = 0.0
        for _ in range(int(k)):
            if self.finished:
                break
            took += self._round()
        return took

    def result(self, names, b):
        elapsed = sum(self.round_seconds)
        samples = self.steps_per_epoch * self.total * self.epoch
        return {
            "status": "ok", "message": "", "model": self.model, "contexts": names, "batch_per_device": b,
            "total_batch": self.total, "seed": self.seed, "optimizer": self.optimizer, "kvstore": self.kv,
            "target_accuracy": self.target, "max_epochs": self.max_epochs, "reached": self.reached,
            "epochs": self.epoch,
            "final_val_accuracy": self.history[-1]["val_accuracy"] if self.history else None,
            "seconds_to_accuracy": elapsed if self.reached else None, "elapsed_seconds": elapsed,
            "train_seconds": self.train_seconds,
            "train_samples_per_second": samples / self.train_seconds if self.train_seconds else None,
            "steps_per_epoch": self.steps_per_epoch, "steps_per_round": self.steps_per_round,
            "rounds": len(self.round_seconds), "train_samples": len(self.xtr), "val_samples": self.n_val,
            "history": self.history,
            # kept with the run's record (the scalars above are its ``meta["result"]``)
            "meta": {"history": self.history},
        }


def run(spec):
    from pytest_mxperf import zoo

    model = spec.get("model", "lenet")
    names = list(spec.get("contexts") or ["cpu:0"])
    b = int(spec.get("batch_size", 32))
    total = b * len(names)
    # what the spec alone decides, before MXNet's import (2-3 s)
    mspec = zoo.get_model(model)
    if tuple(mspec.input_shape) != (1, 28, 28):
        return {"status": "error", "message": f"{model} does not take 1x28x28 input"}
    data = load_digits(spec.get("data") or DATA)
    if total > len(data[0]):
        return {"status": "error", "message": f"total batch {total} exceeds the {len(data[0])} training samples"}

    mx = import_mxnet()
    missing = missing_gpus(names, mx.context.num_gpus)
    if missing:
        return {"status": "unavailable", "message": missing}
    ctxs = mx_contexts(mx, names)
    if spec.get("control"):
        # a duet: the parent alternates this run's rounds with its partner's, the same seed
        # on both sides, until each side says it is finished (``duet.run_to_the_end``). A GPU
        # duet's side binds alone, its turn given by the parent; its first rounds (cuDNN's
        # autotune among them) are timed, as in a process, and run while its partner waits
        window = await_warmup_turn(spec)
        run_ = Training(mx, spec, ctxs, data, epoch_rounds=DUET_EPOCH_ROUNDS)
        window["ended"] = time.monotonic()
        served = serve_duet(run_, spec["control"], {"units": "rounds of training", "warmup_window": window,
                                                    "steps_per_round": run_.steps_per_round})
        out = run_.result(names, b)
        # its rounds in the order they ran, round j of each side back to back: the pair's
        # ratio is judged from them (``stats.duet_run_log_ratio``)
        out["round_seconds"], out["batches_per_round"] = list(served.seconds), 1
        return out
    run_ = Training(mx, spec, ctxs, data)
    while not run_.finished:
        run_.timed(1)  # one epoch a round: its training, then its evaluation
    return run_.result(names, b)


def figures(payload):
    """A run's result as the cell's figures (``Measurer.measure_module``'s ``figures``): its
    seconds and epochs to the target; a run that never reached the target has none."""
    if not payload["reached"]:
        return {}
    return {"seconds_to_target": payload["seconds_to_accuracy"], "epochs_to_target": float(payload["epochs"])}


def main(argv=None):
    # A failed convergence worker writes a one-line error result; see worker.serve.
    return serve(run, argv, "pytest_mxperf.workers.convergence")


if __name__ == "__main__":
    main()
