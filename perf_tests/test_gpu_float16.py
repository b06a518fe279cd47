"""float16 beside float32 on GPUs, for the networks whose definitions support it.

The float16 form is MXNet's own (``example/image-classification/symbols``): the float32
input is cast to float16 before the first layer, weights are float16 (BatchNorm stays
float32), the last layer's output is cast back to float32; training keeps float32 master
weights (``multi_precision``). MXNet's ``benchmark_score.py`` skips AlexNet and
Inception-BN for float16 ("Model definition ... does not support float16"), and so does
this suite (``zoo.FLOAT16_MODELS``). MXNet runs float16 on GPUs only.

Both cells are measured and judged like every other cell (baseline or A/B). Beyond that,
on a GPU with tensor cores (compute capability 7.0 or higher) float16 must be faster than
float32 for these conv nets at batch 16 and above by ``FP16_MIN_SPEEDUP``: tensor cores
compute only in reduced precision, so a float16 cell that is not clearly faster there
means float16 did not reach them (a cuDNN algorithm choice, a layout, a fallback). The
ratio is read from the two measured cells; on older GPUs it is shown, not asserted.
"""

import pytest

from pytest_mxperf.machine import gpu_arch, hardware
from pytest_mxperf import zoo

#: float16 / float32 throughput that a tensor-core GPU must reach at batch >= FP16_MIN_BATCH
FP16_MIN_SPEEDUP = 1.10
FP16_MIN_BATCH = 16
TENSOR_CORES_FROM = (7, 0)


def _speedup_rule(ctx, batch_size):
    """(asserted?, why): the rule that applies to this cell pair."""
    gpu = hardware.gpu_for_context(ctx[0])
    cc = gpu.get("compute_capability") if gpu else None
    if cc is None:
        return False, f"compute capability of {ctx[0]} unknown ({hardware.gpu_facts().describe()})"
    name = f"{gpu.get('name')} (compute capability {cc})"
    if gpu_arch.parse_cc(cc) < TENSOR_CORES_FROM:
        return False, f"{name} has no tensor cores: the float16/float32 ratio is shown, not asserted"
    if batch_size < FP16_MIN_BATCH:
        return False, f"batch {batch_size} < {FP16_MIN_BATCH}: the ratio is shown, not asserted"
    return True, f"{name} has tensor cores: float16 must be at least {FP16_MIN_SPEEDUP:g}x float32"


@pytest.mark.parametrize("mode", [pytest.param("score", marks=pytest.mark.scoring),
                                  pytest.param("train", marks=pytest.mark.training)])
@pytest.mark.mxperf_grid(models=zoo.FLOAT16_MODELS, devices=("gpu",))
def test_float16_beside_float32(mxperf, ctx, model, batch_size, mode):
    # GPU contexts only (MXNet's benchmark_score.py skips float16 on CPU; on CPU float16 is
    # reported unsupported by test_cpu_precision.py)
    fp32 = mxperf.expect_ok(mxperf.measure(model, batch_size, mode=mode, contexts=ctx))
    fp16 = mxperf.expect_ok(mxperf.measure(model, batch_size, mode=mode, contexts=ctx, dtype="float16"))
    ratio = fp16.median / fp32.median
    asserted, why = _speedup_rule(ctx, batch_size)
    mxperf.report("float16_speedup", {"model": model, "mode": mode, "batch": batch_size,
                                      "float32_img_s": round(fp32.median, 2), "float16_img_s": round(fp16.median, 2),
                                      "ratio": round(ratio, 3)}, note=why)
    if asserted:
        assert ratio >= FP16_MIN_SPEEDUP, (
            f"{fp16.workload.key()}: float16 {fp16.median:.1f} img/s is {ratio:.2f}x float32 "
            f"{fp32.median:.1f} img/s, below the {FP16_MIN_SPEEDUP:g}x a tensor-core GPU must reach ({why})")
