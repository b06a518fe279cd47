"""Communication cost per batch: kvstore push/pull of a model's gradients, and compute.

Run as ``python -m pytest_mxperf.workers.commbench SPEC.json RESULT.json`` (through
``mxperf.run_module`` / ``runner.run_process``), in a fresh process.

The method is MXNet's ``tools/bandwidth/measure.py``: take the shapes of the network's
learnable parameters from the symbol's ``infer_shape``, ``kv.init`` one key per array,
then each round push one random gradient per context for every key and pull every key
back into one weight array per context, and wait for all of them (``waitall``). With no
optimizer set on the kvstore, the pulled value is the sum of the pushed gradients: that
is checked (``error``, relative). Reported per round (= per batch: a data-parallel step
pushes and pulls every gradient once):

* ``comm_seconds``: median seconds of a push+pull round;
* ``bandwidth_gbps``: measure.py's figure, ``size x 2 x (n-1)/n / time`` (0 for n=1);
* ``moved_gbps``: bytes pushed plus bytes pulled over all contexts per second.

On CPU contexts every "transfer" is a memory copy (plus the sum) in the same RAM: this is
memory bandwidth, not PCIe or NVLink, and says nothing about GPUs.

**Duet** (A/B mode, the spec has ``control``): the worker builds the kvstore and its arrays
once, runs ``warmup`` push+pull rounds untimed, then serves the parent's timed rounds
through ``protocol.serve_rounds``: a round of k is k push+pull rounds, each one ending in
``waitall`` as above (k = ``batches_per_round``). ``round_seconds`` are those rounds,
``comm_seconds`` the median of round / k, and the figures above are computed from it.
The sum is checked after the last round; ``compute: true`` is measured after the parent's
"finish", when this worker runs alone (its partner waits or has exited), and is shown only.

``compute: true`` also times the training step (forward, backward, SGD update; Module on
the first context, no kvstore, ``waitall`` around rounds, median seconds per batch), for
networks that are not in the zoo (the wide MLP); zoo networks take their compute time
from a training cell (``mxperf.measure(..., mode="train")``).

Networks: ``{"model": "<zoo name>"}`` or ``{"wide_mlp": {"inputs": 25000, "hidden":
[1024, 512], "outputs": 20000}}`` - the forum's wide MLP (250k inputs, 1024 and 512
hidden, 200k outputs) scaled down by 10 in its two wide layers to fit a small machine;
it is still almost all parameters (36.4M weights for 1.5k activations per sample).
"""

from __future__ import annotations

import statistics
import time

from pytest_mxperf.workers.protocol import (
    await_warmup_turn,
    import_mxnet,
    mx_contexts,
    serve,
    serve_rounds,
    unavailable_kvstore,
)
from pytest_mxperf.zoo.count import prod

#: the stated ratio: a data-parallel step is communication-bound when exchanging its
#: gradients (one push + pull round) costs at least this fraction of computing them (one
#: training step on one device at the per-device batch). Measured on this suite's 2-core
#: machine at batch 8 per device: conv nets ~0.05-0.1 (ResNet-50, Inception-BN), the wide
#: MLP ~0.5. On CPU both sides are memory traffic in the same RAM; on GPUs the compute
#: shrinks by orders of magnitude while the same bytes cross PCIe, so a CPU reading of
#: "communication-bound" is a lower bound of the problem.
COMM_BOUND_RATIO = 0.25

WIDE_MLP_FORUM = {"inputs": 250000, "hidden": [1024, 512], "outputs": 200000}
WIDE_MLP_SCALED = {"inputs": 25000, "hidden": [1024, 512], "outputs": 20000}


def classify(comm_seconds: float, compute_seconds: float, ratio: float = COMM_BOUND_RATIO) -> str:
    """'communication-bound' when comm per batch >= ratio x compute per batch, else 'compute-bound'."""
    if comm_seconds is None or compute_seconds is None or compute_seconds <= 0:
        raise ValueError("need positive communication and compute seconds per batch")
    return "communication-bound" if comm_seconds >= ratio * compute_seconds else "compute-bound"


