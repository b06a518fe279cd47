"""Thresholds per cell (issue 38, part 3): a test's ``mxperf_threshold`` marker, then the first
pattern of pyproject.toml's ``[tool.pytest-mxperf.thresholds]`` that matches a figure's printed
key, then ``--perf-min-effect`` (a tail's own wider minimum); a lower bound; a pattern that
names nothing warns; each verdict says which minimum it used and where it was set; judged
end to end with stand-in installs (tests/stub_worker.py) in A/B mode."""

import json
from pathlib import Path

import pytest

import stand_ins

from pytest_mxperf.judge.thresholds import MIN_THRESHOLD, TAIL_MIN_EFFECT, MinEffects, Threshold, check_threshold
from pytest_mxperf.model.options import OptionError

CELL = "score/resnet50_v2/b8/cpu:0/float32/threads=auto"
LAT = "latency/lenet/b1/cpu:0/float32/threads=auto"
NODE = "perf_tests/test_scoring.py::test_scoring[resnet50_v2-8]"


def test_the_marker_wins_then_the_first_matching_pattern_then_the_session():
    marker = Threshold(0.12, "@pytest.mark.mxperf_threshold on " + NODE, nodeid=NODE)
    p99 = Threshold(0.30, "pyproject.toml [tool.pytest-mxperf.thresholds] 'latency/*#latency_p99_ms'",
                    pattern="latency/*#latency_p99_ms")
    lat = Threshold(0.08, "pyproject.toml [tool.pytest-mxperf.thresholds] 'latency/*'", pattern="latency/*")
    score = Threshold(0.02, "pyproject.toml [tool.pytest-mxperf.thresholds] 'score/*'", pattern="score/*")
    e = MinEffects(0.05, (marker,), (p99, lat, score), {CELL: (NODE,), LAT: ("t::lat",)})
    assert e.of(CELL, "throughput") == 0.12           # the marker, before the pattern score/*
    assert e.said(CELL, "throughput") == f"minimum effect 12% (@pytest.mark.mxperf_threshold on {NODE})"
    assert e.of(LAT + "#latency_p99_ms", "latency_p99_ms") == 0.30   # the first pattern in the file's order
    assert e.of(LAT + "#latency_p50_ms", "latency_p50_ms") == 0.08
    other = "train/alexnet/b8/cpu:0/float32/threads=auto"
    assert e.of(other, "throughput") == 0.05 and e.said(other, "throughput").endswith("(--perf-min-effect)")
    bare = MinEffects(0.05)
    assert bare.of(LAT + "#latency_p99_ms", "latency_p99_ms") == TAIL_MIN_EFFECT
    assert bare.said(LAT + "#latency_p99_ms", "latency_p99_ms") == "minimum effect 20% (a tail's own minimum)"


def test_a_marker_for_one_figure_leaves_the_cells_others_to_the_rest():
    t = Threshold(0.25, "marker", nodeid="t::lat", figure="latency_p99_ms")
    e = MinEffects(0.05, (t,), (), {LAT: ("t::lat",)})
    assert e.of(LAT + "#latency_p99_ms", "latency_p99_ms") == 0.25
    assert e.of(LAT + "#latency_p50_ms", "latency_p50_ms") == 0.05
    assert e.of(LAT, "latency_p50_ms") == 0.05


def test_the_lower_bound_and_bad_values_are_one_line():
    assert check_threshold(0.10, "x") == 0.10
    for bad in (0.02, 0.0, 1.0, -0.1, "10%", True, None):
        with pytest.raises(OptionError, match=r"^x: the minimum effect must be"):
            check_threshold(bad, "x")
    assert MIN_THRESHOLD == 0.03


def test_a_pattern_that_names_nothing_is_found():
    typo = Threshold(0.2, "pyproject.toml [tool.pytest-mxperf.thresholds] 'lantency/*'", pattern="lantency/*")
    ok = Threshold(0.2, "pyproject.toml [tool.pytest-mxperf.thresholds] 'latency/*'", pattern="latency/*")
    assert MinEffects(patterns=(typo, ok)).unmatched({LAT: "latency_p50_ms", CELL: "throughput"}) == (typo,)


