"""workers/precision.py: what this build and CPU support (pure rules), and a tiny worker that
converts LeNet and the MLP to bfloat16 and int8 when supported (skipped with the reason
otherwise) and checks that the graph changed and the outputs are finite."""

import os
import sys

import pytest

from pytest_mxperf.proc import spawn
from pytest_mxperf.measure import runner
from pytest_mxperf.workers import precision

# The worker: the standard library, numpy, MXNet and the zoo; never pytest.
WORKER = r'''
import contextlib, hashlib, sys
from pytest_mxperf.workers import precision
from pytest_mxperf.workers.protocol import import_mxnet, serve


def digest(csym, carg, caux):
    h = hashlib.sha256(csym.tojson().encode())
    for params in (carg, caux):
        for name in sorted(params):
            h.update(name.encode())
            h.update(params[name].asnumpy().tobytes())
    return h.hexdigest()


def int8_both_ways(mx, sym, arg, aux, shape):
    """The product's int8 conversion (numpy reads the calibration's min and max), and MXNet's
    own (its collector left in place): whether the product's swapped its collector in, and
    whether both made the same bytes."""
    theirs, swapped = precision._min_max_through_numpy, []

    @contextlib.contextmanager
    def spy(mx, q):
        with theirs(mx, q):
            swapped.append(q._LayerOutputMinMaxCollector.__name__)
            yield
    out = {}
    for how, swap in (("product", spy), ("mxnet", lambda mx, q: contextlib.nullcontext())):
        precision._min_max_through_numpy = swap
        try:
            out[how] = digest(*precision.convert_symbol(mx, sym, arg, aux, "int8", shape, mx.cpu(), seed=3))
        finally:
            precision._min_max_through_numpy = theirs
    return {"swapped": swapped, "same_bytes": out["product"] == out["mxnet"]}


def run(spec):
    import numpy as np
    mx = import_mxnet()
    sym, arg, aux, shape = precision.float32_network(mx, spec["model"], 4)
    support = {k: list(v) for k, v in precision.cpu_support(mx).items()}
    out = {"status": "ok", "message": "", "support": support, "float32_ops": precision.graph_ops(sym),
           "converted": {}}
    try:
        precision.convert_symbol(mx, sym, arg, aux, "float16", shape, mx.cpu())
        out["float16"] = "converted"
    except precision.UnsupportedPrecision as exc:
        out["float16"] = str(exc)
    data = mx.random.uniform(-1.0, 1.0, shape=shape)
    same = precision.convert_symbol(mx, sym, arg, aux, "float32", shape, mx.cpu())
    out["float32_unchanged"] = same[0] is sym and same[1] is arg and same[2] is aux
    for dtype in spec["dtypes"]:
        if not support[dtype][0]:
            continue
        csym, carg, caux = precision.convert_symbol(mx, sym, arg, aux, dtype, shape, mx.cpu())
        cmod = precision.bound_for_inference(mx, csym, carg, caux, shape)
        cmod.forward(mx.io.DataBatch(data=[data]), is_train=False)
        y = cmod.get_outputs()[0].asnumpy().astype("float32")
        out["converted"][dtype] = {"ops": precision.graph_ops(csym), "finite": bool(np.isfinite(y).all()),
                                   "shape": list(y.shape),
                                   "param_dtypes": sorted({precision.dtype_name(v.dtype) for v in carg.values()})}
        if dtype == "int8":
            out["converted"][dtype]["calibration"] = int8_both_ways(mx, sym, arg, aux, shape)
    return out


if __name__ == "__main__":
    serve(run, sys.argv[1:], "test_precision worker")
'''


@pytest.fixture(scope="module")
def worker_script(tmp_path_factory):
    path = tmp_path_factory.mktemp("precision") / "precision_worker.py"
    path.write_text(WORKER)
    return str(path)


def _run(script, model):
    env = spawn.with_package_path(os.environ)
    env.pop("PYTHONWARNINGS", None)
    env.setdefault("OMP_NUM_THREADS", "1")
    out = runner.run_process([sys.executable, script], {"model": model, "dtypes": ["bfloat16", "int8"]},
                             timeout=300, env=env)
    assert out.status == "ok", (out.message, out.stderr_tail[-5:])
    return out.payload


@pytest.fixture(scope="module", params=["lenet", "mlp"])
def converted(request, worker_script):
    return request.param, _run(worker_script, request.param)


def _skip_unless_supported(payload, dtype):
    ok, reason = payload["support"][dtype]
    if not ok:
        pytest.skip(f"{dtype} on this CPU / build: {reason}")


