"""Reduced precision on CPU: what this MXNet build and this CPU can run, and the conversion.

Child side (imported by a worker, with MXNet passed in as ``mx``); it has no ``serve`` of
its own. The standard library and MXNet 1.x APIs only (``mx.contrib.amp``,
``mx.contrib.quantization``), imported lazily, so importing this module is cheap.

What MXNet 1.9.1 does on CPU (PyPI wheel, oneDNN 2.x, GNU libgomp):

- float16: no CPU FP16 gemm; a float16 network binds and ``forward`` returns, and the first
  synchronisation fails with "FP16 gemm on cpu not implemented!". :func:`convert_symbol`
  refuses float16 on CPU before anything is bound (:class:`UnsupportedPrecision`).
- bfloat16: ``mx.contrib.amp.convert_model(sym, arg_params, aux_params,
  target_dtype='bfloat16', cast_optional_params=True)`` inserts ``amp_cast`` nodes around
  Convolution / FullyConnected and stores their weights in bfloat16 (without
  ``cast_optional_params`` the graph would cast every weight on every batch). The kernels
  are oneDNN's, so the build needs MKLDNN, and oneDNN 2.x runs bfloat16 only on AVX-512
  CPUs (its ``avx512_core``: AVX512F/BW/VL/DQ): natively with ``avx512_bf16`` / AMX,
  emulated on other AVX-512 CPUs. On a CPU without AVX-512 the cell is unsupported (see
  :func:`support`). MXNet's AMP has bfloat16 since 1.7.
- int8: ``mx.contrib.quantization.quantize_model_mkldnn`` (fuses Convolution + BatchNorm +
  ReLU with the ``MKLDNN_QUANTIZE`` backend, then quantizes; calibration on random batches,
  on the caller's images (``calib_data``) or ``calib_mode='none'``) needs the MKLDNN build;
  oneDNN has int8 kernels on every x86-64 ISA it supports, fast with VNNI (``avx512_vnni`` /
  ``avx_vnni``). Its 'naive' calibration reads each layer output's min and max through
  ``ndarray.min`` / ``ndarray.max`` (MXNet's reductions, one layer at a time: 4.2-4.4 of a
  ResNet-50 v2 b8 int8 process's 4.9-5.0 s of bind on the Intel Xeon of family 6 model 207);
  :func:`_to_int8` has numpy read the same two numbers of the same array (``_NumpyMinMax``):
  the thresholds, quantized parameters and graph are the same bytes, in about half the time
  (docs/how-it-measures.md, "What is measured, and how each figure is judged", *Reduced
  precision on CPU*).

``DNNL_MAX_CPU_ISA`` (oneDNN's cap on the instruction set it dispatches to) is honoured:
a cap below AVX-512 makes bfloat16 unsupported, as it does for oneDNN itself.

Note: MXNet 1.x's ``Symbol.tojson()`` drops ``amp_cast`` nodes by default
(``remove_amp_cast=True``); :func:`graph_ops` / :func:`symbol_json` keep them.
"""

from __future__ import annotations

import contextlib
import os
from typing import Dict, Iterable, Iterator, Mapping, Optional, Set, Tuple

CPU_DTYPES = ("float32", "float16", "bfloat16", "int8")
#: dtypes of CPU cells reached by converting the float32 network (:func:`convert_symbol`)
CONVERTED_DTYPES = ("bfloat16", "int8")

FP16_REASON = "MXNet 1.x has no FP16 gemm on CPU: 'FP16 gemm on cpu not implemented'"

# oneDNN's avx512_core: the AVX-512 subset it requires for bfloat16 (emulated or native).
AVX512_CORE_FLAGS = ("avx512f", "avx512bw", "avx512vl", "avx512dq")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")

# DNNL_MAX_CPU_ISA values (oneDNN 2.x) in increasing order, and the first that has
# avx512_core. The variable is read by oneDNN once, at its first primitive.
_ISA_ORDER = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_MIC", "AVX512_MIC_4OPS", "AVX512_CORE",
              "AVX512_CORE_VNNI", "AVX512_CORE_BF16", "AVX512_CORE_AMX", "ALL")
