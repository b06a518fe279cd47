"""commbench: classification logic, and the push/pull worker in a fresh process."""

import sys

import pytest

from pytest_mxperf.measure import cluster as dist
from pytest_mxperf.measure import runner
from pytest_mxperf import zoo
from pytest_mxperf.workers import commbench

CMD = [sys.executable, "-m", "pytest_mxperf.workers.commbench"]


def run(spec, threads=2):
    out = runner.run_process(CMD, spec, timeout=300, env=dist.base_env(threads=threads))
    assert out.payload is not None, f"{out.status}: {out.message} {out.stderr_tail}"
    return out.payload


def test_classify_uses_the_stated_ratio():
    r = commbench.COMM_BOUND_RATIO
    assert commbench.classify(r * 2.0, 2.0) == "communication-bound"
    assert commbench.classify(r * 2.0 * 0.99, 2.0) == "compute-bound"
    assert commbench.classify(5.0, 1.0, ratio=1.0) == "communication-bound"
    with pytest.raises(ValueError):
        commbench.classify(1.0, 0.0)


def test_wide_mlp_is_mostly_parameters():
    n = commbench.wide_mlp_params(commbench.WIDE_MLP_SCALED)
    assert n == 25000 * 1024 + 1024 + 1024 * 512 + 512 + 512 * 20000 + 20000
    forum = commbench.wide_mlp_params(commbench.WIDE_MLP_FORUM)
    assert 9 * n < forum < 11 * n


def test_push_pull_of_lenet_shapes_over_two_contexts():
    res = run({"network": {"model": "lenet"}, "contexts": ["cpu:0", "cpu:1"], "kvstore": "device",
               "batch_size": 8, "rounds": 3})
    assert res["status"] == "ok", res["message"]
    assert res["num_params"] == zoo.get_model("lenet").params
    assert res["num_arrays"] == 8
    assert abs(res["size_mb"] - 4 * res["num_params"] / 1e6) < 1e-9
    assert len(res["round_seconds"]) == 3
    assert res["error"] < 1e-5  # pulled == sum of the pushed gradients
    assert res["bandwidth_gbps"] > 0 and res["moved_gbps"] > res["bandwidth_gbps"]
    assert "memory copy" in res["note"]


def test_single_context_has_no_measure_py_bandwidth_but_moves_bytes():
    res = run({"network": {"model": "mlp"}, "contexts": ["cpu:0"], "rounds": 2})
    assert res["status"] == "ok" and res["kvstore"] == "local"
    assert res["bandwidth_gbps"] == 0.0 and res["moved_gbps"] > 0


def test_compute_side_and_classification_of_a_small_wide_mlp():
    net = {"wide_mlp": {"inputs": 2000, "hidden": [64, 32], "outputs": 1000}}
    res = run({"network": net, "contexts": ["cpu:0", "cpu:1"], "batch_size": 4, "rounds": 2,
               "compute": True, "compute_rounds": 2})
    assert res["status"] == "ok", res["message"]
    assert res["num_params"] == commbench.wide_mlp_params(net["wide_mlp"])
    assert res["compute_seconds"] > 0
    assert res["classification"] == commbench.classify(res["comm_seconds"], res["compute_seconds"])
    assert res["comm_to_compute"] == pytest.approx(res["comm_seconds"] / res["compute_seconds"])


def test_nccl_needs_gpus():
    res = run({"network": {"model": "mlp"}, "contexts": ["cpu:0", "cpu:1"], "kvstore": "nccl"})
    assert res["status"] == "unavailable"


def test_gpu_contexts_without_gpus_are_unavailable():
    res = run({"network": {"model": "mlp"}, "contexts": ["gpu:0", "gpu:1"], "kvstore": "device", "rounds": 2})
    assert res["status"] in ("unavailable", "ok"), res
