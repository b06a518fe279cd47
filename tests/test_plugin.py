"""The pytest wiring, end to end in a separate pytest process (pytester)."""

import importlib.util
import json
import xml.etree.ElementTree as ET

import pytest

import fake_nvml as F

USER_TEST = """
import pytest

@pytest.mark.mxperf_grid(models=("lenet",), batch_sizes=(8,))
def test_lenet(mxperf, ctx, model, batch_size):
    cell = mxperf.measure(model, batch_size, contexts=ctx)
    mxperf.expect_ok(cell)
    assert cell.median > 0
"""


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


@pytest.mark.parametrize("args,needle", [
    (["--perf-models", "lenet,resnet9000"], "unknown model 'resnet9000'"),
    (["--perf-batch-sizes", "8,0"], "batch size must be at least 1"),
    (["--perf-batch-sizes", "-2"], "batch size must be at least 1"),
    (["--perf-batch-sizes", "eight"], "is not an integer"),
    (["--perf-processes", "0"], "--perf-processes"),
    (["--perf-time-budget", "soon"], "--perf-time-budget"),
    (["--perf-ctx", "tpu:0"], "--perf-ctx"),
    (["--perf-fail-on", "sunrise"], "--perf-fail-on"),
])
def test_bad_options_are_usage_errors_before_any_measurement(pytester, args, needle):
    pytester.makepyfile(test_user=USER_TEST.replace("mxperf.measure", "1/0; mxperf.measure"))
    result = _run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert needle in result.stderr.str()
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()


