"""Your own network inside a worker: load it, feed it random inputs, step it.

``load(source, contexts, batch_size, mode, seed)`` returns an object with the interface of
the zoo cell in ``throughput.py`` (``bind_seconds``, ``total_batch``, ``step()``,
``timed(n)``), so the same warm-up, rounds and ``mx.nd.waitall()`` synchronisation apply.

* A Symbol (a symbol JSON file, or a callable returning one) is bound in a Module
  (``for_training=False`` to score), with its params file when given (``arg:`` / ``aux:``
  names, as ``HybridBlock.export`` and ``Module.save_checkpoint`` write; missing ones get
  the seed's, what the file gave is in the result's ``meta["params"]``) or the seed's
  weights (``answers.py``: by name and shape from numpy's legacy stream, Xavier's bounds).
  The labels of its own loss outputs (``SoftmaxOutput`` of a checkpoint of MXNet's
  example/image-classification, ``*RegressionOutput``, ``SVMOutput``) are labels, not weights
  (see ``SymbolCell``; ``meta["labels"]``).
* A HybridBlock is run the way Gluon users run it: initialised if needed,
  ``hybridize(static_alloc=True, static_shape=True)``, forward under
  ``autograd.predict_mode()`` to score; never converted to a Module.
* Training needs a loss: ``softmax_ce`` (softmax cross-entropy on random labels over the
  output's last axis), or for a Symbol the name of an output that already is a loss; a
  Symbol whose outputs all are its own loss outputs (``usermodel.ends_in_loss``) trains as
  it is, with or without ``loss=`` (``softmax_ce`` is not stacked on a loss).
* Inputs from the seed (numpy's legacy stream, the same under every release): floats
  uniform in [-1, 1); integer inputs uniform in [0, high), ``high``
  from the input's spec or, for an input that feeds an Embedding, its ``input_dim``.

``python -m pytest_mxperf.workers.usermodel SPEC RESULT`` with ``{"describe": true, ...}``
builds the network and returns the digest of its graph (for a HybridBlock: of the symbol
its export writes) and its parameter count.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import time
import warnings

from pytest_mxperf.model.user_network import (
    CLASS_LABEL_OPS,
    canonical_graph_digest,
    ends_in_loss,
    label_outputs,
)
from pytest_mxperf.workers import answers
from pytest_mxperf.workers.protocol import ModuleSteps, TimedSteps, import_mxnet, serve


def _build(mx, ref):
    """("symbol", Symbol) or ("block", HybridBlock) from a reference dict."""
    if ref["kind"] == "symbol-file":
        return "symbol", mx.sym.load(ref["target"])
    module, _, func = ref["target"].partition(":")
    if ref.get("cwd") and ref["cwd"] not in sys.path:
        sys.path.insert(0, ref["cwd"])
    obj = getattr(importlib.import_module(module), func)()
    if isinstance(obj, mx.sym.Symbol):
        return "symbol", obj
    if isinstance(obj, mx.gluon.HybridBlock):
        return "block", obj
    raise TypeError(f"{ref['target']} returned a {type(obj).__name__}, not a Symbol or a HybridBlock")


def _embedding_dims(sym, input_name):
    """input_dim of an Embedding fed directly by ``input_name`` (None if none)."""
    graph = json.loads(sym.tojson())
    nodes = graph["nodes"]
    for node in nodes:
        if node.get("op") == "Embedding" and nodes[node["inputs"][0][0]].get("name") == input_name:
            return int((node.get("attrs") or node.get("param") or {}).get("input_dim"))
    return None


def _block_embedding_dim(net):
    """input_dim of the first Embedding in a Gluon block tree (None if none)."""
    stack = [net]
    while stack:
        b = stack.pop(0)
        if type(b).__name__ == "Embedding":
            return int(b._kwargs["input_dim"])
        stack.extend(getattr(b, "_children", {}).values())
    return None


def _inputs(mx, specs, batch, ctx, sym=None, block=None, seed=0):
    """The inputs from the seed (numpy's legacy stream: the same under every release), input
    i from ``seed`` + i."""
    out = []
    for i, s in enumerate(specs):
        shape = (batch,) + tuple(s["shape"])
        high = None
        if s["dtype"] in ("int32", "int64", "uint8", "int8"):
            high = s.get("high") or (_embedding_dims(sym, s["name"]) if sym is not None else None) or (
                _block_embedding_dim(block) if block is not None and len(specs) == 1 else None)
            if not high:
                raise ValueError(f"integer input {s['name']} needs high= (its values are drawn from [0, high))")
        out.append(mx.nd.array(answers.numpy_input(shape, s["dtype"], int(seed) + i, high), ctx=ctx, dtype=s["dtype"]))
    return out


def macs_per_sample(sym, specs):
    """(forward Convolution + FullyConnected multiply-accumulates per sample, None) of the
    user's graph, from its shapes (``zoo.count``); (None, why) when they cannot be counted."""
    from pytest_mxperf.zoo import count
    try:
        return count.count_macs(sym, input_shapes={s["name"]: tuple(s["shape"]) for s in specs}), None
    except Exception as exc:  # a graph whose shapes do not infer from its inputs alone
        return None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:200]


