"""What a cell computes, the same numbers under every MXNet and numpy release, and a compact
record of its answers.

Child side (imports numpy; MXNet is the caller's ``mx``). Two installs, or two sessions, of
one cell compute on the same numbers:

* **Weights** come from numpy's legacy ``RandomState`` (its stream is frozen by numpy's
  compatibility policy), one generator per parameter seeded by the cell's seed and the
  parameter's name, so a parameter's values depend on its name and shape only, never on the
  order MXNet lists them in nor on MXNet's own RNG (whose streams changed between releases).
  The rule follows MXNet's names as its ``Xavier(magnitude=2)`` initialiser does: ``*weight``
  uniform in +-sqrt(2 / ((fan_in + fan_out) / 2)); ``*gamma`` and ``*moving_var`` (Gluon's
  ``*running_var``) ones; ``*bias``, ``*beta``, the means and anything else zeros.
* **Inputs** are uniform in [-1, 1) (as MXNet's ``benchmark_score.py``), labels integers
  below the class count, from a generator of the seed alone.

**The fingerprint** of an array is a sketch that a comparison can measure a relative
distance on without keeping the array: its shape, its L2 norm and ``SKETCH`` sums of its
elements times fixed random signs over ``SKETCH`` contiguous chunks. For two arrays a, b
the distance of their sketches over the norm of b's estimates ||a - b|| / ||b|| (each
chunk's signed sum of differences has the variance of that chunk's squared differences),
within a factor of about 2 at 16 chunks (``judge/answers.distance``). Signs come from
``RandomState(SIGN_SEED)`` too.
"""

from __future__ import annotations

import zlib
from typing import Dict, List, Optional, Sequence, Tuple

#: chunks of an output's sketch, and of an operator output's (many of those are kept)
SKETCH = 16
OP_SKETCH = 8
#: the seed of the fixed signs
SIGN_SEED = 20261125
#: significant digits kept of each number (the tolerances are far coarser than 1e-7)
DIGITS = 9

_signs = None


def _param_rng(seed: int, name: str):
    import numpy as np
    return np.random.RandomState((zlib.crc32(name.encode()) + 1000003 * int(seed)) % 2 ** 32)


def _rule(name: str, shape: Tuple[int, ...]):
    """("uniform", bound) / ("ones", None) / ("zeros", None): how parameter ``name`` starts."""
    if name.endswith("weight") and len(shape) >= 2:
        hw = 1
        for s in shape[2:]:
            hw *= int(s)
        fan_in, fan_out = shape[1] * hw, shape[0] * hw
        return "uniform", (2.0 / max(1.0, (fan_in + fan_out) / 2.0)) ** 0.5
    if name.endswith(("gamma", "moving_var", "running_var")):
        return "ones", None
    return "zeros", None


#: elements drawn at a time when a parameter is filled in place (its values are those of one
#: draw of the whole: the legacy stream draws one double an element, in order)
CHUNK = 1 << 20


def param_value(name: str, shape: Sequence[int], seed: int):
    """The float32 numpy value of parameter ``name`` of ``shape`` in a cell of ``seed``."""
    import numpy as np

    arr = np.empty(tuple(int(s) for s in shape), np.float32)
    fill(name, arr, seed)
    return arr


def fill(name: str, arr, seed: int) -> None:
    """Fill ``arr`` (an NDArray, or a numpy array) in place with parameter ``name``'s values
    in a cell of ``seed``, ``CHUNK`` elements at a time (a network's weights are never held
    twice: the peak memory of a measuring process is its own)."""
    shape = tuple(int(s) for s in arr.shape)
    kind, bound = _rule(name, shape)
    if kind != "uniform":
        arr[:] = 1.0 if kind == "ones" else 0.0
        return
    rng = _param_rng(seed, name)
    n = 1
    for s in shape:
        n *= s
    flat = arr.reshape((n,))
    for a in range(0, n, CHUNK):
        b = min(n, a + CHUNK)
        flat[a:b] = rng.uniform(-bound, bound, size=b - a).astype("float32")


