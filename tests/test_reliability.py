"""Faults and bad input end in a clear one-line message (the rest of the cases live beside
the code they provoke: runner faults in test_runner.py, option errors in test_plugin.py,
baseline store faults in test_baselines.py, distributed teardown in test_dist.py)."""

import pytest

from pytest_mxperf.judge.floors import judge_floor
from pytest_mxperf.measure.session import PerfSession
from pytest_mxperf.model.options import PerfOptions
from pytest_mxperf.model.measurement import CellMeasurement, RunResult
from pytest_mxperf.judge.floors import Floor
from pytest_mxperf.workers.protocol import looks_like_oom
from pytest_mxperf.model.workload import Workload


@pytest.mark.parametrize("text", [
    # what MXNet prints when a GPU allocation fails, across 1.x releases
    "MXNetError: [12:00:00] src/storage/./pooled_storage_manager.h:151: cudaMalloc retry failed: out of memory",
    "MXNetError: Check failed: e == cudaSuccess || e == cudaErrorCudartUnloading: CUDA: out of memory",
    "MXNetError: Failed to allocate CPU Memory",
    "terminate called after throwing an instance of 'std::bad_alloc'",
])
def test_out_of_memory_messages_are_recognised(text):
    assert looks_like_oom(text)


def test_ordinary_errors_are_not_oom():
    assert not looks_like_oom("MXNetError: Shape inconsistent, Provided = [8,3,224,224]")


def _session(num_gpus):
    s = PerfSession(PerfOptions()).scheduler
    s._probe_cache[None] = {"status": "ok", "num_gpus": num_gpus}
    return s


def test_gpu_contexts_beyond_the_machine_say_why():
    assert _session(0).gpu_unavailable_reason(["gpu:0"]) == "no GPU here: mx.context.num_gpus() is 0"
    reason = _session(2).gpu_unavailable_reason(["gpu:3"])
    assert reason == "gpu:3 requested but this machine has 2 GPU(s) (gpu:0..gpu:1)"
    assert _session(2).gpu_unavailable_reason(["gpu:0", "gpu:1"]) is None
    assert _session(0).gpu_unavailable_reason(["cpu:0"]) is None


def test_a_gpu_oom_on_a_documented_oom_cell_is_not_a_failure():
    w = Workload("resnet152_v2", batch_size=32, contexts=("gpu:0",))
    cell = CellMeasurement(w, [RunResult(w, "oom", message="cudaMalloc retry failed: out of memory")])
    documented_oom = Floor(None, "score/c4.large", None, None, 0.1, True, "the table records OOM")
    assert judge_floor(cell, documented_oom)[0] == "passed"
    other = Floor("documented", "score/p100", 294.17, 264.75, 0.1, False, "P100")
    outcome, message = judge_floor(cell, other)
    assert outcome == "failed" and "out of memory" in message and "\n" not in message


def test_the_error_line_skips_mxnet_traceback_headers():
    from pytest_mxperf.workers.protocol import error_line
    text = ("mxnet.base.MXNetError: Traceback (most recent call last):\n"
            "  File \"../src/storage/./cpu_device_storage.h\", line 74\n"
            "MXNetError: Failed to allocate CPU Memory")
    assert error_line(text, "X") == "MXNetError: Failed to allocate CPU Memory"
    text = ("mxnet.base.MXNetError: Traceback (most recent call last):\n  File \"x.cc\", line 1\n"
            "MXNetError: Shape inconsistent, Provided = [8], inferred shape=(4,)")
    assert error_line(text, "X") == "MXNetError: Shape inconsistent, Provided = [8], inferred shape=(4,)"
    assert error_line("", "ValueError") == "ValueError"