def _block_symbol(mx, net, specs):
    """The graph of a HybridBlock, as MXNet builds it when the block is called on Symbols."""
    out = net(*[mx.sym.var(s["name"]) for s in specs])
    return mx.sym.Group(list(out)) if isinstance(out, (list, tuple)) else out


def _labels(sym, outputs, data_shapes):
    """{label name: (shape, number of classes or None)} of the graph's loss outputs, from
    the shapes MXNet infers from the data alone: a class label (SoftmaxOutput, SVMOutput)
    indexes the classes of its output (output size / label size: the last axis, or axis 1
    with ``multi_output``); a regression label has its output's shape and real values."""
    import numpy as np
    if not outputs:
        return {}
    args = dict(zip(sym.list_arguments(), sym.infer_shape(**data_shapes)[0]))
    internals = sym.get_internals()
    out = {}
    for o in outputs:
        if o["label"] in out:
            continue
        shape = tuple(args[o["label"]])
        classes = None
        if o["op"] in CLASS_LABEL_OPS:
            op_out = internals[o["name"] + "_output"]
            shape_out = op_out.infer_shape(**{k: v for k, v in data_shapes.items()
                                              if k in op_out.list_arguments()})[1][0]
            classes = int(np.prod(shape_out)) // max(1, int(np.prod(shape)))
        out[o["label"]] = (shape, classes)
    return out


