"""multidevice worker: N contexts produce the same SGD update as 1 context (fresh processes)."""

import sys
from pathlib import Path

import pytest

from pytest_mxperf.measure import cluster as dist
from pytest_mxperf.measure import runner
from pytest_mxperf.workers import multidevice

CMD = [sys.executable, "-m", "pytest_mxperf.workers.multidevice"]
#: the same worker with a 1% larger learning rate on the data-parallel side
WRONG_UPDATE_CMD = [sys.executable, str(Path(__file__).resolve().parent / "wrong_update_worker.py")]


def run(cmd=CMD, **spec):
    spec.setdefault("batch_size", 16)
    spec.setdefault("contexts", ["cpu:0", "cpu:1"])
    out = runner.run_process(cmd, spec, timeout=300, env=dist.base_env(threads=1))
    assert out.payload is not None, f"{out.status}: {out.message} {out.stderr_tail}"
    return out.payload


@pytest.mark.parametrize("net,kvstore", [("lenet", "device"), ("lenet", "local"), ("mlp", "device")])
def test_two_cpu_contexts_match_one_context_with_combined_batch(net, kvstore):
    res = run(model=net, kvstore=kvstore, steps=2)
    assert res["status"] == "ok", res["message"]
    assert res["total_batch"] == 32
    assert res["update_norm"] > 0
    assert res["update_rel_err"] < multidevice.UPDATE_REL_TOL, res


def test_several_checks_in_one_process_give_what_each_gives_alone():
    """The daily session runs its selected checks in one worker process (``checks``): each
    result is the one its own process gives, a refused model's refusal included."""
    checks = [{"model": "lenet", "kvstore": "device"}, {"model": "mlp", "kvstore": "local"},
              {"model": "inception-bn", "kvstore": "device"}]
    together = run(checks=checks, steps=2)
    assert together["status"] == "ok" and len(together["checks"]) == 3, together
    for check, got in zip(checks, together["checks"]):
        alone = run(steps=2, **check)
        assert got["status"] == alone["status"], (got, alone)
        if alone["status"] == "ok":
            assert got["update_rel_err"] == pytest.approx(alone["update_rel_err"], rel=1e-6)
            assert got["update_rel_err"] < multidevice.UPDATE_REL_TOL
        else:
            assert "BatchNorm" in got["message"]


def test_three_contexts_match_too():
    res = run(model="mlp", kvstore="device", contexts=["cpu:0", "cpu:1", "cpu:2"], batch_size=8)
    assert res["status"] == "ok", res["message"]
    assert res["update_rel_err"] < multidevice.UPDATE_REL_TOL


def test_a_wrong_update_is_detected():
    # negative control: a 1% different learning rate on the data-parallel side
    res = run(WRONG_UPDATE_CMD, model="lenet", kvstore="device")
    assert res["status"] == "ok"
    assert res["update_rel_err"] > 100 * multidevice.UPDATE_REL_TOL


def test_batchnorm_models_are_refused_with_the_reason():
    res = run(model="inception-bn", kvstore="device", batch_size=1)
    assert res["status"] == "error" and "BatchNorm" in res["message"]


def test_nccl_needs_gpus():
    res = run(model="lenet", kvstore="nccl")
    assert res["status"] == "unavailable" and "GPU" in res["message"]


def test_gpu_contexts_are_unavailable_without_gpus():
    res = run(model="lenet", kvstore="device", contexts=["gpu:0", "gpu:1"])
    if res["status"] == "ok":  # a machine with two GPUs
        assert res["update_rel_err"] < multidevice.UPDATE_REL_TOL
    else:
        assert res["status"] == "unavailable" and "GPU" in res["message"], res


def test_a_training_cell_on_two_cpu_contexts_runs_with_its_batch_in_host_memory():
    """The throughput worker's several-context batch sits in host memory, as a data iterator's
    (Module copies each slice to its context): a cpu:0,cpu:1 cell still trains, each kvstore."""
    from pytest_mxperf.model.workload import Workload
    for kvstore in ("local", "device"):
        w = Workload("lenet", mode="train", batch_size=8, contexts=("cpu:0", "cpu:1"), threads="per-context",
                     kvstore=kvstore)
        r = runner.run_workload(w, smoke=True, env=dist.base_env(threads=1), timeout=300)
        assert r.status == "ok", (kvstore, r.message, r.stderr_tail[-3:])
        assert r.meta["total_batch"] == 16 and r.median > 0
