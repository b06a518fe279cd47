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

Unless float32 reached the tensor cores too: on compute capability 8.0 and newer an MXNet
1.9.1 built with CUDA 11 runs float32 GEMMs as TF32 (the float32 cell records it: the
``tf32`` fact, ``machine/tensor_math.py``), and then the ratio is shown, not asserted, saying
so (``judge/gpu_expectations.float16_rule``); with NVIDIA_TF32_OVERRIDE=0 it is asserted again.
"""

import pytest

from pytest_mxperf import zoo
from pytest_mxperf.judge.gpu_expectations import FP16_MIN_BATCH, FP16_MIN_SPEEDUP, float16_rule  # noqa: F401
from pytest_mxperf.machine import hardware


def _tf32(fp32):
    """The float32 cell's TF32 fact (its first process's), or None."""
    return next((r.tf32 for r in fp32.ok_runs if r.tf32), None)


def _speedup_rule(ctx, batch_size, fp32):
    """(asserted?, why): the rule that applies to this cell pair (the float32 cell's TF32 fact
    decides whether float32 reached the tensor cores too)."""
    return float16_rule(hardware.gpu_for_context(ctx[0]), ctx[0], batch_size, _tf32(fp32),
                        hardware.gpu_facts().describe())


_TF32_SHOWN = {True: "yes", False: "no", None: "unknown"}


@pytest.mark.parametrize("mode", [pytest.param("score", marks=pytest.mark.scoring),
                                  pytest.param("train", marks=pytest.mark.training)])
@pytest.mark.mxperf_grid(models=zoo.FLOAT16_MODELS, devices=("gpu",))
def test_float16_beside_float32(mxperf, ctx, model, batch_size, mode):
    # GPU contexts only (MXNet's benchmark_score.py skips float16 on CPU; on CPU float16 is
    # reported unsupported by test_cpu_precision.py)
    fp32 = mxperf.expect_ok(mxperf.measure(model, batch_size, mode=mode, contexts=ctx))
    fp16 = mxperf.expect_ok(mxperf.measure(model, batch_size, mode=mode, contexts=ctx, dtype="float16"))
    ratio = fp16.median / fp32.median
    asserted, why = _speedup_rule(ctx, batch_size, fp32)
    tf32 = _tf32(fp32) or {}
    mxperf.report("float16_speedup", {"model": model, "mode": mode, "batch": batch_size,
                                      "float32_img_s": round(fp32.median, 2), "float16_img_s": round(fp16.median, 2),
                                      "ratio": round(ratio, 3),
                                      "float32_tf32": _TF32_SHOWN[tf32.get("in_use")]},
                  note=why)
    if asserted:
        assert ratio >= FP16_MIN_SPEEDUP, (
            f"{fp16.workload.key()}: float16 {fp16.median:.1f} img/s is {ratio:.2f}x float32 "
            f"{fp32.median:.1f} img/s, below the {FP16_MIN_SPEEDUP:g}x a tensor-core GPU must reach ({why})")