def test_measuring_fixture_records_junit_properties_and_benchmark_json(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    result = _run(pytester, "-m", "cpu", "--perf-smoke", "-W", "error", "--junitxml=junit.xml",
                  "-o", "junit_family=xunit1", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=1, deselected=1)
    out = result.stdout.str()
    assert "score lenet b8 cpu:0" in out  # the session report row
    tree = ET.parse(pytester.path / "junit.xml")
    props = {p.get("name"): p.get("value") for p in tree.iter("property")}
    assert float(props["mxperf_median"]) > 0 and props["mxperf_unit"] == "img/s"
    assert props["mxperf_cell"] == "score/lenet/b8/cpu:0/float32/threads=auto"
    bench = json.loads((pytester.path / "bench.json").read_text())
    cells = [b for b in bench["benchmarks"] if b["extra_info"].get("cell")]
    assert len(cells) == 1 and cells[0]["extra_info"]["images_per_s"] > 0
    assert cells[0]["stats"]["median"] > 0  # seconds per batch, measured in the worker
    assert "mxperf" in bench["machine_info"]


def test_gpu_selection_without_gpu_fails_in_one_line_and_the_policy_can_pass_it(pytester, monkeypatch):
    # a machine without GPUs on any machine, a GPU box included: the workers' MXNet (this
    # interpreter's) sees none (CUDA_VISIBLE_DEVICES="") and neither does NVML (a stand-in
    # whose driver is not loaded). -m gpu fails (no-gpu, in the default policy) with one
    # line; the test skips with it
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    F.use_in_subprocesses(monkeypatch, F.write({"init_error": "DRIVER_NOT_LOADED", "devices": []},
                                               pytester.path / "nvml.json"))
    pytester.makepyfile(test_user=USER_TEST)
    result = _run(pytester, "-m", "gpu", "-rs")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out + result.stderr.str()
    result.assert_outcomes(skipped=1, deselected=1)
    said = [ln for ln in out.splitlines() if ln.startswith("mxperf: no GPU can be used")]
    assert len(said) == 1 and "NVML sees no GPU (NVML: Driver Not Loaded) and mx.context.num_gpus() is 0" in said[0]
    assert said[0].endswith("(failing the session; --perf-fail-on=-no-gpu to let it pass)")
    assert "nothing was measured" not in out
    passing = _run(pytester, "-m", "gpu", "--perf-fail-on=-no-gpu")  # "=": argparse reads "-no-gpu" as an option
    assert passing.ret == pytest.ExitCode.OK, passing.stdout.str()
    passing.assert_outcomes(skipped=1, deselected=1)
    assert said[0].split(" (failing")[0] + " (GPU tests skipped; not failing" in passing.stdout.str()


def test_slow_cells_are_deselected_unless_asked_for(pytester):
    pytester.makepyfile(test_user="""
import pytest

@pytest.mark.mxperf_grid(models=("lenet", "mlp"), batch_sizes=(1, 64), slow={"mlp": 64})
def test_grid(model, batch_size):
    pass
""")
    result = _run(pytester)
    result.assert_outcomes(passed=3, deselected=1)
    result = _run(pytester, "--perf-slow")
    result.assert_outcomes(passed=4)
    result = _run(pytester, "--perf-models", "mlp", "--perf-batch-sizes", "64", "--perf-slow")
    result.assert_outcomes(passed=1)
    # a slow cell named by its model and batch size runs without --perf-slow (tests/test_selection.py)
    result = _run(pytester, "--perf-models", "mlp", "--perf-batch-sizes", "64")
    result.assert_outcomes(passed=1)


def test_a_grid_limited_to_gpus_has_no_cpu_cells(pytester):
    pytester.makepyfile(test_user="""
import pytest

@pytest.mark.mxperf_grid(models=("lenet",), batch_sizes=(1,), devices=("gpu",))
def test_gpu_only(ctx, model, batch_size):
    assert ctx[0].startswith("gpu")

@pytest.mark.mxperf_grid(models=("lenet",), batch_sizes=(1,))
def test_any(ctx, model, batch_size):
    pass
""")
    _run(pytester, "-m", "cpu").assert_outcomes(passed=1, deselected=2)  # test_any[cpu] only
    _run(pytester, "-m", "gpu").assert_outcomes(passed=2, deselected=1)
    # only CPU contexts asked for: the GPU-only grid is empty, and "-m cpu" does not select it
    _run(pytester, "-m", "cpu", "--perf-ctx", "cpu:0").assert_outcomes(passed=1, deselected=1)


def test_a_failing_worker_fails_its_test_with_the_reason(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    # An address-space cap far too small for a worker that imports MXNet.
    result = _run(pytester, "-m", "cpu", "--perf-smoke", "--perf-memory-limit", "200M")
    result.assert_outcomes(failed=1, deselected=1)
    out = result.stdout.str()
    assert "score/lenet/b8" in out and ("oom" in out or "crash" in out or "error" in out)


@pytest.mark.skipif(importlib.util.find_spec("xdist") is None, reason="pytest-xdist is not installed")
def test_xdist_is_refused(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    result = _run(pytester, "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "refuses pytest-xdist" in result.stderr.str()


def test_zoo_model_fixture(pytester):
    pytester.makepyfile(test_user="""
def test_spec(zoo_model):
    assert zoo_model.num_classes in (10, 1000)
""")
    result = _run(pytester, "--perf-models", "lenet,alexnet")
    result.assert_outcomes(passed=2)


def test_corrupt_baseline_is_refused_before_measuring_and_left_as_it_was(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    bdir = pytester.path / "bl"
    bdir.mkdir()
    bad = bdir / "box.json"
    bad.write_text('{"schema": 1, "cells": {"x": ')  # truncated
    before = bad.read_bytes()
    result = _run(pytester, "-m", "cpu", "--perf-smoke", "--perf-machine", "box",
                  "--perf-baselines-dir", str(bdir), "--perf-update-baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert str(bad) in err
    assert bad.read_bytes() == before


def test_bad_machine_name_is_a_usage_error(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    result = _run(pytester, "--perf-machine", "../../etc/passwd")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--perf-machine" in result.stderr.str()


def test_no_baseline_is_said_and_recording_one_then_comparing_works(pytester, make_stub_python):
    """The plugin's side of a first session, its recording and a comparison, with the stand-in
    MXNet (tests/stub_worker.py); real MXNet records and re-runs baselines in test_usermodel
    and test_wheel."""
    pytester.makepyfile(test_user=USER_TEST)
    bdir = pytester.path / "bl"
    common = ["-m", "cpu", "--perf-machine", "box", "--perf-baselines-dir", str(bdir), "--perf-time-budget", "0.3",
              "--perf-python", make_stub_python("now")]
    # the calibration probes only where the baseline keeps them (the recording session)
    result = _run(pytester, *common, "--perf-processes", "1", "--perf-fail-on", "no-baseline", "--perf-no-probe")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "no baseline for this machine (box)" in result.stdout.str()
    result = _run(pytester, *common, "--perf-processes", "3", "--perf-update-baselines")
    assert result.ret == 0, result.stdout.str()
    assert (bdir / "box.json").exists()
    assert "recorded 1 cell(s)" in result.stdout.str()
    result = _run(pytester, *common, "--perf-processes", "1", "--perf-report", "rep", "--perf-no-probe")
    out = result.stdout.str()
    assert "no baseline" not in out
    (first,) = [ln for ln in out.splitlines() if ln.startswith(("mxperf: passed: ", "mxperf: FAILED: "))]
    assert " of 1 cell against baseline box (recorded " in first, out  # the session's first line says against what
    full = (pytester.path / "rep" / "report.txt").read_text()  # the full report names the baseline's file
    assert "baseline: " in full and "box.json" in full
    assert (pytester.path / "rep" / "results.json").exists()
    assert list((pytester.path / "rep").glob("*.png"))
    # compared with the 3 recorded processes, fewer than a gated baseline needs: the throughput is
    # shown against them, not judged, whatever this machine measured; the exit code follows the verdicts
    verdicts = json.loads((pytester.path / "rep" / "results.json").read_text())["session"]["verdicts"]
    (key,) = [k for k in verdicts if "#" not in k]
    assert verdicts[key]["kind"] == "not-gated" and verdicts[key]["n_baseline"] == 3, verdicts[key]
    failing = [k for k, v in verdicts.items() if v["kind"] in ("regression", "unresolved")]
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if failing else pytest.ExitCode.OK), out


def test_benchmark_stats_are_seconds_per_batch(pytester):
    pytester.makepyfile(test_user=USER_TEST)
    result = _run(pytester, "-m", "cpu", "--perf-processes", "1", "--perf-time-budget", "0.3", "--perf-no-peak",
                  "--benchmark-json=bench.json")
    result.assert_outcomes(passed=1, deselected=1)
    bench = json.loads((pytester.path / "bench.json").read_text())
    (cell,) = [b for b in bench["benchmarks"] if b["extra_info"].get("cell")]
    # images/s and the median seconds per batch describe the same measurement
    assert cell["stats"]["median"] == pytest.approx(8 / cell["extra_info"]["images_per_s"], rel=1e-6)


def test_a_test_that_parametrises_model_itself_keeps_its_values(pytester):
    pytester.makepyfile(test_user="""
import pytest

@pytest.mark.parametrize("model", ["mine"])
def test_own(model, batch_size):
    assert model == "mine"
""")
    result = _run(pytester, "--perf-batch-sizes", "3")
    result.assert_outcomes(passed=1)


def test_a_test_measuring_two_cells_gives_two_benchmark_entries_apart(pytester, make_stub_python):
    pytester.makepyfile(test_two="""
def test_pair(mxperf):
    mxperf.expect_ok(mxperf.measure("lenet", 8))
    mxperf.expect_ok(mxperf.measure("lenet", 8, mode="latency"))
""")
    result = _run(pytester, "--perf-python", make_stub_python(), "--perf-no-probe", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=1)
    bench = json.loads((pytester.path / "bench.json").read_text())
    names = [b["name"] for b in bench["benchmarks"] if b["extra_info"].get("cell")]
    assert names == ["test_pair", "test_pair::latency/lenet/b8/cpu:0/float32/threads=auto"], names