def wide_mlp_params(cfg) -> int:
    dims = [cfg["inputs"]] + list(cfg["hidden"]) + [cfg["outputs"]]
    return sum(a * b + b for a, b in zip(dims[:-1], dims[1:]))



def build_network(mx, net):
    """(symbol, input shape without batch) of a zoo model or the wide MLP."""
    if "wide_mlp" in net:
        cfg = net["wide_mlp"]
        x = mx.sym.Variable("data")
        for i, h in enumerate(cfg["hidden"]):
            x = mx.sym.FullyConnected(x, num_hidden=int(h), name=f"fc{i + 1}")
            x = mx.sym.Activation(x, act_type="relu", name=f"relu{i + 1}")
        x = mx.sym.FullyConnected(x, num_hidden=int(cfg["outputs"]), name="out")
        return mx.sym.SoftmaxOutput(x, name="softmax"), (int(cfg["inputs"]),), int(cfg["outputs"])
    from pytest_mxperf import zoo
    spec = zoo.get_model(net["model"])
    return zoo.build_symbol(net["model"]), tuple(spec.input_shape), spec.num_classes


def param_shapes(sym, data_shape):
    arg_shapes, _, _ = sym.infer_shape(data=data_shape)
    return [s for n, s in zip(sym.list_arguments(), arg_shapes) if n not in ("data", "softmax_label")]


class PushPull:
    """A kvstore with one key per parameter array, a random gradient per context for every
    key and one weight array per context: the cell a process (or a duet's rounds) times."""

    def __init__(self, mx, shapes, ctxs, kv_type):
        self.mx = mx
        self.kv = mx.kv.create(kv_type)
        for i, s in enumerate(shapes):
            self.kv.init(i, mx.nd.zeros(s))
        self.grads_val = [[mx.random.uniform(-1, 1, shape=s) for _ in ctxs] for s in shapes]
        self.grads = [[g.as_in_context(c) for g, c in zip(gs, ctxs)] for gs in self.grads_val]
        self.weights = [[mx.nd.zeros(s, c) for c in ctxs] for s in shapes]
        mx.nd.waitall()

    def step(self):
        """One push+pull round: every gradient pushed, every key pulled, all of it finished."""
        for i, g in enumerate(self.grads):
            self.kv.push(i, g, priority=-i)
        for i, w in enumerate(self.weights):
            self.kv.pull(i, w, priority=-i)
        self.mx.nd.waitall()

    def timed(self, n):
        """n push+pull rounds (each one synchronised) after a full synchronisation; seconds."""
        self.mx.nd.waitall()
        t0 = time.perf_counter()
        for _ in range(n):
            self.step()
        return time.perf_counter() - t0

    def error(self):
        """Without an optimizer the store keeps the sum of what was pushed: the largest
        relative difference between what came back and that sum."""
        import numpy as np
        err = 0.0
        for gs, ws in zip(self.grads_val, self.weights):
            expect = sum(g.asnumpy().astype(np.float64) for g in gs)
            scale = max(1e-12, float(np.abs(expect).max()))
            for w in ws:
                err = max(err, float(np.abs(w.asnumpy() - expect).max()) / scale)
        return err


def measure_comm(mx, shapes, ctxs, kv_type, rounds, warmup):
    cell = PushPull(mx, shapes, ctxs, kv_type)
    for _ in range(warmup):
        cell.timed(1)
    times = [cell.timed(1) for _ in range(rounds)]
    return times, cell.error(), cell.kv.type