class SymbolCell(ModuleSteps):
    """A Symbol bound in a Module. The labels of the graph's own loss outputs (SoftmaxOutput,
    *RegressionOutput, SVMOutput: ``usermodel.label_outputs``) are labels, never weights: to
    train they are fed random labels; to score they are declared and left unbound (as
    benchmark_score.py and the zoo cells do: MXNet infers their shapes from the data and
    reads them only to train). A graph that ends in such outputs trains as it is."""

    def __init__(self, mx, sym, ref, specs, ctxs, batch, train, loss, seed=0):
        import numpy as np
        self.mx = mx
        self.seed = seed
        self.macs_per_sample, self.macs_unknown = macs_per_sample(sym, specs)
        self.total_batch = batch * len(ctxs)
        self.train = train
        names = [s["name"] for s in specs]
        outputs = [o for o in label_outputs(sym.tojson()) if o["label"] not in names]
        as_is = ends_in_loss(sym.tojson())
        other = []  # labels of a loss output of another kind (MakeLoss over your own loss)
        if train:
            if loss == "softmax_ce" and not as_is:
                sym = mx.sym.SoftmaxOutput(sym, name="softmax")
                outputs.append({"op": "SoftmaxOutput", "name": "softmax", "label": "softmax_label"})
            elif not loss and not as_is:
                raise ValueError("training your own network needs loss=... (an output name, or 'softmax_ce'; a "
                                 "graph ending in SoftmaxOutput, a *RegressionOutput or SVMOutput needs none)")
            elif loss and loss != "softmax_ce":
                if loss not in sym.list_outputs() and loss + "_output" not in sym.list_outputs():
                    raise ValueError(f"loss {loss!r} is neither softmax_ce nor an output of the graph "
                                     f"({', '.join(sym.list_outputs())})")
                known = {o["label"] for o in outputs}
                other = [a for a in sym.list_arguments() if a.endswith("label") and a not in known and a not in names]
        data_shapes = [mx.io.DataDesc(s["name"], (self.total_batch,) + tuple(s["shape"]), s["dtype"]) for s in specs]
        labels = _labels(sym, outputs, {d.name: d.shape for d in data_shapes})
        if other:  # as they always were: class indices over the last axis of the first output
            num_classes = sym.infer_shape(**{d.name: d.shape for d in data_shapes})[1][0][-1]
            labels.update({a: ((self.total_batch,), num_classes) for a in other})
        self.labels = {k: {"shape": list(shape), "classes": classes, "fed": train}
                       for k, (shape, classes) in labels.items()}
        t0 = time.perf_counter()
        mod = mx.mod.Module(sym, data_names=names, label_names=list(labels), context=ctxs)
        with warnings.catch_warnings():
            # scoring: Module warns that the declared labels get no shapes; inference needs none
            warnings.simplefilter("ignore", UserWarning)
            mod.bind(data_shapes=data_shapes, label_shapes=[(k, shape) for k, (shape, _) in labels.items()]
                     if train and labels else None, for_training=train)
        arg, aux = {}, {}
        if ref.get("params"):
            loaded = mx.nd.load(ref["params"])
            arg = {k.split(":", 1)[1]: v for k, v in loaded.items() if k.startswith("arg:")}
            aux = {k.split(":", 1)[1]: v for k, v in loaded.items() if k.startswith("aux:")}
            # what the params file gave: the weights it names, the ones it lacks (Xavier) and
            # its names the graph does not have (a file of another network says so here)
            want = [a for a in sym.list_arguments() if a not in names and a not in labels]
            want += sym.list_auxiliary_states()
            self.params = {"file": os.path.basename(ref["params"]),
                           "loaded": sorted(n for n in want if n in arg or n in aux),
                           "random": sorted(n for n in want if n not in arg and n not in aux),
                           "unused": sorted(n for n in list(arg) + list(aux) if n not in want)}
        # the params file's weights; the others the seed's (answers.py), the same under every release
        self._init = dict(initializer=answers.initializer(mx, seed), arg_params=arg or None, aux_params=aux or None,
                          allow_missing=True)
        mod.init_params(**self._init)
        self.optimizer = None
        if train:
            self.optimizer = {"optimizer": "sgd", "optimizer_params": {"learning_rate": 0.01, "momentum": 0.9,
                                                                       "rescale_grad": 1.0 / self.total_batch}}
            mod.init_optimizer(**self.optimizer)
        mx.nd.waitall()
        self.bind_seconds = time.perf_counter() - t0
        # several contexts: the batch in host memory, each slice copied to its device by
        # Module, as a data iterator's batch (throughput._Cell does the same)
        data = _inputs(mx, specs, self.total_batch, ctxs[0] if len(ctxs) == 1 else mx.cpu(), sym, seed=seed)
        label = []
        if train:
            for i, (shape, classes) in enumerate(labels.values()):
                rng = np.random.RandomState(int(seed) + 100 + i)
                label.append(mx.nd.array(rng.randint(0, classes, size=shape) if classes else
                                         rng.uniform(0.0, 1.0, size=shape)))
        self.batch = mx.io.DataBatch(data=data, label=label)
        self.mod = mod
        self.sym = sym
        self.input_names = names

    def answers(self, ops: bool) -> dict:
        """What the network computes on its batch (``answers.module_answers``): training from
        its initial weights (the params file's, the seed's for the rest), one step."""
        return answers.module_answers(self.mx, self.mod, self.sym, self.batch, self.seed, ops=ops,
                                      optimizer=self.optimizer,
                                      reset=lambda: self.mod.init_params(force_init=True, **self._init),
                                      input_names=self.input_names)