def test_bfloat16_adds_amp_casts_and_stays_finite(converted):
    model, p = converted
    _skip_unless_supported(p, "bfloat16")
    c = p["converted"]["bfloat16"]
    assert "amp_cast" not in p["float32_ops"]
    assert c["ops"].get("amp_cast", 0) >= 1, c["ops"]
    assert "bfloat16" in c["param_dtypes"]  # Convolution / FullyConnected weights cast offline
    assert c["finite"] and c["shape"] == [4, 10]


def test_int8_quantizes_the_graph_and_stays_finite(converted):
    model, p = converted
    _skip_unless_supported(p, "int8")
    c = p["converted"]["int8"]
    assert not any(op.startswith("_contrib_quantize") for op in p["float32_ops"])
    assert c["ops"].get("_contrib_quantize_v2", 0) >= 1, c["ops"]
    assert any(op.startswith("_sg_mkldnn_") for op in c["ops"]), c["ops"]
    assert "int8" in c["param_dtypes"]  # quantized weights
    assert c["finite"] and c["shape"] == [4, 10]
    # the calibration's min and max read by numpy: MXNet's collector swapped out, the same
    # graph, thresholds and quantized parameters as MXNet's own reductions give
    assert c["calibration"] == {"swapped": ["_NumpyMinMax"], "same_bytes": True}, c["calibration"]


def test_float16_is_refused_on_cpu_and_float32_is_left_alone(converted):
    _, p = converted
    assert p["float16"] == precision.FP16_REASON
    assert p["support"]["float16"] == [False, precision.FP16_REASON]
    assert p["float32_unchanged"] is True


# --------------------------------------------------------------------------- pure rules

AVX512 = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq"}


def test_support_rules():
    s = precision.support(["MKLDNN"], AVX512 | {"avx512_bf16", "avx512_vnni"})
    assert s["bfloat16"][0] and "native" in s["bfloat16"][1]
    assert s["int8"][0] and "VNNI" in s["int8"][1]
    assert s["float16"] == (False, precision.FP16_REASON)

    s = precision.support(["MKLDNN"], AVX512 | {"amx_bf16"})
    assert s["bfloat16"][0] and "amx_bf16" in s["bfloat16"][1]

    s = precision.support(["MKLDNN"], AVX512)  # Skylake-SP: oneDNN emulates bfloat16
    assert s["bfloat16"][0] and "emulated" in s["bfloat16"][1]
    assert s["int8"][0] and "without VNNI" in s["int8"][1]

    s = precision.support(["MKLDNN"], {"avx2", "fma"})
    assert not s["bfloat16"][0] and "avx512f" in s["bfloat16"][1]
    assert s["int8"][0]

    s = precision.support(["BLAS_OPEN", "OPENMP"], AVX512 | {"avx512_bf16"})
    assert not s["bfloat16"][0] and "MKLDNN" in s["bfloat16"][1]
    assert not s["int8"][0] and "MKLDNN" in s["int8"][1]

    s = precision.support(["MKLDNN"], AVX512 | {"avx512_bf16"}, bfloat16_amp=False, version="MXNet 1.6.0")
    assert s["bfloat16"] == (False, "MXNet 1.6.0 has no bfloat16 AMP (mx.contrib.amp.lists.symbol_bf16, MXNet 1.7+)")


def test_the_onednn_isa_cap_is_honoured():
    flags = AVX512 | {"avx512_bf16", "avx512_vnni"}
    assert precision.onednn_isa_cap({"DNNL_MAX_CPU_ISA": "avx2"}) == "AVX2"
    assert precision.onednn_isa_cap({"MKLDNN_MAX_CPU_ISA": "AVX512_CORE"}) == "AVX512_CORE"
    assert precision.onednn_isa_cap({}) is None
    assert not precision.support(["MKLDNN"], flags, "AVX2")["bfloat16"][0]
    emulated = precision.support(["MKLDNN"], flags, "AVX512_CORE")
    assert emulated["bfloat16"][0] and "emulated" in emulated["bfloat16"][1]
    assert "without VNNI" in emulated["int8"][1]
    assert "native" in precision.support(["MKLDNN"], flags, "AVX512_CORE_BF16")["bfloat16"][1]


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: X\nflags\t\t: fpu avx2 avx512f avx512_bf16\n\n"
                    "processor\t: 1\nflags\t\t: fpu\n")
    assert precision.cpu_flags(str(info)) == {"fpu", "avx2", "avx512f", "avx512_bf16"}
    assert precision.cpu_flags(str(tmp_path / "missing")) == set()