def measure_compute(mx, sym, input_shape, num_classes, ctx, batch, rounds, warmup, seed=0):
    """Seconds of one device's forward and backward per batch: the part of a step that data
    parallelism divides among devices. The optimizer's update is left out: with the device
    kvstore MXNet runs it on the kvstore (update_on_kvstore), and like the exchange it costs
    per parameter whatever the batch (for this wide MLP on CPU it is memory-bound and was
    most of a step: 0.19 s at 1 sample a device against 0.046 s of exchange, AMD EPYC, 2 vCPUs)."""
    import numpy as np

    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=[ctx])
    mod.bind(data_shapes=[("data", (batch,) + tuple(input_shape))], label_shapes=[("softmax_label", (batch,))],
             for_training=True)
    mx.random.seed(seed)
    mod.init_params(initializer=mx.init.Xavier(magnitude=2.0))
    rng = np.random.RandomState(seed)
    data = mx.nd.array(rng.uniform(-1, 1, size=(batch,) + tuple(input_shape)))
    label = mx.nd.array(rng.randint(0, num_classes, size=(batch,)))
    b = mx.io.DataBatch(data=[data], label=[label])
    times = []
    for r in range(warmup + rounds):
        mx.nd.waitall()
        t0 = time.perf_counter()
        mod.forward(b, is_train=True)
        mod.backward()
        mx.nd.waitall()
        if r >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def run(spec):
    mx = import_mxnet()

    names = list(spec.get("contexts") or ["cpu:0"])
    kv_type = spec.get("kvstore") or ("device" if len(names) > 1 else "local")
    gpus = [n for n in names if n.startswith("gpu")]
    unavailable = unavailable_kvstore(names, kv_type, mx.context.num_gpus)
    if unavailable:
        return {"status": "unavailable", "message": unavailable}
    net = spec.get("network") or {"model": spec.get("model", "resnet50_v2")}
    batch = int(spec.get("batch_size", 32))
    rounds = int(spec.get("rounds", 10))
    warmup = int(spec.get("warmup", 2))
    sym, input_shape, num_classes = build_network(mx, net)
    shapes = param_shapes(sym, (batch,) + tuple(input_shape))
    nparams = sum(int(prod(s)) for s in shapes)
    size_bytes = 4.0 * nparams
    ctxs = mx_contexts(mx, names)
    if spec.get("control"):
        # a duet (A/B): built and warmed up once (alone on a GPU duet: the parent's turn), then
        # the parent's rounds, each k push+pulls
        window = await_warmup_turn(spec)
        cell = PushPull(mx, shapes, ctxs, kv_type)
        for _ in range(max(1, warmup)):
            cell.timed(1)
        window["ended"] = time.monotonic()
        times, per_round = serve_rounds(cell, spec["control"], {"units": "push+pull rounds", "warmup_window": window})
        err, kv_real = cell.error(), cell.kv.type
        del cell
        comm = statistics.median(t / per_round for t in times)
    else:
        times, err, kv_real = measure_comm(mx, shapes, ctxs, kv_type, rounds, warmup)
        per_round = 1
        comm = statistics.median(times)
    n = len(ctxs)
    out = {
        "status": "ok", "message": "", "network": net, "contexts": names, "kvstore": kv_real,
        "device": "gpu" if gpus else "cpu", "num_arrays": len(shapes), "num_params": nparams,
        "size_mb": size_bytes / 1e6, "round_seconds": times, "batches_per_round": per_round,
        "duet": bool(spec.get("control")), "comm_seconds": comm,
        "bandwidth_gbps": size_bytes * 2 * (n - 1) / n / comm / 1e9,
        "moved_gbps": size_bytes * 2 * n / comm / 1e9, "error": err,
        "note": ("cpu contexts: every transfer is a memory copy in the same RAM (memory bandwidth, "
                 "not PCIe)") if not gpus else "",
    }
    if spec.get("control"):
        out["meta"] = {"warmup_window": window}
    if spec.get("compute"):
        ct = measure_compute(mx, sym, input_shape, num_classes, ctxs[0], batch,
                             int(spec.get("compute_rounds", 5)), int(spec.get("compute_warmup", 2)))
        out["compute_round_seconds"] = ct
        out["compute_seconds"] = statistics.median(ct)
        out["comm_to_compute"] = comm / out["compute_seconds"]
        out["classification"] = classify(comm, out["compute_seconds"])
    return out


def main(argv=None):
    # A failed commbench worker writes a one-line error result; see worker.serve.
    return serve(run, argv, "pytest_mxperf.workers.commbench")


if __name__ == "__main__":
    main()
