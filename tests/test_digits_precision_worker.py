"""workers/digits_precision.py end to end, once, small (3 epochs, short rounds): what holds
on any machine. No assertion on speed or timings: those are the perf test's and the
benchmark's (benchmarks/digits_precision.py)."""

import sys

import numpy as np
import pytest

from pytest_mxperf.judge.accuracy import judge_accuracies
from pytest_mxperf.measure import cluster as dist
from pytest_mxperf.measure import runner
from pytest_mxperf.workers import digits_precision

CMD = [sys.executable, "-m", "pytest_mxperf.workers.digits_precision"]
SMALL = {"seed": 0, "epochs": 3, "time_budget": 0.2, "min_rounds": 2, "warmup_seconds": 0.05,
         "round_seconds": 0.02}


def run(**spec):
    out = runner.run_process(CMD, spec, timeout=120, env=dist.base_env(threads=2))
    assert out.payload is not None, f"{out.status}: {out.message} {out.stderr_tail}"
    return out.payload


@pytest.fixture(scope="module")
def result():
    return run(**SMALL)


def test_the_run_trains_and_scores_every_dtype(result):
    r = result
    assert r["status"] == "ok", r["message"]
    assert r["seed"] == 0 and r["epochs"] == 3 and r["fixed_epochs"] is True and len(r["history"]) == 3
    assert r["calibration_images"] == 71 and r["evaluation_images"] == 288
    assert r["calibration_images"] + r["evaluation_images"] == 359  # the whole hold-out, split once
    assert r["mxnet_version"] and r["meta"]["mxnet_version"] == r["mxnet_version"]
    rows = r["dtypes"]
    assert set(rows) == {"float32", "bfloat16", "int8"}
    for d, row in rows.items():
        assert row["status"] in ("ok", "unsupported", "error"), row
        assert row["reason"], row
        if row["status"] == "ok":
            assert 0.0 <= row["accuracy"] <= 1.0
            assert row["correct"] == round(row["accuracy"] * 288)
            assert row["gap_vs_float32"] == pytest.approx(row["accuracy"] - rows["float32"]["accuracy"])
            assert 0 <= row["changed_predictions"] <= 288
            assert row["img_per_s"] > 0 and row["speedup_vs_float32"] > 0
            assert len(row["round_seconds"]) >= 2 and row["batches_per_round"] >= 1
        else:
            assert row["accuracy"] is None and row["img_per_s"] is None
    assert rows["float32"]["status"] == "ok"
    assert rows["float32"]["accuracy"] > 0.8  # LeNet after 3 epochs on the digits
    assert rows["float32"]["gap_vs_float32"] == 0 and rows["float32"]["changed_predictions"] == 0
    # the reference's speed-up is 1 by construction (not a timing claim)
    assert rows["float32"]["speedup_vs_float32"] == 1.0


def test_int8_row_is_a_figure_or_says_why_not(result):
    row = result["dtypes"]["int8"]
    assert row["supported"] == result["support"]["int8"][0]
    if row["supported"]:
        assert row["status"] == "ok", row["reason"]
        assert row["accuracy"] is not None
        assert any(k.startswith("_contrib_quantize") for k in row["ops"]), row["ops"]  # the graph was quantized
    else:
        assert row["status"] == "unsupported" and row["accuracy"] is None and row["reason"]


def test_bfloat16_only_where_supported(result):
    row = result["dtypes"]["bfloat16"]
    assert row["supported"] == result["support"]["bfloat16"][0]
    if row["supported"]:
        assert row["status"] == "ok", row["reason"]
        assert row["ops"].get("amp_cast", 0) > 0, row["ops"]
    else:
        assert row["status"] == "unsupported" and row["accuracy"] is None and row["reason"]


def test_the_parent_reads_the_rows_and_judges_them(result):
    rows = result["meta"]["precision"]["dtypes"]
    assert rows == result["dtypes"]
    verdicts = judge_accuracies({d: row["accuracy"] for d, row in rows.items()})
    assert set(verdicts) == {"bfloat16", "int8"}
    for d, v in verdicts.items():
        assert (v.passed is None) == (rows[d]["accuracy"] is None)
    assert result["meta"]["timed_windows"] and all(a <= b for a, b in result["meta"]["timed_windows"])


def test_bad_requests_are_reported():
    assert run(model="resnet50_v2", epochs=1)["status"] == "error"
    res = run(dtypes=["float32", "int4"], epochs=1)
    assert res["status"] == "error" and "int4" in res["message"]


def test_the_hold_out_split_and_the_padding():
    cal, ev = digits_precision.split_holdout(359)
    assert (cal.start, cal.stop, ev.start, ev.stop) == (0, 71, 71, 359)
    with pytest.raises(ValueError):
        digits_precision.split_holdout(359, 0.0)
    with pytest.raises(ValueError):
        digits_precision.split_holdout(3, 0.2)  # no calibration image
    x = np.ones((5, 1, 28, 28), np.float32)
    y = np.arange(5, dtype=np.float32)
    b = digits_precision.padded_batches(x, y, 2)
    assert [n for _, _, n in b] == [2, 2, 1]
    assert b[-1][0].shape == (2, 1, 28, 28) and b[-1][0][1].max() == 0