_FIRST_AVX512_CORE = _ISA_ORDER.index("AVX512_CORE")
_FIRST_NATIVE_BF16 = _ISA_ORDER.index("AVX512_CORE_BF16")


class UnsupportedPrecision(RuntimeError):
    """A precision this build / CPU cannot run (the message is the reason, one line)."""


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> Set[str]:
    """The ISA flags of the first processor in ``/proc/cpuinfo`` (empty when unreadable)."""
    try:
        with open(cpuinfo) as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        pass
    return set()


def build_features(mx) -> Optional[Set[str]]:
    """Enabled build features of this MXNet (``mx.runtime.Features``), None when unknown."""
    try:
        return {name for name, f in mx.runtime.Features().items() if f.enabled}
    except Exception:  # MXNet without mx.runtime (before 1.5)
        return None


def onednn_isa_cap(env: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The ISA cap set with ``DNNL_MAX_CPU_ISA`` (or the older ``MKLDNN_MAX_CPU_ISA``)."""
    env = os.environ if env is None else env
    value = env.get("DNNL_MAX_CPU_ISA") or env.get("MKLDNN_MAX_CPU_ISA")
    return value.strip().upper() if value and value.strip() else None


def _cap_index(cap: Optional[str]) -> int:
    if cap is None or cap not in _ISA_ORDER:
        return len(_ISA_ORDER)  # no cap (an unknown value: oneDNN ignores it)
    return _ISA_ORDER.index(cap)


def has_bfloat16_amp(mx) -> bool:
    """Whether this MXNet's AMP knows bfloat16 (``mx.contrib.amp.lists.symbol_bf16``, 1.7+).
    Asks the ``mx`` passed in (an object that is not a module, e.g. a stand-in: no)."""
    name = getattr(mx, "__name__", None)
    if not isinstance(name, str):
        return False
    try:
        import importlib
        importlib.import_module(name + ".contrib.amp.lists.symbol_bf16")
        return True
    except Exception:
        return False


def has_mkldnn_quantization(mx) -> bool:
    """Whether this MXNet has oneDNN's post-training quantization flow
    (``mx.contrib.quantization.quantize_model_mkldnn``, 1.6+: it fuses Convolution + BatchNorm +
    ReLU before quantizing). 1.5.1's ``quantize_model`` quantizes the unfused graph and refuses
    a first convolution of 3 channels ("for 8bit cudnn conv, the number of channel must be
    multiple of 4"). Asks the ``mx`` passed in (an object that is not a module: no)."""
    name = getattr(mx, "__name__", None)
    if not isinstance(name, str):
        return False
    try:
        import importlib
        return hasattr(importlib.import_module(name + ".contrib.quantization"), "quantize_model_mkldnn")
    except Exception:
        return False


def _vnni_allowed(flag: str, isa_cap: Optional[str]) -> bool:
    """Whether oneDNN may use the VNNI instructions of ``flag`` under ``DNNL_MAX_CPU_ISA``."""
    cap = _cap_index(isa_cap)
    if cap == len(_ISA_ORDER) or isa_cap == "ALL":
        return True
    if flag == "avx_vnni":
        return isa_cap == "AVX2_VNNI"
    if flag == "amx_int8":
        return cap >= _ISA_ORDER.index("AVX512_CORE_AMX")
    return cap >= _ISA_ORDER.index("AVX512_CORE_VNNI")


def support(features: Optional[Iterable[str]], flags: Iterable[str],
            isa_cap: Optional[str] = None, bfloat16_amp: bool = True,
            version: str = "this MXNet", mkldnn_quantization: bool = True) -> Dict[str, Tuple[bool, str]]:
    """Pure form of :func:`cpu_support`: from build features, CPU flags, oneDNN's ISA cap,
    whether MXNet's AMP has bfloat16 and whether it has oneDNN's quantization flow."""
    flags = set(flags)
    feats = None if features is None else set(features)
    cap = _cap_index(isa_cap)
    out: Dict[str, Tuple[bool, str]] = {"float32": (True, "float32 is MXNet's CPU default"),
                                        "float16": (False, FP16_REASON)}
    if feats is not None and "MKLDNN" not in feats:
        why = "this MXNet build has no MKLDNN (oneDNN), whose kernels MXNet uses for {} on CPU"
        out["bfloat16"] = (False, why.format("bfloat16"))
        out["int8"] = (False, why.format("int8 (quantized operators)"))
        return out
    unknown = " (build features unknown: assuming MKLDNN)" if feats is None else ""
    missing = [f for f in AVX512_CORE_FLAGS if f not in flags]
    if not bfloat16_amp:
        out["bfloat16"] = (False, f"{version} has no bfloat16 AMP (mx.contrib.amp.lists.symbol_bf16, MXNet 1.7+)")
    elif missing:
        out["bfloat16"] = (False, "oneDNN runs bfloat16 only on AVX-512 CPUs (avx512_core); this CPU lacks "
                                  + ", ".join(missing))
    elif cap < _FIRST_AVX512_CORE:
        out["bfloat16"] = (False, f"DNNL_MAX_CPU_ISA={isa_cap} keeps oneDNN below AVX-512, where it has no bfloat16")
    elif any(f in flags for f in NATIVE_BF16_FLAGS) and cap >= _FIRST_NATIVE_BF16:
        have = [f for f in NATIVE_BF16_FLAGS if f in flags]
        out["bfloat16"] = (True, f"native bfloat16 dot products ({', '.join(have)}) through oneDNN{unknown}")
    else:
        why = (f"DNNL_MAX_CPU_ISA={isa_cap}" if any(f in flags for f in NATIVE_BF16_FLAGS)
               else "no avx512_bf16 / amx_bf16")
        out["bfloat16"] = (True, f"emulated by oneDNN with AVX-512 ({why}): runs, usually slower than float32{unknown}")
    vnni = [f for f in VNNI_FLAGS if f in flags and _vnni_allowed(f, isa_cap)]
    if vnni:
        how = f" with VNNI ({', '.join(vnni)})"
    elif any(f in flags for f in VNNI_FLAGS):
        how = f" without VNNI (DNNL_MAX_CPU_ISA={isa_cap}): may not beat float32"
    else:
        how = " without VNNI (no avx512_vnni / avx_vnni): may not beat float32"
    out["int8"] = (True, "oneDNN int8 kernels" + how + unknown)
    if not mkldnn_quantization:
        out["int8"] = (False, f"{version} has no oneDNN quantization flow (mx.contrib.quantization."
                              "quantize_model_mkldnn, MXNet 1.6+)")
    return out


def cpu_support(mx, cpuinfo: str = "/proc/cpuinfo",
                env: Optional[Mapping[str, str]] = None) -> Dict[str, Tuple[bool, str]]:
    """What reduced precision this MXNet and this CPU can run, with the reason:
    ``{"float32": ..., "float16": (False, reason), "bfloat16": (bool, reason), "int8": (bool, reason)}``."""
    return support(build_features(mx), cpu_flags(cpuinfo), onednn_isa_cap(env), has_bfloat16_amp(mx),
                   "MXNet " + str(getattr(mx, "__version__", "")).strip(), has_mkldnn_quantization(mx))


def dtype_name(dtype) -> str:
    """A readable name of an NDArray dtype: "float32", "int8", and "bfloat16" for MXNet's
    bfloat16, which numpy sees as the structured dtype ``[('bfloat16', '<u2')]``."""
    import numpy as np

    d = np.dtype(dtype)
    return d.names[0] if d.names else d.name


def symbol_json(sym) -> str:
    """The symbol's JSON *with* its ``amp_cast`` / ``amp_multicast`` nodes: MXNet 1.x's
    ``Symbol.tojson()`` removes them by default (``remove_amp_cast=True``)."""
    try:
        return sym.tojson(remove_amp_cast=False)
    except TypeError:  # an MXNet without AMP (before 1.5): nothing to remove
        return sym.tojson()


def graph_ops(sym) -> Dict[str, int]:
    """Operator counts of a symbol's graph (e.g. to see ``amp_cast`` or ``_contrib_quantize_v2``)."""
    import json

    counts: Dict[str, int] = {}
    for node in json.loads(symbol_json(sym))["nodes"]:
        op = node.get("op")
        if op and op != "null":
            counts[op] = counts.get(op, 0) + 1
    return counts


#: operator-name prefixes that show a conversion took place (AMP casts, quantization, fusion)
MARKER_PREFIXES = ("amp_cast", "amp_multicast", "_contrib_quantize", "_contrib_dequantize",
                   "_contrib_requantize", "_sg_mkldnn", "_contrib_quantized")


def marker_ops(ops: Mapping[str, int]) -> Dict[str, int]:
    """The operators of :func:`graph_ops` that a conversion adds (casts, quantize nodes,
    oneDNN fused / quantized operators)."""
    return {k: v for k, v in sorted(ops.items()) if k.startswith(MARKER_PREFIXES)}


def float32_network(mx, name: str, batch: int):
    """A zoo network in float32 with random Xavier weights, as the throughput worker makes
    it: ``(sym, arg_params, aux_params, data_shape)``, ready for :func:`convert_symbol`."""
    from pytest_mxperf import zoo

    shape = (int(batch),) + tuple(zoo.get_model(name).input_shape)
    sym = zoo.build_symbol(name)
    mod = bound_for_inference(mx, sym, None, None, shape)
    mod.init_params(initializer=mx.init.Xavier(magnitude=2.0))
    arg, aux = mod.get_params()
    return sym, arg, aux, shape


def bound_for_inference(mx, sym, arg_params, aux_params, data_shape, ctx=None):
    """``sym`` bound in a Module for inference on ``ctx`` (default cpu), with the given
    parameters set (None: left for ``init_params``)."""
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["softmax_label"], context=ctx or mx.cpu())
    mod.bind(data_shapes=[("data", tuple(data_shape))], for_training=False)
    if arg_params is not None:
        mod.set_params(arg_params, aux_params)
    return mod


def _to_bfloat16(mx, sym, arg_params, aux_params, cast_optional_params):
    from mxnet.contrib import amp  # noqa: import inside: MXNet is the caller's

    return amp.convert_model(sym, dict(arg_params), dict(aux_params), target_dtype="bfloat16",
                             cast_optional_params=cast_optional_params)


def _calibration_iter(mx, images, batch):
    """An ``NDArrayIter`` over ``images`` (N x C x H x W, numpy or NDArray) in batches of
    ``min(batch, N)``: ``(iterator, N)``. The last batch is padded with images from the
    start (NDArrayIter's ``pad``): the calibration sees these N images and no other (a
    repeated image changes no min / max, so 'naive' thresholds are those of the N)."""
    data = images if isinstance(images, mx.nd.NDArray) else mx.nd.array(images)
    n = int(data.shape[0])
    if n < 1:
        raise ValueError("calib_data holds no images")
    return mx.io.NDArrayIter(data={"data": data}, batch_size=min(int(batch), n)), n


@contextlib.contextmanager
def _min_max_through_numpy(mx, q) -> Iterator[None]:
    """While open, MXNet's 'naive' calibration (``quantize_model``'s
    ``_LayerOutputMinMaxCollector``, MXNet 1.5-1.9) reads each layer output's min and max with
    numpy from the array's copy (``asnumpy``) instead of two MXNet reductions synchronised one
    by one. Min and max are exact whoever computes them, and both give a numpy float32, folded
    over batches as MXNet folds them: the same thresholds. An MXNet without that collector
    calibrates as it would."""
    base = getattr(q, "_LayerOutputMinMaxCollector", None)
    if base is None or not callable(getattr(base, "collect", None)):
        yield
        return
    import ctypes

    from mxnet.base import NDArrayHandle, py_str

    class _NumpyMinMax(base):
        def collect(self, name, arr):
            name = py_str(name)
            if name not in self.include_layer:
                return  # as MXNet's collector: the copy of a layer it does not calibrate is not read
            values = mx.nd.NDArray(ctypes.cast(arr, NDArrayHandle), writable=False).asnumpy()
            lo, hi = values.min(), values.max()
            if name in self.min_max_dict:
                old = self.min_max_dict[name]
                self.min_max_dict[name] = (min(old[0], lo), max(old[1], hi))
            else:
                self.min_max_dict[name] = (lo, hi)

    q._LayerOutputMinMaxCollector = _NumpyMinMax
    try:
        yield
    finally:
        q._LayerOutputMinMaxCollector = base


def _to_int8(mx, sym, arg_params, aux_params, data_shape, ctx, calib_mode, calib_batches,
             excluded_sym_names, quantized_dtype, seed, calib_data=None):
    from mxnet.contrib import quantization as q

    calib_iter = None
    num_examples = None
    if calib_mode != "none" and calib_data is not None:
        # The caller's images (e.g. held-out samples of the data set the network learnt):
        # the thresholds are those real inputs' ranges.
        calib_iter, num_examples = _calibration_iter(mx, calib_data, data_shape[0])
    elif calib_mode != "none":
        # Random calibration data in the range of the measurement's input (uniform [-1, 1)):
        # the thresholds only have to be plausible, since the weights are random too.
        mx.random.seed(seed)
        batches = [mx.random.uniform(-1.0, 1.0, shape=tuple(data_shape)) for _ in range(calib_batches)]
        data = mx.nd.concat(*batches, dim=0)
        calib_iter = mx.io.NDArrayIter(data={"data": data}, batch_size=int(data_shape[0]))
        num_examples = int(data.shape[0])
    fn = getattr(q, "quantize_model_mkldnn", None) or q.quantize_model
    # "smart" (the default from 1.6.0) where the release knows quantize_mode: 1.5.1's
    # quantize_model has none, and quantizes as it does
    import inspect
    mode = {"quantize_mode": "smart"} if "quantize_mode" in inspect.signature(fn).parameters else {}
    with _min_max_through_numpy(mx, q) if calib_mode == "naive" else contextlib.nullcontext():
        qsym, qarg, qaux = fn(sym=sym, arg_params=dict(arg_params), aux_params=dict(aux_params), ctx=ctx,
                              data_names=("data",), label_names=("softmax_label",),
                              excluded_sym_names=list(excluded_sym_names or []),
                              calib_mode=calib_mode, calib_data=calib_iter, num_calib_examples=num_examples,
                              quantized_dtype=quantized_dtype, **mode)
    return qsym, qarg, qaux


def convert_symbol(mx, sym, arg_params, aux_params, dtype, data_shape, ctx=None, *,
                   calib_mode: str = "naive", calib_batches: int = 2,
                   excluded_sym_names: Optional[Iterable[str]] = None,
                   quantized_dtype: str = "auto", cast_optional_params: bool = True, seed: int = 0,
                   calib_data=None):
    """The network in ``dtype`` for inference: returns (sym, arg_params, aux_params).

    ``float32``: unchanged. ``bfloat16``: AMP (``mx.contrib.amp.convert_model``,
    ``target_dtype='bfloat16'``): ``amp_cast`` nodes around Convolution / FullyConnected,
    their weights cast; the input stays float32. ``int8``: oneDNN post-training
    quantization (``quantize_model_mkldnn``) with ``calib_mode`` 'naive' on
    ``calib_batches`` random batches of ``data_shape``, or, given ``calib_data`` (images,
    N x C x H x W, numpy or NDArray), on those N images (or 'none': thresholds at run time),
    ``quantized_dtype`` 'auto' (uint8 after ReLU, int8 elsewhere); the input stays float32
    and a ``_contrib_quantize_v2`` node quantizes it. ``float16`` on CPU raises
    :class:`UnsupportedPrecision`. The parameters must be float32 (e.g. after
    ``Module.init_params`` / ``get_params``); the dicts passed in are not modified.
    """
    ctx = mx.cpu() if ctx is None else ctx
    if dtype == "float32":
        return sym, arg_params, aux_params
    on_cpu = getattr(ctx, "device_type", "cpu") == "cpu"
    if dtype == "float16":
        if on_cpu:
            raise UnsupportedPrecision(FP16_REASON)
        from mxnet.contrib import amp
        return amp.convert_model(sym, dict(arg_params), dict(aux_params), target_dtype="float16")
    if dtype == "bfloat16":
        return _to_bfloat16(mx, sym, arg_params, aux_params, cast_optional_params)
    if dtype == "int8":
        if not on_cpu:
            raise UnsupportedPrecision("int8 conversion here is oneDNN's (CPU contexts only)")
        return _to_int8(mx, sym, arg_params, aux_params, data_shape, ctx, calib_mode, calib_batches,
                        excluded_sym_names, quantized_dtype, seed, calib_data)
    raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(CPU_DTYPES)})")
