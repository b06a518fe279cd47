"""Reduced precision on CPU beside float32: ResNet-50 v2 scoring at batch 8.

MXNet's own CPU paths (``pytest_mxperf/workers/precision.py``): int8 through oneDNN
post-training quantization (``quantize_model_mkldnn``, calibrated on random batches) and
bfloat16 through AMP (``mx.contrib.amp.convert_model(..., target_dtype='bfloat16',
cast_optional_params=True)``), both converted inside the worker from the float32 network
with its random weights. float16 has no CPU kernels in MXNet 1.x: its cell is
*unsupported* and skips with the reason, as does a dtype this CPU or build cannot run
(oneDNN 2.x runs bfloat16 only on AVX-512 CPUs; both need the MKLDNN build).

Every cell is measured and judged like any other (baseline or A/B), its answers too. Its
outputs' distance from float32's (``||a - b|| / ||b||`` of the same weights on the same
inputs, from their answer records) is shown beside the ratio to float32; neither is asserted: whether reduced precision is faster depends on the CPU (VNNI,
native bfloat16), which is what a user wants to know before switching.
"""

import pytest

from pytest_mxperf.judge import answers

MODEL = "resnet50_v2"
BATCH = 8

CONTEXTS = ("cpu:0",)  # float16 on GPUs: test_gpu_float16.py

_FLOAT32 = {}  # contexts -> the float32 cell, measured once for the dtypes beside it


@pytest.mark.cpu
@pytest.mark.scoring
@pytest.mark.parametrize("dtype", ["int8", pytest.param("bfloat16", marks=pytest.mark.slow), "float16"])  # #26: the default session is the daily gate; --perf-slow runs the rest
def test_reduced_precision_beside_float32(mxperf, dtype):
    ctx = CONTEXTS
    cell = mxperf.measure(MODEL, BATCH, mode="score", contexts=ctx, dtype=dtype)
    mxperf.expect_ok(cell)  # unsupported: skips with the reason; a crash or error fails
    key = tuple(ctx)
    if key not in _FLOAT32:
        _FLOAT32[key] = mxperf.expect_ok(mxperf.measure(MODEL, BATCH, mode="score", contexts=ctx))
    fp32 = _FLOAT32[key]
    ratio = cell.median / fp32.median
    figures = {"float32_img_s": round(fp32.median, 2), f"{dtype}_img_s": round(cell.median, 2),
               f"{dtype}_to_float32": round(ratio, 3)}
    # how far its answers are from float32's: same weights, same inputs (judge/answers.py)
    dist = answers.output_distance([r.answers for r in cell.ok_runs if r.answers],
                                   [r.answers for r in fp32.ok_runs if r.answers])
    if dist is not None:
        figures[f"{dtype}_outputs_from_float32"] = float(f"{dist:.3g}")
    ops = next((r.meta.get("precision") for r in cell.ok_runs if r.meta.get("precision")), None) or {}
    mxperf.report(f"cpu precision {MODEL} b{BATCH} {dtype}", figures,
                  note="median of per-process img/s; the ratio is shown, not asserted"
                       + (f"; converted graph: {ops.get('ops')}" if ops.get("ops") else ""))
    assert cell.median > 0 and fp32.median > 0