def test_dtype_names():
    import numpy as np

    assert precision.dtype_name(np.float32) == "float32"
    assert precision.dtype_name(np.int8) == "int8"
    assert precision.dtype_name(np.dtype([("bfloat16", np.uint16)])) == "bfloat16"  # MXNet's bfloat16


# --------------------------------------------------------------------------- the throughput worker

def _cell(dtype, model="lenet", mode="score"):
    from pytest_mxperf.model.workload import Workload
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("PYTHONWARNINGS", None)
    return runner.run_workload(Workload(model, mode, 4, dtype=dtype), smoke=True, timeout=300, env=env)


def test_the_throughput_worker_runs_int8_and_reports_unsupported_dtypes_with_the_reason():
    int8 = _cell("int8")
    if int8.status == "unsupported":
        pytest.skip(f"int8 here: {int8.message}")
    assert int8.status == "ok", (int8.message, int8.stderr_tail[-5:])
    assert int8.median > 0
    p = int8.meta["precision"]
    assert p["dtype"] == "int8" and p["ops"].get("_contrib_quantize_v2", 0) >= 1, p
    # its memory figure from after the conversion (MEMORY_METHOD_CONVERTED): the high-water mark
    # was started again there, and the setup's own is shown beside it
    assert int8.meta.peak_rss_bytes and p["setup_peak_rss_bytes"] > 0, (int8.meta.peak_rss_bytes, p)
    # float16 on CPU: unsupported with MXNet's reason, never a crash
    fp16 = _cell("float16", mode="latency")
    assert fp16.status == "unsupported" and precision.FP16_REASON in fp16.message
    bf16 = _cell("bfloat16")
    if bf16.status == "unsupported":
        assert bf16.message.startswith("bfloat16 on this CPU: ")
    else:
        assert bf16.status == "ok", bf16.message
        assert bf16.meta["precision"]["ops"].get("amp_cast", 0) >= 1


def test_reduced_precision_cells_are_cpu_inference_cells():
    from pytest_mxperf.model.workload import Workload, WorkloadError
    assert Workload("resnet50_v2", "score", 8, dtype="int8").key() == "score/resnet50_v2/b8/cpu:0/int8/threads=auto"
    Workload("resnet50_v2", "latency", 1, dtype="bfloat16")
    with pytest.raises(WorkloadError, match="int8 cells are inference cells"):
        Workload("resnet50_v2", "train", 8, dtype="int8")
    with pytest.raises(WorkloadError, match="bfloat16 cells are CPU cells"):
        Workload("resnet50_v2", "score", 8, contexts=("gpu:0",), dtype="bfloat16")


class _FakeMx:
    """What precision.cpu_support reads of MXNet: build features and the version."""
    __version__ = "1.9.1"

    def __init__(self, features):
        class F:
            def __init__(self, on):
                self.enabled = on

        class Runtime:
            @staticmethod
            def Features():
                return {name: F(True) for name in features}
        self.runtime = Runtime()


def test_why_the_worker_refuses_a_dtype():
    from pytest_mxperf.workers.throughput import _unsupported_at_first_batch, _unsupported_precision
    cpu = {"contexts": ["cpu:0"]}
    no_mkldnn = _FakeMx(["OPENMP", "BLAS_OPEN"])
    assert _unsupported_precision(no_mkldnn, dict(cpu, dtype="float32")) is None
    assert "FP16 gemm" in _unsupported_precision(no_mkldnn, dict(cpu, dtype="float16"))
    assert _unsupported_precision(no_mkldnn, {"contexts": ["gpu:0"], "dtype": "float16"}) is None
    assert "no MKLDNN" in _unsupported_precision(no_mkldnn, dict(cpu, dtype="int8"))
    assert "zoo networks" in _unsupported_precision(no_mkldnn, dict(cpu, dtype="int8", source="{}"))
    err = RuntimeError("MXNetError: Traceback (most recent call last):\n  File x\n"
                       "MXNetError: FP16 gemm on cpu not implemented!")
    assert "FP16 gemm on cpu not implemented" in _unsupported_at_first_batch(dict(cpu, dtype="float16"), err)
    assert _unsupported_at_first_batch(dict(cpu, dtype="float32"), err) is None
    assert _unsupported_at_first_batch(dict(cpu, dtype="int8"), RuntimeError("MXNetError: shape mismatch")) is None
