"""The measured peak GFLOP/s of the libraries MXNet's layers run: oneDNN on CPU, cuDNN / cuBLAS on a GPU.

Run as ``python -m pytest_mxperf.workers.peak SPEC.json RESULT.json`` (the worker
protocol of ``workers.protocol``). Child side: the standard library and MXNet 1.x APIs;
it never imports pytest.

Three float32 kernels on ``cpu(0)`` (or one GPU: see ``context`` below), each bound once and run
in rounds:

- ``fc``: a large FullyConnected (default data 1024 x 4096, weight 4096 x 4096: the
  ``mx.sym.FullyConnected`` MXNet's dense layers use), bound as a symbol for inference, so
  that on an MKLDNN build it runs as oneDNN's inner product;
- ``conv``: a large 3x3 Convolution (default batch 8, 256 -> 256 channels, 28 x 28, pad 1),
  bound the same way (oneDNN's convolution);
- ``dot``: ``mx.nd.dot`` of the FC's shapes, which MXNet 1.x sends to its BLAS (OpenBLAS in
  the PyPI wheels), not to oneDNN: measured beside them for comparison and never taken as
  the peak, since the networks' Convolution / FullyConnected layers run oneDNN, not BLAS
  (whichever of the two libraries is faster on a machine; docs/how-it-measures.md, "What is
  measured, and how each figure is judged", *Reduced precision on CPU, and the distance to the
  hardware limit*).

Each kernel: one untimed warm-up call (primitive creation, weight reorder), then rounds of
k calls, each ``mx.nd.waitall(); t0; k x call; mx.nd.waitall(); t1``; its figure is the
*best* round's GFLOP/s (the peak is what the machine can do, so the fastest round is the
estimate; a neighbour only ever slows rounds down). FLOPs are 2 x multiply-accumulates:
2·M·K·N for FC and dot, 2·B·C_out·H_out·W_out·C_in·kh·kw for the convolution.

Result: ``{"status": "ok", "fc_gflops", "conv_gflops", "dot_gflops", "peak_gflops":
max(fc, conv), "kernels": {...per kernel detail...}, "context", "dtype", "meta": {...}}``.

Spec (all optional): ``fc`` [M, K, N], ``conv`` [B, C_in, C_out, H, W], ``dot`` [M, K, N]
(default: the FC's), ``round_seconds`` (target length of a round, 0.3), ``rounds`` (per
kernel, 5), ``kernels`` (subset of "fc", "conv", "dot"), ``context`` ("cpu:0", or "gpu:N":
the same FullyConnected and Convolution through cuBLAS and cuDNN on that GPU, where a GPU
cell's layers run; ``dot`` is then left out), ``dtype`` ("float32", or "float16" on a GPU:
the tensor cores' precision, for float16 cells).
"""

from __future__ import annotations

from pytest_mxperf.workers.protocol import (
    TimedSteps,
    import_mxnet,
    missing_gpus,
    mx_contexts,
    runtime_info,
    serve,
    thread_pools,
)

DEFAULT_FC = (1024, 4096, 4096)
DEFAULT_CONV = (8, 256, 256, 28, 28)
KERNELS = ("fc", "conv", "dot")


def fc_flops(m: int, k: int, n: int) -> float:
    return 2.0 * m * k * n


def conv_flops(b: int, c_in: int, c_out: int, h: int, w: int, kernel: int = 3, pad: int = 1) -> float:
    h_out = h + 2 * pad - kernel + 1
    w_out = w + 2 * pad - kernel + 1
    return 2.0 * b * c_out * h_out * w_out * c_in * kernel * kernel


def _bound(mx, sym, shapes, seed, ctx, dtype):
    """An inference executor for ``sym`` on ``ctx`` in ``dtype`` with uniform random inputs
    (the weights take the data's dtype through MXNet's type inference)."""
    exe = sym.simple_bind(ctx=ctx, grad_req="null", type_dict={"data": dtype}, **shapes)
    mx.random.seed(seed)
    for name, arr in exe.arg_dict.items():
        arr[:] = mx.random.uniform(-1.0, 1.0, shape=arr.shape, ctx=ctx, dtype=arr.dtype)
    return lambda: exe.forward(is_train=False)