# ----------------------------------------------------------------------------- end to end

TESTS = """
import pytest

@pytest.mark.mxperf_grid(models=("lenet",), batch_sizes=(8,))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))

@pytest.mark.mxperf_threshold(0.20)
@pytest.mark.mxperf_grid(models=("alexnet",), batch_sizes=(8,))
def test_loose(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""


def _ab(pytester, make_stub_python, pyproject=None, *args):
    """An A/B session of lenet b8 and alexnet b8, the candidate 12% slower on both."""
    pytester.makepyfile(test_cells=TESTS)
    if pyproject is not None:
        (pytester.path / "pyproject.toml").write_text(pyproject)
    cand = make_stub_python("cand", rate=88.0)
    ref = make_stub_python("ref", rate=100.0)
    return stand_ins.session(pytester, "-p", "no:cacheprovider", "-m", "cpu", "--perf-machine", "box",
                                         "--perf-no-probe", "--perf-python", cand, "--perf-reference", ref,
                                         "--perf-report", "rep", *args)


def _verdicts(pytester):
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    return {k.split("/")[1]: v for k, v in doc["session"]["verdicts"].items() if "#" not in k}  # primary figures


def test_a_marked_test_and_a_pattern_change_the_verdict_and_say_where_from(pytester, make_stub_python):
    """-12% on both cells: a regression at the session's 5%; the marked test (20%) and a
    pattern of 15% make it unchanged, each verdict naming its minimum and where it was set;
    a pattern that names nothing warns."""
    r = _ab(pytester, make_stub_python)
    assert r.ret == pytest.ExitCode.TESTS_FAILED, r.stdout.str()
    v = _verdicts(pytester)
    assert v["lenet"]["kind"] == "regression", v["lenet"]
    assert "minimum effect 5% (--perf-min-effect)" in v["lenet"]["notes"]
    assert v["alexnet"]["kind"] != "regression", v["alexnet"]
    assert any(n.startswith("minimum effect 20% (@pytest.mark.mxperf_threshold on ")
               and "test_cells.py::test_loose[" in n for n in v["alexnet"]["notes"]), v["alexnet"]["notes"]

    r = _ab(pytester, make_stub_python, '[tool.pytest-mxperf.thresholds]\n"score/lenet/*" = 0.15\n"scroe/*" = 0.3\n')
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.OK, out
    v = _verdicts(pytester)
    assert v["lenet"]["kind"] != "regression" and \
        "minimum effect 15% (pyproject.toml [tool.pytest-mxperf.thresholds] 'score/lenet/*')" in v["lenet"]["notes"]
    assert ("mxperf: warning: the threshold pyproject.toml [tool.pytest-mxperf.thresholds] 'scroe/*' named no figure "
            "of this session") in out


def test_a_threshold_below_the_bound_is_refused_before_anything_runs(pytester, make_stub_python):
    r = _ab(pytester, make_stub_python, '[tool.pytest-mxperf.thresholds]\n"score/*" = 0.001\n')
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "pyproject.toml [tool.pytest-mxperf.thresholds] 'score/*': the minimum effect must be in [0.03, 1)" in \
        r.stderr.str()
    assert not (pytester.path / "rep").exists()


def test_the_gate_can_read_the_thresholds_of_another_file(pytester, make_stub_python, tmp_path):
    """The upgrade gate passes the base branch's pyproject.toml (--perf-thresholds): a pull
    request that loosens its own table does not loosen its gate."""
    base = tmp_path / "base-pyproject.toml"
    base.write_text('[tool.pytest-mxperf.thresholds]\n"score/lenet/*" = 0.05\n')
    r = _ab(pytester, make_stub_python, '[tool.pytest-mxperf.thresholds]\n"score/lenet/*" = 0.5\n',
            "--perf-thresholds", str(base))
    assert r.ret == pytest.ExitCode.TESTS_FAILED, r.stdout.str()
    assert _verdicts(pytester)["lenet"]["kind"] == "regression"