def initializer(mx, seed: int):
    """An ``mx.init.Initializer`` that gives every parameter its ``param_value`` (Module's
    ``init_params`` and Gluon's ``initialize`` call it with each parameter's name)."""

    class Seeded(mx.init.Initializer):
        def __call__(self, desc, arr):
            fill(str(desc), arr, seed)

        def dumps(self):
            return f'["seeded", {{"seed": {int(seed)}}}]'

    return Seeded()


def input_batch(shape: Sequence[int], seed: int):
    """The cell's input batch: float32 uniform in [-1, 1)."""
    import numpy as np
    return np.random.RandomState(int(seed)).uniform(-1.0, 1.0, size=tuple(shape)).astype(np.float32)


def labels(n: int, classes: int, seed: int):
    import numpy as np
    return np.random.RandomState(int(seed) + 1).randint(0, classes, size=(int(n),)).astype(np.float32)


def _sign_vector(n: int):
    global _signs
    import numpy as np
    if _signs is None or len(_signs) < n:
        # one stream, grown as needed: the first n signs never depend on how long it got
        _signs = np.random.RandomState(SIGN_SEED).randint(0, 2, size=max(n, 1 << 16)).astype(np.float64) * 2 - 1
    return _signs[:n]


def _round(x: float) -> float:
    return float(f"{x:.{DIGITS}g}")


def sketch(array, chunks: int = SKETCH) -> Dict:
    """The sketch of one array (numpy, any dtype): ``shape``, ``norm`` and ``sums``."""
    import numpy as np

    a = np.asarray(array, dtype=np.float64).ravel()
    n = a.size
    out = {"shape": list(np.shape(array)), "norm": _round(float(np.sqrt(np.dot(a, a)))) if n else 0.0}
    if not np.all(np.isfinite(a)):
        out["nonfinite"] = int(np.count_nonzero(~np.isfinite(a)))
        a = np.where(np.isfinite(a), a, 0.0)
    k = max(1, min(chunks, n))
    starts = (np.arange(k) * n) // k
    out["sums"] = [_round(float(s)) for s in np.add.reduceat(a * _sign_vector(n), starts)] if n else []
    return out


def _probabilities(a) -> bool:
    """Whether ``a`` holds rows of probabilities (a softmax's output): non-negative, each row
    of its last axis summing to 1."""
    import numpy as np
    if a.ndim < 2 or a.size == 0 or not np.all(np.isfinite(a)) or a.min() < 0:
        return False
    return bool(np.all(np.abs(a.sum(axis=-1, dtype=np.float64) - 1.0) < 1e-3))


def output_sketch(array) -> Dict:
    """An output's sketch. Probabilities are sketched as centred log-probabilities (the
    logits up to each row's constant): a softmax of small logits is nearly uniform, and a
    change of the logits would be lost in its values' own size."""
    import numpy as np
    a = np.asarray(array)
    if _probabilities(a):
        lg = np.log(np.maximum(a.astype(np.float64), 1e-30))
        return dict(sketch(lg - lg.mean(axis=-1, keepdims=True)), of="centred-log")
    return sketch(a)


def fingerprint(outputs: Sequence, *, seed: int, kind: str, extra: Optional[Dict] = None) -> Dict:
    """A cell's answer record: the sketch of each output (``kind`` says what they are:
    ``outputs`` of an inference, ``loss`` and ``weights`` of training steps)."""
    rec = {"seed": int(seed), "kind": kind, "outputs": [output_sketch(o) for o in outputs]}
    rec.update(extra or {})
    return rec


def op_outputs(sym) -> List[str]:
    """The names of the operator outputs of ``sym`` in graph order (no variables)."""
    internals = sym.get_internals()
    args = set(sym.list_arguments()) | set(sym.list_auxiliary_states())
    return [n for n in internals.list_outputs() if n not in args and not n.endswith("_label")]


