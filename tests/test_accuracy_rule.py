"""judge/accuracy.py: reduced precision's accuracy against float32's (MLPerf-style, 1 point
absolute). Pure: no worker, no MXNet."""

import pytest

from pytest_mxperf.judge.accuracy import ACCURACY_TOLERANCE, judge_accuracies


def test_the_tolerance_is_one_point():
    assert ACCURACY_TOLERANCE == 0.01


def test_exactly_one_point_below_passes():
    # 0.95 - 0.94 is 0.010000000000000009 in binary: still exactly one point
    v = judge_accuracies({"float32": 0.95, "int8": 0.94})["int8"]
    assert v.passed is True
    assert v.gap == pytest.approx(-0.01)
    assert "within" in v.reason


def test_one_point_below_passes_at_other_values():
    for ref in (0.5, 0.93, 0.97, 1.0):
        assert judge_accuracies({"float32": ref, "bfloat16": ref - 0.01})["bfloat16"].passed is True


def test_1_01_points_below_fails():
    v = judge_accuracies({"float32": 0.95, "int8": 0.95 - 0.0101})["int8"]
    assert v.passed is False
    assert v.gap == pytest.approx(-0.0101)
    assert "beyond" in v.reason and "-1.01 points" in v.reason


def test_unsupported_dtype_is_neither_pass_nor_fail():
    out = judge_accuracies({"float32": 0.95, "bfloat16": None, "int8": 0.95},
                           unmeasured={"bfloat16": "this CPU lacks avx512f"})
    assert out["bfloat16"].passed is None and out["bfloat16"].gap is None
    assert out["bfloat16"].accuracy is None
    assert "neither passed nor failed" in out["bfloat16"].reason and "avx512f" in out["bfloat16"].reason
    assert out["int8"].passed is True


def test_only_reduced_dtypes_are_judged():
    out = judge_accuracies({"float32": 0.9, "bfloat16": 0.9, "int8": 0.88})
    assert set(out) == {"bfloat16", "int8"}
    assert out["bfloat16"].passed is True and out["int8"].passed is False


def test_above_float32_passes_whatever_the_margin():
    v = judge_accuracies({"float32": 0.90, "int8": 0.95})["int8"]
    assert v.passed is True and v.gap == pytest.approx(0.05)


def test_the_gap_comes_from_image_counts():
    # 288 evaluation images: 2 more misclassified (0.69 points) pass, 3 (1.04 points) fail
    ref = 270 / 288
    assert judge_accuracies({"float32": ref, "int8": 268 / 288})["int8"].passed is True
    assert judge_accuracies({"float32": ref, "int8": 267 / 288})["int8"].passed is False


def test_no_reference_or_a_bad_accuracy_is_refused():
    with pytest.raises(ValueError, match="float32"):
        judge_accuracies({"int8": 0.9})
    with pytest.raises(ValueError, match="float32"):
        judge_accuracies({"float32": None, "int8": 0.9})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        judge_accuracies({"float32": 0.9, "int8": 90.0})


def test_a_tolerance_can_be_given():
    assert judge_accuracies({"float32": 0.95, "int8": 0.93}, tolerance=0.02)["int8"].passed is True
    assert judge_accuracies({"float32": 0.95, "int8": 0.93}, tolerance=0.01)["int8"].passed is False
