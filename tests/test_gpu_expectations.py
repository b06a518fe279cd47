"""What a GPU box is held to (#25 part 3), and its rehearsal (part 5): the kvstore rules with
their source, TF32 recorded for float32 cells on compute capability 8.0+ and the float16 and
update-tolerance rules accounting for it, fusion's NVRTC failure in one line with its fix.

The pure rules are checked directly; the end-to-end tests run a real pytest session
(pytester, separate process) whose workers are the stand-in MXNet (tests/stub_worker.py) and
whose NVML is the stand-in pynvml (tests/fake_nvml.py). No GPU is involved: these check the
suite's logic (which rule, which line, which exit code), and no figure here is a GPU's."""

from pathlib import Path

import pytest

import fake_nvml as F
from stand_ins import box_records as _records
from stand_ins import run_box as _run
from pytest_mxperf.judge import gpu_expectations as G
from pytest_mxperf.machine import hardware, nvml, tensor_math
from pytest_mxperf.workers.multidevice import UPDATE_REL_TOL, UPDATE_REL_TOL_TF32

PERF_TESTS = Path(__file__).resolve().parent.parent / "perf_tests"
CUDA_FEATURES = ["CUDA", "CUDNN", "NCCL", "CUDA_RTC"]
GUIDE = "MXNet 1.9.1 docs/static_site/src/pages/api/faq/multi_devices.md"

# what MXNet 1.9.1 raises when fusion's NVRTC cannot compile for the GPU (src/operator/fusion/
# fused_op.cu, FusedOp::CompileCode's CHECK_EQ, exact, then NVRTC's log); the log line is an
# example of NVRTC's complaint about an architecture, not copied from a real run (no GPU here)
NVRTC_FAILURE = ("MXNetError: Traceback (most recent call last):\n"
                 "  File \"../src/operator/fusion/fused_op.cu\", line 672\n"
                 "MXNetError: Check failed: compileResult == NVRTC_SUCCESS (5 vs. 0) : NVRTC Compilation failed. "
                 "Please set environment variable MXNET_USE_FUSION to 0.\n"
                 "nvrtc: error: invalid value for --gpu-architecture (-arch)")


def l4_box():
    """1 x NVIDIA L4 (compute capability 8.9: the 1.9.1 cu11x wheels' sm_86 code runs on it)."""
    d = F.device("NVIDIA L4", "8.9", 23034, "00000000:3B:00.0", F.uuid(0, "l4"), max_sm=2040, max_mem=6251,
                 power_w=72.0)
    return {"driver_version": "535.104.05", "cuda_driver_version": 12020, "devices": [d]}


def _facts(spec):
    return nvml.load(F.module(spec)).static_facts()


# -- TF32: the fact ------------------------------------------------------------------------------

def test_tf32_is_in_use_on_an_a100_with_a_cuda_11_build_whatever_mxnets_tensor_core_switch():
    fact = tensor_math.tf32_fact("8.0", "11.7", {}, gpu="A100")
    assert fact["in_use"] is True and fact["build_cuda"] == "11.7" and fact["fp16_conversion"] is False
    assert "CUBLAS_TF32_TENSOR_OP_MATH for CUDA >= 11" in fact["why"] and "NVIDIA_TF32_OVERRIDE=0" in fact["why"]
    # linalg.h's TF32 math mode reads no MXNet variable
    assert tensor_math.tf32_fact("8.0", "11.7", {"MXNET_CUDA_ALLOW_TENSOR_CORE": "0"})["in_use"] is True


@pytest.mark.parametrize("cc,cuda,env,in_use,says", [
    ("8.0", "11.7", {"NVIDIA_TF32_OVERRIDE": "0"}, False, "but NVIDIA_TF32_OVERRIDE=0"),
    ("7.0", "11.7", {}, False, "has no TF32 (it starts at compute capability 8.0)"),
    ("8.6", "10.2", {}, False, "no TF32 (MXNet uses it from CUDA 11)"),
    ("8.0", None, {}, None, "the MXNet build's CUDA version is unknown"),
    (None, "11.7", {}, None, "is unknown"),
])
def test_tf32_off_or_unknown_says_why(cc, cuda, env, in_use, says):
    fact = tensor_math.tf32_fact(cc, cuda, env, gpu="gpu:0")
    assert fact["in_use"] is in_use and says in fact["why"]