#: the first release whose executor partitions the graph by default (MKLDNN where built with
#: it) and knows MXNET_SUBGRAPH_BACKEND=NONE to turn that off. Before it no backend is the
#: default and NONE is refused at bind ("SubgraphProperty NONE is not found in
#: SubgraphPropertyRegistry", 1.5.1): the variable unset is no fusion there
FUSION_OFF_NONE_FROM = (1, 6)


def fusion_off_value(mx) -> Optional[str]:
    """The MXNET_SUBGRAPH_BACKEND value that binds ``mx``'s executor without subgraph fusion:
    "NONE", or None (the variable unset) for a release before ``FUSION_OFF_NONE_FROM``."""
    import re
    m = re.match(r"(\d+)\.(\d+)", str(getattr(mx, "__version__", "")))
    if m and (int(m.group(1)), int(m.group(2))) < FUSION_OFF_NONE_FROM:
        return None
    return "NONE"


def op_sketches(mx, sym, arg_params, aux_params, inputs: Dict, ctx=None, limit: int = 2000) -> List[List]:
    """``[[name, sketch], ...]`` of every operator output of ``sym`` on ``inputs`` ({input name:
    numpy batch}), in graph order: what the report walks to name the first operator whose
    output differs. Inference (``is_train=False``); ``arg_params`` / ``aux_params`` numpy or
    NDArray."""
    names = op_outputs(sym)[:limit]
    internals = sym.get_internals()
    group = mx.sym.Group([internals[n] for n in names])
    ctx = ctx or mx.cpu()

    def on_ctx(params):
        return {k: (v if isinstance(v, mx.nd.NDArray) else mx.nd.array(v, dtype=v.dtype)).as_in_context(ctx)
                for k, v in dict(params).items()}
    aux = on_ctx(aux_params)
    args = {**on_ctx(arg_params), **on_ctx(inputs)}
    needed = group.list_arguments()
    missing = [n for n in needed if n not in args]
    if missing:  # labels the group does not read: any value of their shape
        shapes, _, _ = group.infer_shape_partial(**{k: tuple(v.shape) for k, v in inputs.items()})
        known = dict(zip(needed, shapes))
        for n in missing:
            args[n] = mx.nd.zeros(known[n], ctx=ctx)
    # each operator as the graph names it: oneDNN's subgraph fusion off for this executor
    # (MXNet reads MXNET_SUBGRAPH_BACKEND at every bind), the fused graph's answers are the
    # cell's outputs
    import os
    before = os.environ.get("MXNET_SUBGRAPH_BACKEND")
    off = fusion_off_value(mx)
    if off is None:
        os.environ.pop("MXNET_SUBGRAPH_BACKEND", None)
    else:
        os.environ["MXNET_SUBGRAPH_BACKEND"] = off
    try:
        ex = group.bind(ctx, {n: args[n] for n in needed},
                        aux_states={n: aux[n] for n in group.list_auxiliary_states()}, grad_req="null")
    finally:
        if before is None:
            os.environ.pop("MXNET_SUBGRAPH_BACKEND", None)
        else:
            os.environ["MXNET_SUBGRAPH_BACKEND"] = before
    outs = ex.forward(is_train=False)
    res = [[n, sketch(o.asnumpy(), OP_SKETCH)] for n, o in zip(names, outs)]
    del ex, outs
    mx.nd.waitall()
    return res


def module_answers(mx, mod, sym, batch, seed: int, *, ops: bool, optimizer: Optional[Dict] = None,
                   reset=None, input_names: Sequence[str] = ("data",)) -> Dict:
    """The answer record of a bound Module stepped on ``batch``: scoring, its outputs; training
    (``optimizer``: ``init_optimizer``'s arguments), ``reset()`` puts the initial weights back
    (the timed rounds moved them) and ``train_steps`` takes its step. With ``ops``, every
    operator's output of ``sym`` on the batch's first sample (from the initial weights)."""
    if optimizer is not None:
        reset()
    op_sketch = None
    if ops:
        arg, aux = mod.get_params()
        first = {n: d[:1].asnumpy() for n, d in zip(input_names, batch.data)}
        op_sketch = op_sketches(mx, sym, arg, aux, first)
        del arg, aux
    if optimizer is not None:
        rec = train_steps(mx, mod, batch, optimizer, seed)
    else:
        rec = inference(mx, mod, batch, seed)
    if op_sketch is not None:
        rec["ops"] = op_sketch
    return rec