def _kernel(mx, name, spec, seed, ctx=None, dtype="float32"):
    """(call, flops per call, description) of one kernel."""
    ctx = mx.cpu() if ctx is None else ctx
    if name == "fc":
        m, k, n = (int(x) for x in spec.get("fc", DEFAULT_FC))
        sym = mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=n, no_bias=True, name="fc")
        return (_bound(mx, sym, {"data": (m, k)}, seed, ctx, dtype), fc_flops(m, k, n),
                f"FullyConnected {m}x{k} by {k}x{n}")
    if name == "conv":
        b, c_in, c_out, h, w = (int(x) for x in spec.get("conv", DEFAULT_CONV))
        sym = mx.sym.Convolution(mx.sym.var("data"), kernel=(3, 3), pad=(1, 1), num_filter=c_out,
                                 no_bias=True, name="conv")
        return (_bound(mx, sym, {"data": (b, c_in, h, w)}, seed, ctx, dtype), conv_flops(b, c_in, c_out, h, w),
                f"Convolution 3x3 pad 1, batch {b}, {c_in}->{c_out} channels, {h}x{w}")
    if name == "dot":
        m, k, n = (int(x) for x in spec.get("dot", spec.get("fc", DEFAULT_FC)))
        mx.random.seed(seed)
        a = mx.random.uniform(-1.0, 1.0, shape=(m, k))
        b = mx.random.uniform(-1.0, 1.0, shape=(k, n))
        return (lambda: mx.nd.dot(a, b)), fc_flops(m, k, n), f"mx.nd.dot {m}x{k} by {k}x{n}"
    raise ValueError(f"unknown kernel {name!r} (known: {', '.join(KERNELS)})")


class _Calls(TimedSteps):
    """A kernel's calls, timed as the cells' batches are (``waitall`` on both sides)."""

    def __init__(self, mx, call):
        self.mx, self.step = mx, call


def _measure(mx, call, flops, round_seconds, rounds):
    timed = _Calls(mx, call).timed
    first = timed(1)  # untimed for the figure: primitive creation, weight reorder
    per_call = timed(1)
    k = max(1, int(round(round_seconds / max(per_call, 1e-9))))
    secs = [timed(k) for _ in range(rounds)]
    gflops = [flops * k / s / 1e9 for s in secs]
    return {"gflops": max(gflops), "round_gflops": gflops, "calls_per_round": k,
            "first_call_seconds": first, "flops_per_call": flops}


def measure(spec: dict) -> dict:
    mx = import_mxnet()
    meta = runtime_info(mx)
    context = str(spec.get("context", "cpu:0"))
    dtype = str(spec.get("dtype", "float32"))
    on_gpu = context.startswith("gpu")
    if dtype not in ("float32", "float16") or (dtype == "float16" and not on_gpu):
        return {"status": "unsupported", "meta": meta,
                "message": f"the peak is measured in float32 (CPU, GPU) or float16 (GPU), not {dtype} on {context}"}
    missing = missing_gpus([context], lambda: meta["num_gpus"])
    if missing:
        return {"status": "unavailable", "meta": meta, "message": missing}
    (ctx,) = mx_contexts(mx, [context])
    # mx.nd.dot is the BLAS path on CPU; on a GPU the FullyConnected already is cuBLAS
    kernels = [k for k in spec.get("kernels", KERNELS) if not (on_gpu and k == "dot")]
    round_seconds = float(spec.get("round_seconds", 0.3))
    rounds = max(1, int(spec.get("rounds", 5)))
    seed = int(spec.get("seed", 0))
    detail = {}
    for name in kernels:
        call, flops, what = _kernel(mx, name, spec, seed, ctx, dtype)
        detail[name] = dict(_measure(mx, call, flops, round_seconds, rounds), what=what)
    meta["threads"] = thread_pools()
    out = {"status": "ok", "message": "", "kernels": detail, "context": context, "dtype": dtype, "meta": meta}
    for name in KERNELS:
        out[f"{name}_gflops"] = detail[name]["gflops"] if name in detail else None
    onednn = [out[k] for k in ("fc_gflops", "conv_gflops") if out[k] is not None]
    out["peak_gflops"] = max(onednn) if onednn else None
    return out


def main(argv=None) -> int:
    return serve(measure, argv, "pytest_mxperf.workers.peak")


if __name__ == "__main__":
    main()
