"""convergence worker and its data set (fresh processes; no wall-clock thresholds)."""

import sys

import numpy as np

from pytest_mxperf.measure import cluster as dist
from pytest_mxperf.measure import runner
from pytest_mxperf.workers import convergence

CMD = [sys.executable, "-m", "pytest_mxperf.workers.convergence"]


def run(**spec):
    out = runner.run_process(CMD, spec, timeout=300, env=dist.base_env(threads=2))
    assert out.payload is not None, f"{out.status}: {out.message} {out.stderr_tail}"
    return out.payload


def test_digits_data_set_is_the_committed_split():
    assert convergence.DATA.exists()
    xtr, ytr, xva, yva = convergence.load_digits()
    assert xtr.shape == (1438, 1, 28, 28) and xva.shape == (359, 1, 28, 28)
    assert len(xtr) + len(xva) == 1797  # the UCI digits
    assert xtr.dtype == np.float32 and 0.0 <= xtr.min() and xtr.max() <= 1.0
    assert set(np.unique(ytr)) == set(range(10)) and set(np.unique(yva)) == set(range(10))
    assert np.bincount(yva.astype(int)).min() >= 35  # stratified hold-out
    # the 4-pixel border of the 28x28 frame is empty (digits centred in 20x20)
    assert xtr[:, :, :4, :].max() == 0 and xtr[:, :, -4:, :].max() == 0


def test_lenet_reaches_the_target_and_stops_there():
    res = run(model="lenet", batch_size=128, seed=0, max_epochs=20)
    assert res["status"] == "ok", res["message"]
    assert res["reached"] is True
    assert res["final_val_accuracy"] >= convergence.DEFAULT_TARGET
    assert res["epochs"] == len(res["history"]) <= 20
    assert all(h["val_accuracy"] < convergence.DEFAULT_TARGET for h in res["history"][:-1])
    assert res["seconds_to_accuracy"] >= res["train_seconds"] > 0
    assert res["steps_per_epoch"] == 1438 // 128


def test_unreachable_target_runs_max_epochs_and_says_so():
    res = run(model="mlp", batch_size=256, seed=0, max_epochs=2, target_accuracy=1.01)
    assert res["status"] == "ok"
    assert res["reached"] is False and res["epochs"] == 2 and res["seconds_to_accuracy"] is None


def test_two_contexts_see_the_same_data_as_one_with_the_combined_batch():
    one = run(model="lenet", batch_size=64, contexts=["cpu:0"], seed=1, max_epochs=1, target_accuracy=1.01)
    two = run(model="lenet", batch_size=32, contexts=["cpu:0", "cpu:1"], seed=1, max_epochs=1,
              target_accuracy=1.01)
    assert one["total_batch"] == two["total_batch"] == 64
    assert abs(one["final_val_accuracy"] - two["final_val_accuracy"]) <= 2 / 359


def test_bad_requests_are_reported():
    assert run(model="resnet50_v2", batch_size=8)["status"] == "error"
    assert run(model="lenet", batch_size=4096)["status"] == "error"
    res = run(model="lenet", batch_size=32, contexts=["gpu:0"])
    assert res["status"] in ("unavailable", "ok")


def test_digits_file_is_the_one_the_script_wrote():
    """sha256 over x_train, y_train, x_val, y_val, as scripts/make_digits_npz.py prints it."""
    import hashlib
    h = hashlib.sha256()
    with np.load(convergence.DATA) as z:
        for k in ("x_train", "y_train", "x_val", "y_val"):
            h.update(np.ascontiguousarray(z[k]).tobytes())
        assert "UCI" in str(z["meta"]) and "scikit-learn" in str(z["meta"])
    assert h.hexdigest() == "b4619b375085729ec342e4fa3eed86b96de01f557f65aeb7d32067ef2337814e"