def block_answers(mx, net, data, seed: int) -> Dict:
    """The answer record of a Gluon block scoring ``data`` (its outputs, predict mode)."""
    with mx.autograd.predict_mode():
        out = net(*data)
    outs = out if isinstance(out, (list, tuple)) else [out]
    return fingerprint([o.asnumpy() for o in outs], seed=seed, kind="outputs")


def numpy_input(shape: Sequence[int], dtype: str, seed: int, high: Optional[int] = None):
    """An input batch from the seed: floats uniform in [-1, 1), integers in [0, high)."""
    import numpy as np
    if high is not None:
        return np.random.RandomState(int(seed)).randint(0, int(high), size=tuple(shape)).astype(dtype)
    return input_batch(shape, seed).astype(dtype)


#: operators that draw from MXNet's own RNG in training (two releases may draw otherwise)
RANDOM_OPS = ("Dropout",)
#: training steps an answer record takes from the initial weights (one: the loss of the
#: initial weights, and the weights its gradients and the update made)
TRAIN_STEPS = 1
#: at most this many of the weights are sketched after the steps: every k-th, k fixed by
#: their count (each layer's block of weights is in it)
WEIGHTS_SKETCHED = 1 << 21


def inference(mx, mod, batch, seed: int) -> Dict:
    """The sketch of a bound Module's outputs on ``batch`` (inference)."""
    mod.forward(batch, is_train=False)
    outs = [o.asnumpy() for o in mod.get_outputs()]
    return fingerprint(outs, seed=seed, kind="outputs")


def _loss(probs, labels) -> Optional[float]:
    """Mean cross-entropy of rows of probabilities at integer labels; None for other outputs."""
    import numpy as np
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels).astype(np.int64).ravel()
    if p.ndim != 2 or len(y) != p.shape[0] or not _probabilities(p) or y.max() >= p.shape[1]:
        return None
    return float(-np.mean(np.log(np.maximum(p[np.arange(len(y)), y], 1e-30))))


def train_steps(mx, mod, batch, optimizer: Dict, seed: int, steps: int = TRAIN_STEPS) -> Dict:
    """``steps`` training steps of a bound Module from its initial weights (``initializer``
    of ``seed``: the module must have been reset to them, ``reset``), with a fresh optimizer
    of ``optimizer`` (``Module.init_optimizer``'s arguments): the
    outputs of the last forward, each step's loss and the weights after. MXNet's RNG is
    seeded before each step, for operators that draw (Dropout: its draws are MXNet's own, so
    two releases may differ there; ``random_ops`` says so)."""
    import numpy as np
    mod.init_optimizer(force_init=True, **optimizer)
    losses = []
    outs = []
    for i in range(steps):
        mx.random.seed(int(seed) * 1000 + i)
        mod.forward(batch, is_train=True)
        outs = [o.asnumpy() for o in mod.get_outputs()]
        if batch.label:
            losses.append(_loss(outs[0], batch.label[0].asnumpy()))
        mod.backward()
        mod.update()
    new_arg, _ = mod.get_params()
    weights = np.concatenate([new_arg[k].asnumpy().ravel() for k in sorted(new_arg)])
    stride = -(-weights.size // WEIGHTS_SKETCHED)
    rec = fingerprint(outs, seed=seed, kind="train", extra={"steps": steps})
    rec["weights"] = dict(sketch(weights[::stride]), every=stride)
    if losses and all(v is not None for v in losses):
        rec["loss"] = [_round(v) for v in losses]
    from pytest_mxperf.workers import precision
    rec["random_ops"] = sorted(op for op in precision.graph_ops(mod.symbol) if op in RANDOM_OPS)
    return rec
