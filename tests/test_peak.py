"""workers/peak.py: the machine's measured GFLOP/s through oneDNN, and OpenBLAS's dot beside
it (FLOP counts of the networks: tests/test_flops.py)."""

import os
import sys

from pytest_mxperf.proc import spawn
from pytest_mxperf.measure import runner
from pytest_mxperf.workers import peak

# Small kernels: the test checks the worker works, not how fast this machine is.
SMALL = {"fc": [128, 512, 512], "conv": [2, 32, 32, 14, 14], "dot": [128, 512, 512],
         "round_seconds": 0.02, "rounds": 3}


def _run_peak(spec):
    env = spawn.with_package_path(os.environ)
    env.pop("PYTHONWARNINGS", None)
    env.setdefault("OMP_NUM_THREADS", "1")
    return runner.run_process([sys.executable, "-m", "pytest_mxperf.workers.peak"], spec, timeout=300, env=env)


def test_the_peak_worker_returns_positive_figures():
    out = _run_peak(SMALL)
    assert out.status == "ok", (out.message, out.stderr_tail[-5:])
    p = out.payload
    for key in ("fc_gflops", "conv_gflops", "dot_gflops", "peak_gflops"):
        assert isinstance(p[key], float) and p[key] > 0, key
    assert p["peak_gflops"] == max(p["fc_gflops"], p["conv_gflops"])  # dot (OpenBLAS) is never the peak
    k = p["kernels"]
    assert k["fc"]["flops_per_call"] == 2 * 128 * 512 * 512
    assert k["conv"]["flops_per_call"] == 2 * 2 * 32 * 14 * 14 * 32 * 9
    assert all(len(k[n]["round_gflops"]) == 3 and k[n]["gflops"] == max(k[n]["round_gflops"]) for n in k)


def test_a_subset_of_kernels_and_a_bad_kernel_name():
    out = _run_peak(dict(SMALL, kernels=["dot"]))
    assert out.status == "ok", out.message
    assert out.payload["dot_gflops"] > 0
    assert out.payload["fc_gflops"] is None and out.payload["peak_gflops"] is None
    bad = _run_peak(dict(SMALL, kernels=["gemv"]))
    assert bad.status == "error" and "unknown kernel 'gemv'" in bad.message


def test_kernel_flop_counts():
    assert peak.fc_flops(1024, 4096, 4096) == 2 * 1024 * 4096 * 4096
    # batch 8, 256 -> 256 channels, 28 x 28, 3 x 3, pad 1: output stays 28 x 28
    assert peak.conv_flops(8, 256, 256, 28, 28) == 2 * 8 * 256 * 28 * 28 * 256 * 9
    assert peak.conv_flops(1, 1, 1, 5, 5, kernel=3, pad=0) == 2 * 9 * 9


def test_a_peak_this_machine_cannot_measure_is_a_status_with_the_reason():
    no_gpu = _run_peak(dict(SMALL, context="gpu:0"))
    assert no_gpu.status == "unavailable" and "needs gpu:0 but this machine has 0 GPU(s)" in no_gpu.message
    fp16_cpu = _run_peak(dict(SMALL, dtype="float16"))
    assert fp16_cpu.status == "unsupported" and "not float16 on cpu:0" in fp16_cpu.message