def test_float16_conversion_of_float32_convolutions_is_recorded_from_volta():
    env = {"MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION": "1"}
    assert tensor_math.tf32_fact("7.0", "10.2", env)["fp16_conversion"] is True
    assert tensor_math.tf32_fact("6.0", "10.2", env)["fp16_conversion"] is False
    assert tensor_math.tf32_fact("7.0", "10.2", dict(env, MXNET_CUDA_ALLOW_TENSOR_CORE="0"))["fp16_conversion"] is False


def test_the_builds_cuda_comes_from_the_wheel_else_from_the_worker():
    assert tensor_math.build_cuda_version("mxnet-cu112", "11.8") == ("11.2", " (mxnet-cu112)")
    assert tensor_math.build_cuda_version("mxnet", "11.4") == ("11.4", " (the CUDA runtime the worker loaded)")
    assert tensor_math.build_cuda_version(None, None) == (None, "")


def test_for_contexts_follows_cuda_visible_devices_to_the_gpu():
    mixed = F.p100_pcie_box()
    mixed["devices"][1] = F.a100_nvswitch_box()["devices"][0]
    facts = _facts(mixed)
    assert tensor_math.for_contexts(["cpu:0"], {}, "mxnet-cu117", facts=facts) is None
    p100 = tensor_math.for_contexts(["gpu:0"], {}, "mxnet-cu117", facts=facts)
    assert p100["in_use"] is False and p100["compute_capability"] == "6.0"
    a100 = tensor_math.for_contexts(["gpu:0"], {"CUDA_VISIBLE_DEVICES": "1"}, "mxnet-cu117", facts=facts)
    assert a100["in_use"] is True and a100["why"].startswith("NVIDIA A100-SXM4-40GB (gpu:0) (compute capability 8.0)")
    both = tensor_math.for_contexts(["gpu:0", "gpu:1"], {}, "mxnet-cu117", facts=facts)
    assert both["in_use"] is True and both["contexts"] == ["gpu:0", "gpu:1"]


# -- the rules -----------------------------------------------------------------------------------

def test_local_and_nccl_are_shown_with_what_the_guide_says():
    local = G.kvstore_rule("local", 8, 0.05)
    assert not local.asserted and local.compare_with is None
    assert local.text == (f"local reduces on the CPU ({GUIDE}: \"all gradients are copied to CPU memory and weights "
                          "are updated there\"); the guide gives no scaling figure for it: shown, not asserted")
    nccl = G.kvstore_rule("nccl", 8, 0.05)
    assert not nccl.asserted and GUIDE in nccl.text and "mx.kv.create's docstring" in nccl.text


def test_device_is_held_to_local_from_four_gpus_as_the_guide_suggests():
    rule = G.kvstore_rule("device", 4, 0.05)
    assert rule.asserted and rule.compare_with == "local"
    assert rule.text == ("device reduces on the GPUs: on 4 GPUs it must be at least as fast as local on the same "
                         f"GPUs, within the minimum effect 5% ({GUIDE}: \"When using a large number of GPUs, e.g. "
                         ">=4, we suggest using `device` for better performance\"; a direction, no figure)")
    two = G.kvstore_rule("device", 2, 0.05)
    assert not two.asserted and "its suggestion starts at 4" in two.text and two.text.endswith("shown, not asserted")


def test_device_against_local_holds_within_the_minimum_effect_and_fails_beyond_it():
    rule = G.kvstore_rule("device", 8, 0.05)
    holds, line = G.judge_against(rule, 960.0, 1000.0, 0.05)
    assert holds and line.startswith("8 GPUs: device 960.0 samples/s is 0.96x local 1000.0; ")
    holds, line = G.judge_against(rule, 800.0, 1000.0, 0.05)
    assert not holds
    assert line == ("8 GPUs: device 800.0 samples/s is 0.80x local 1000.0, slower by more than the minimum effect 5%; "
                    + rule.text)