class BlockCell(TimedSteps):
    """A HybridBlock, hybridized with static_alloc / static_shape, on one context."""

    def __init__(self, mx, net, specs, ctxs, batch, train, loss, seed=0):
        import numpy as np
        if len(ctxs) != 1:
            raise ValueError("a HybridBlock is measured on one context (Gluon data parallelism is the user's loop)")
        self.mx = mx
        self.total_batch = batch
        self.train = train
        ctx = ctxs[0]
        t0 = time.perf_counter()
        self.seed = seed
        if not _initialised(net):  # the seed's weights, by parameter name (answers.py)
            net.initialize(answers.initializer(mx, seed), ctx=ctx)
        net.hybridize(static_alloc=True, static_shape=True)
        try:
            self.macs_per_sample, self.macs_unknown = macs_per_sample(_block_symbol(mx, net, specs), specs)
        except Exception as exc:  # a block that cannot be called on Symbols
            self.macs_per_sample, self.macs_unknown = None, f"{type(exc).__name__}: {exc}"[:200]
        self.data = _inputs(mx, specs, batch, ctx, block=net, seed=seed)
        self.net = net
        if train:
            if not loss:
                raise ValueError("training your own network needs loss=... ('softmax_ce' for a HybridBlock)")
            if loss != "softmax_ce":
                raise ValueError(f"a HybridBlock trains with loss='softmax_ce' (got {loss!r})")
            self.loss = mx.gluon.loss.SoftmaxCrossEntropyLoss()
            self.trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9})
            with mx.autograd.predict_mode():
                out = net(*self.data)
            self.label = mx.nd.array(np.random.RandomState(int(seed) + 100).randint(0, out.shape[-1], size=(batch,)),
                                     ctx=ctx)
        mx.nd.waitall()
        self.bind_seconds = time.perf_counter() - t0

    def answers(self, ops: bool) -> dict:
        """A scoring block's outputs on its batch (``answers.block_answers``). A training
        block's weights were moved by its rounds and Gluon keeps no initial copy: none."""
        if self.train:
            return None
        return answers.block_answers(self.mx, self.net, self.data, self.seed)

    def step(self):
        mx = self.mx
        if self.train:
            with mx.autograd.record():
                loss = self.loss(self.net(*self.data), self.label)
            loss.backward()
            self.trainer.step(self.total_batch)
        else:
            with mx.autograd.predict_mode():
                self.net(*self.data)


def _initialised(net) -> bool:
    try:
        for p in net.collect_params().values():
            p.data()
        return True
    except Exception:
        return False


def load(mx, source: dict, contexts, batch: int, mode: str, seed: int = 0):
    """The measuring cell for a user's network (see the module doc)."""
    import numpy as np
    mx.random.seed(seed)
    np.random.seed(seed)
    train = mode == "train"
    kind, obj = _build(mx, source["ref"])
    if kind == "symbol":
        return SymbolCell(mx, obj, source["ref"], source["inputs"], contexts, batch, train, source.get("loss"), seed)
    return BlockCell(mx, obj, source["inputs"], contexts, batch, train, source.get("loss"), seed)


def describe(spec: dict) -> dict:
    import numpy as np
    mx = import_mxnet()
    kind, obj = _build(mx, spec["ref"])
    if kind == "block":
        cell = BlockCell(mx, obj, spec["inputs"], [mx.cpu()], 1, False, None)
        cell.step()
        with tempfile.TemporaryDirectory() as tmp:
            obj.export(os.path.join(tmp, "net"))
            with open(os.path.join(tmp, "net-symbol.json")) as fh:
                text = fh.read()
        nparams = sum(int(np.prod(p.shape)) for p in obj.collect_params().values())
    else:
        text = obj.tojson()
        nparams = None
    return {"status": "ok", "message": "", "digest": canonical_graph_digest(text),
            "kind": "hybridblock" if kind == "block" else "symbol", "num_params": nparams,
            "ends_in_loss": kind == "symbol" and ends_in_loss(text)}


def main(argv=None) -> int:
    return serve(describe, argv, "pytest_mxperf.workers.usermodel")


if __name__ == "__main__":
    main()
