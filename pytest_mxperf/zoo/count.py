"""Count learnable parameters and multiply-accumulates of the zoo networks by
walking their MXNet graphs, and check that each one binds and runs.

Run as ``python -m pytest_mxperf.zoo.count [--json] [--models a,b] [--no-forward]
[--gluon name1,name2]``.  This module imports mxnet (lazily, with its import-time
DeprecationWarnings silenced), so the pytest process only ever runs it as a
subprocess.

Definitions
-----------
params : sum of the sizes of all symbol *arguments* except ``data`` and
    ``softmax_label``.  BatchNorm gamma/beta are arguments and count; running
    mean/var are auxiliary states and do not.
macs : forward multiply-accumulates for one image, Convolution and
    FullyConnected ops only: for each such op,
    ``output_elements_per_image * prod(weight.shape[1:])``, i.e.
    ``out_elems * (C_in/groups) * kh * kw`` for a convolution and
    ``num_hidden * in_features`` for a fully connected layer.
"""

import argparse
import json
import sys

from pytest_mxperf.workers.protocol import import_mxnet

_NON_PARAM_ARGS = ("data", "softmax_label")
_MAC_OPS = ("Convolution", "FullyConnected")


def prod(values):
    out = 1
    for v in values:
        out *= int(v)
    return out


def count_params(sym, data_shape):
    """Number of learnable parameters of ``sym`` for input ``data_shape`` (C,H,W)."""
    arg_shapes, _, _ = sym.infer_shape(data=(1,) + tuple(data_shape))
    if arg_shapes is None:
        raise ValueError("could not infer shapes for data shape %r" % (tuple(data_shape),))
    total = 0
    for name, shape in zip(sym.list_arguments(), arg_shapes):
        if name in _NON_PARAM_ARGS:
            continue
        total += prod(shape)
    return total


def mac_layers(sym, data_shape=None, input_shapes=None):
    """Per-layer MACs: list of ``(op, node_name, macs)`` for every Convolution and
    FullyConnected node, found by walking ``sym.tojson()``; shapes come from
    ``sym.get_internals().infer_shape`` at batch 1. The input is ``data`` of
    ``data_shape`` (C,H,W), or ``input_shapes``: {input name: shape without the batch}
    for a network with other or several inputs (the user's own)."""
    graph = json.loads(sym.tojson())
    nodes = graph["nodes"]
    internals = sym.get_internals()
    shapes = ({name: (1,) + tuple(shape) for name, shape in input_shapes.items()} if input_shapes is not None
              else {"data": (1,) + tuple(data_shape)})
    arg_shapes, out_shapes, _ = internals.infer_shape(**shapes)
    if arg_shapes is None:
        raise ValueError("could not infer shapes for input shapes %r" % (shapes,))
    arg_shape = dict(zip(internals.list_arguments(), arg_shapes))
    out_shape = dict(zip(internals.list_outputs(), out_shapes))
    layers = []
    for node in nodes:
        op = node.get("op")
        if op not in _MAC_OPS:
            continue
        name = node["name"]
        weight_node = nodes[node["inputs"][1][0]]
        weight_shape = arg_shape[weight_node["name"]]
        output = out_shape[name + "_output"]
        per_image = prod(output[1:])  # batch is 1
        layers.append((op, name, per_image * prod(weight_shape[1:])))
    return layers


def count_macs(sym, data_shape=None, input_shapes=None):
    """Forward multiply-accumulates for one image (Convolution + FullyConnected); the
    input as in :func:`mac_layers`."""
    return sum(m for _, _, m in mac_layers(sym, data_shape, input_shapes))


def forward_output_shape(sym, data_shape, mx=None):
    """Bind ``sym`` for inference at batch 1 (``simple_bind``, no gradients), run one forward
    pass on random data and return the output shape. The weights are what the bind allocated:
    the pass is there for its output shape, which no weight changes. Counting the eight zoo
    networks with a Module and Xavier-Gaussian weights took 16.2 CPU seconds, this 3.5 (AMD
    EPYC Zen 4, 2026-11-28): drawing the weights took 11.6 s of it (VGG-11's 133M 5.5 s), and
    even a constant initialiser left VGG-11's init_params at 4.9 s. The measuring workers keep
    their own random weights."""
    mx = mx or import_mxnet()
    shape = (1,) + tuple(data_shape)
    exe = sym.simple_bind(mx.cpu(), grad_req="null", data=shape)
    exe.arg_dict["data"][:] = mx.nd.random.uniform(shape=shape)
    exe.forward(is_train=False)
    out = exe.outputs[0]
    out.wait_to_read()
    return list(out.shape)


def measure(name, forward=True):
    """Count one registry model; returns the JSON-able record."""
    from pytest_mxperf.zoo import build_symbol, get_model

    mx = import_mxnet()
    spec = get_model(name)
    sym = build_symbol(name)
    rec = {
        "params": count_params(sym, spec.input_shape),
        "macs": count_macs(sym, spec.input_shape),
        "input_shape": list(spec.input_shape),
        "num_classes": spec.num_classes,
    }
    if forward:
        rec["output_shape"] = forward_output_shape(sym, spec.input_shape, mx)
    return rec


def measure_gluon(factory_name, input_shape=(3, 224, 224)):
    """Count an arbitrary ``mx.gluon.model_zoo.vision`` network (no forward pass);
    used to show that look-alikes (Gluon alexnet, resnet50_v1, vgg16) differ."""
    mx = import_mxnet()
    net = getattr(mx.gluon.model_zoo.vision, factory_name)(pretrained=False,
                                                          prefix=factory_name + "_")
    sym = net(mx.sym.var("data"))
    return {
        "params": count_params(sym, input_shape),
        "macs": count_macs(sym, input_shape),
        "input_shape": list(input_shape),
        "num_classes": 1000,
    }


def _fmt_table(results):
    head = "%-14s %16s %10s %16s %10s  %s" % ("model", "params", "M", "MACs", "GMACs", "output")
    lines = [head, "-" * len(head)]
    for name, rec in results.items():
        lines.append("%-14s %16d %10.2f %16d %10.3f  %s" % (
            name, rec["params"], rec["params"] / 1e6, rec["macs"], rec["macs"] / 1e9,
            rec.get("output_shape", "-")))
    return "\n".join(lines)


def main(argv=None):
    from pytest_mxperf.zoo import MODELS, UnknownModelError, get_model

    parser = argparse.ArgumentParser(
        prog="python -m pytest_mxperf.zoo.count",
        description="Count params and MACs of the zoo networks by walking their graphs.")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--models", default=None,
                        help="comma-separated model names (default: all): %s" % ", ".join(MODELS))
    parser.add_argument("--no-forward", action="store_true",
                        help="skip binding and the batch-1 forward pass")
    parser.add_argument("--gluon", default=None,
                        help="instead, count these mx.gluon.model_zoo.vision networks "
                             "(224x224, no forward pass), keyed 'gluon:<name>'")
    args = parser.parse_args(argv)

    results = {}
    if args.gluon:
        for fname in [n.strip() for n in args.gluon.split(",") if n.strip()]:
            results["gluon:" + fname] = measure_gluon(fname)
    else:
        names = list(MODELS)
        if args.models:
            names = [n.strip() for n in args.models.split(",") if n.strip()]
        try:
            for n in names:
                get_model(n)
        except UnknownModelError as exc:
            parser.error(str(exc))
        for n in names:
            results[n] = measure(n, forward=not args.no_forward)

    if args.json:
        json.dump(results, sys.stdout, indent=1, sort_keys=False)
        sys.stdout.write("\n")
    else:
        print(_fmt_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