A100 = {"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}


def test_the_float16_margin_is_not_applied_when_float32_ran_as_tf32():
    tf32 = tensor_math.tf32_fact("8.0", "11.7", {}, gpu="A100")
    asserted, why = G.float16_rule(A100, "gpu:0", 32, tf32)
    assert not asserted
    assert why.startswith("NVIDIA A100-SXM4-40GB (compute capability 8.0) ran float32 as TF32 on tensor cores too")
    assert why.endswith("the ratio is shown, not asserted (without TF32 it must be at least 1.1x)")
    off = tensor_math.tf32_fact("8.0", "11.7", {"NVIDIA_TF32_OVERRIDE": "0"})
    assert G.float16_rule(A100, "gpu:0", 32, off) == (
        True, "NVIDIA A100-SXM4-40GB (compute capability 8.0) has tensor cores: float16 must be at least 1.1x float32")
    assert G.float16_rule(A100, "gpu:0", 8, off)[0] is False  # below FP16_MIN_BATCH
    unknown = tensor_math.tf32_fact("8.0", None, {})
    assert G.float16_rule(A100, "gpu:0", 32, unknown)[0] is False
    p100 = {"name": "Tesla P100-PCIE-16GB", "compute_capability": "6.0"}
    assert "has no tensor cores" in G.float16_rule(p100, "gpu:0", 32, tensor_math.tf32_fact("6.0", "11.7", {}))[1]


def test_the_update_tolerance_widens_to_one_tf32_ulp_with_tf32_only():
    assert UPDATE_REL_TOL_TF32 == 2.0 ** -10
    tol, why = G.update_tolerance(None)
    assert tol == UPDATE_REL_TOL == 1e-4 and "float32 without TF32" in why
    assert G.update_tolerance(tensor_math.tf32_fact("7.0", "11.7", {}))[0] == UPDATE_REL_TOL
    tol, why = G.update_tolerance(tensor_math.tf32_fact("8.0", "11.7", {}))
    assert tol == UPDATE_REL_TOL_TF32
    assert why.startswith("9.77e-04 = 2^-10, one unit in the last place of TF32's 10-bit mantissa")
    assert "still 10x beyond it" in why
    assert G.update_tolerance(tensor_math.tf32_fact("8.0", None, {}))[0] == UPDATE_REL_TOL_TF32
    conversion = tensor_math.tf32_fact("7.0", "10.2", {"MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION": "1"})
    assert G.update_tolerance(conversion)[0] == UPDATE_REL_TOL_TF32


# -- NVRTC -----------------------------------------------------------------------------------

NVRTC_LINE = ("NVRTC Compilation failed on NVIDIA L4 (compute capability 8.9): MXNet's pointwise fusion compiles "
              "its fused kernels at run time with mxnet-cu117's NVRTC, which could not compile for this GPU "
              "(nvrtc: error: invalid value for --gpu-architecture (-arch)); set MXNET_USE_FUSION=0 (pointwise "
              "operators then run unfused), or use an MXNet wheel whose CUDA's NVRTC knows compute capability 8.9")


def test_nvrtc_failure_is_one_line_with_its_fix():
    assert hardware.looks_like_nvrtc_failure(NVRTC_FAILURE)
    assert not hardware.looks_like_nvrtc_failure("CUDA: out of memory") and not hardware.looks_like_nvrtc_failure("")
    msg = hardware.explain_gpu_failure(NVRTC_FAILURE.splitlines(), ("gpu:0",), {}, "mxnet-cu117", _facts(l4_box()))
    assert msg == NVRTC_LINE
    # the distribution and the GPU unknown: still the cause and both fixes
    msg = hardware.explain_gpu_failure([NVRTC_FAILURE], ("gpu:0",), {}, None, [])
    assert msg.startswith("NVRTC Compilation failed on gpu:0: ") and "this MXNet build's NVRTC" in msg
    assert "set MXNET_USE_FUSION=0" in msg and "knows this GPU" in msg and "\n" not in msg


# -- the rehearsal: real pytest sessions, stand-in workers and NVML -----------------------------

SCORE = """
import pytest

@pytest.mark.mxperf_grid(models=("resnet50_v2",), batch_sizes=(32,))
def test_score(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""


def test_rehearsal_nvrtc_failing_is_one_line_naming_the_fix(pytester, make_stub_python, gpu_box):
    gpu_box(l4_box())
    pytester.makepyfile(test_score=SCORE)
    python = make_stub_python("gpu", gpus=1, features=CUDA_FEATURES, dists=[["mxnet-cu117", "1.9.1"]],
                              **{"raise": NVRTC_FAILURE})
    r = _run(pytester, "-m", "gpu", "--perf-ctx", "gpu:0", "--perf-python", python)
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    r.assert_outcomes(failed=1)
    (line,) = [ln for ln in out.splitlines() if ln.startswith("score/") and "NVRTC Compilation failed" in ln]
    assert line == f"score/resnet50_v2/b32/gpu:0/float32/threads=auto: error: {NVRTC_LINE}"


def _float16_session(pytester, make_stub_python, gpu_box, fp16_factor):
    gpu_box(F.a100_nvswitch_box())
    pytester.makepyfile(test_gpu_float16=(PERF_TESTS / "test_gpu_float16.py").read_text())
    python = make_stub_python("gpu", rate=400.0, gpus=8, features=CUDA_FEATURES,
                              dtype_factors={"float16": fp16_factor})
    return _run(pytester, "-m", "gpu and scoring", "--perf-ctx", "gpu:0", "--perf-models", "resnet50_v2",
                "--perf-batch-sizes", "16", "--perf-python", python, "--perf-report", "rep", "-rs",
                "-v")  # -v: the full report, with what is shown, not judged


def test_rehearsal_an_a100_float32_cell_records_tf32_and_the_float16_rule_says_so(pytester, make_stub_python,
                                                                                  gpu_box):
    r = _float16_session(pytester, make_stub_python, gpu_box, 1.02)  # float16 barely faster: shown, not failed
    out = r.stdout.str()
    assert r.ret == 0, out
    r.assert_outcomes(passed=1)
    fp32 = next(rec for rec in _records(pytester) if rec["workload"]["dtype"] == "float32")
    tf32 = fp32["runs"][0]["meta"]["tf32"]
    assert tf32["in_use"] is True and tf32["compute_capability"] == "8.0" and tf32["build_cuda"] == "11.7"
    fp16 = next(rec for rec in _records(pytester) if rec["workload"]["dtype"] == "float16")
    assert "tf32" not in fp16["runs"][0]["meta"]
    assert "ratio=1.020, float32_tf32=yes" in out
    assert ("NVIDIA A100-SXM4-40GB (compute capability 8.0) ran float32 as TF32 on tensor cores too "
            "(NVIDIA A100-SXM4-40GB (gpu:0) (compute capability 8.0) with an MXNet built with CUDA 11.7 "
            "(mxnet-cu117): float32 GEMMs use TF32") in out


def test_rehearsal_with_tf32_overridden_off_the_float16_margin_is_asserted_again(pytester, make_stub_python,
                                                                                 gpu_box, monkeypatch):
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")
    r = _float16_session(pytester, make_stub_python, gpu_box, 1.02)
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    r.assert_outcomes(failed=1)
    fp32 = next(rec for rec in _records(pytester) if rec["workload"]["dtype"] == "float32")
    assert fp32["runs"][0]["meta"]["tf32"]["in_use"] is False
    assert fp32["runs"][0]["meta"]["env"]["NVIDIA_TF32_OVERRIDE"] == "0"
    assert "below the 1.1x a tensor-core GPU must reach (NVIDIA A100-SXM4-40GB (compute capability 8.0) has " \
           "tensor cores: float16 must be at least 1.1x float32)" in out


def _scaling_session(pytester, make_stub_python, gpu_box, spec, **stub):
    gpu_box(spec)
    pytester.makepyfile(test_multi_device=(PERF_TESTS / "test_multi_device.py").read_text())
    python = make_stub_python("gpu", rate=300.0, gpus=len(spec["devices"]), features=CUDA_FEATURES, **stub)
    return _run(pytester, "-m", "gpu", "-k", "weak_scaling and resnet50_v2", "--perf-python", python, "-rs",
                "-v")  # -v: the full report, with what is shown, not judged


def test_rehearsal_device_slower_than_local_on_eight_gpus_fails_naming_the_guide(pytester, make_stub_python,
                                                                                 gpu_box):
    r = _scaling_session(pytester, make_stub_python, gpu_box, F.a100_nvswitch_box(), scaling=0.9,
                         kvstore_factors={"device": 0.8})
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    r.assert_outcomes(passed=2, failed=1)  # local and nccl shown, device held to local
    # the stand-in: 300 img/s x (1 + 0.9 x 7) on 8 GPUs = 2190 (local), x 0.8 for device, +-1% between processes
    (line,) = [ln.strip() for ln in out.splitlines() if ln.lstrip().startswith("E ") and "8 GPUs: device" in ln]
    rule = G.kvstore_rule("device", 8, 0.05).text
    assert line == ("E           AssertionError: 8 GPUs: device 1736.2 samples/s is 0.80x local 2170.3, slower by "
                    f"more than the minimum effect 5%; {rule}")
    assert f"local reduces on the CPU ({GUIDE}: " in out


def test_rehearsal_two_gpus_no_faster_than_one_are_shown_with_the_source_not_failed(pytester, make_stub_python,
                                                                                    gpu_box):
    r = _scaling_session(pytester, make_stub_python, gpu_box, F.p100_pcie_box(), scaling=0.05)
    out = r.stdout.str()
    assert r.ret == 0, out
    r.assert_outcomes(passed=3)
    assert "scaling_efficiency=0.525" in out
    assert "on 2 GPUs the guide says nothing of it against local (its suggestion starts at 4" in out
    assert out.count(GUIDE) >= 3
