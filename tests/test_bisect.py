"""bisect.py: the A/B gate over adjacent releases, with a fake step runner and fake
reference installs (no MXNet, no pytest session, no download)."""

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_mxperf.cli import find_release as bisect
from pytest_mxperf.proc import distributions

KEY = "score/resnet50_v2/b8/cpu:0/float32/threads=auto"
KEY2 = "score/lenet/b1/cpu:0/float32/threads=auto"
VERSIONS = {"1.5.1": "1.5.1", "1.6.0": "1.6.0", "1.7.0.post2": "1.7.0", "1.8.0.post0": "1.8.0", "1.9.1": "1.9.1"}
# what each reference install's build reports; MKLDNN comes with mxnet-mkl or from 1.7 on
_OLD = ["BLAS_OPEN", "MKLDNN", "OPENMP"]
FEATURES = {"1.5.1": _OLD, "1.6.0": _OLD, "1.7.0.post2": _OLD + ["SSE"], "1.8.0.post0": _OLD + ["SSE"],
            "1.9.1": _OLD + ["SSE"]}


class FakeInstalls:
    def __init__(self, fail=()):
        self.asked = []
        self.fail = set(fail)

    def __call__(self, requirement):
        self.asked.append(requirement)
        if requirement in self.fail:
            raise distributions.InstallError(f"pip install {requirement} numpy<1.24 failed: ERROR: No matching "
                                        f"distribution found for {requirement}")
        return f"/venvs/{requirement}/bin/python"


def _release_of(python):
    req = python.split("/")[2]
    return req.split("==")[1]


def _side(release):
    return {"mxnet_version": VERSIONS[release], "features": FEATURES[release], "python": "3.11.7"}


class FakeRunner:
    """A step runner that writes a results.json as the gate would: ratio 1.0 everywhere,
    except ``drop`` (older release -> (ratio, low, high, verdict)) for KEY."""

    def __init__(self, drop=None, rc=0, write=True):
        self.steps = []
        self.drop = drop or {}
        self.rc = rc
        self.write = write

    def __call__(self, step):
        self.steps.append(step)
        old, new = _release_of(step.older.python), _release_of(step.newer.python)
        ratio, low, high, verdict = self.drop.get(old, (1.01, 0.97, 1.04, "unchanged"))
        records = [
            {"key": KEY, "ab": {"ratio": ratio, "low": low, "high": high, "verdict": verdict, "pairs": 8,
                                "reference": _side(old), "candidate": _side(new)}},
            {"key": KEY2, "ab": {"ratio": 0.99, "low": 0.95, "high": 1.02, "verdict": "unchanged", "pairs": 8,
                                 "reference": _side(old), "candidate": _side(new)}},
            {"key": "score/vgg11/b32/cpu:0/float32/threads=auto", "status": "crash"},
        ]
        if self.write:
            (step.report_dir / "results.json").write_text(json.dumps({"records": records}))
        return self.rc


def run(argv, runner, inst=None):
    out, err = io.StringIO(), io.StringIO()
    rc = bisect.main(argv, run_step=runner, reference_python=inst or FakeInstalls(), out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


ARGS = ["--", "perf_tests/test_scoring.py", "-m", "cpu", "--perf-models", "resnet50_v2", "--perf-batch-sizes", "8"]


def test_finds_the_step_where_the_ratio_drops_and_names_the_feature_change():
    runner = FakeRunner(drop={"1.6.0": (0.87, 0.84, 0.90, "regression")})
    inst = FakeInstalls()
    rc, out, err = run(["--range", "1.5.1..1.9.1", *ARGS], runner, inst)
    assert rc == 0, err
    assert err == ""
    assert [(_release_of(s.older.python), _release_of(s.newer.python)) for s in runner.steps] == [
        ("1.5.1", "1.6.0"), ("1.6.0", "1.7.0.post2"), ("1.7.0.post2", "1.8.0.post0"), ("1.8.0.post0", "1.9.1")]
    # like with like: the releases before 1.7 come as mxnet-mkl, as 1.9.1 has MKLDNN
    assert inst.asked == ["mxnet-mkl==1.5.1", "mxnet-mkl==1.6.0", "mxnet==1.7.0.post2", "mxnet==1.8.0.post0",
                          "mxnet==1.9.1"]
    # each step prints every A/B cell with its ratio, interval and verdict
    assert "== step 2/4: 1.6.0 (mxnet-mkl==1.6.0) -> 1.7.0.post2 (mxnet==1.7.0.post2)" in out
    assert f"{KEY}  ratio 0.870 [0.840, 0.900]  regression, 8 pairs" in out
    assert len(re.findall(re.escape(KEY2) + r" +ratio 0\.990 \[0\.950, 1\.020\]  unchanged", out)) == 4
    summary = out.split("== where cells changed between 1.5.1 and 1.9.1:", 1)[1]
    assert "1.6.0 -> 1.7.0.post2: mxnet 1.6.0 -> 1.7.0; build features: +SSE" in summary
    assert f"{KEY}  ratio 0.870 [0.840, 0.900]  regression" in summary
    assert "1.5.1 -> 1.6.0" not in summary and "1.8.0.post0 -> 1.9.1" not in summary
    assert KEY2 not in summary
    # a record without an A/B result is shown, never judged
    assert re.search(r"score/vgg11/b32/cpu:0/float32/threads=auto +no A/B result \(crash\)", out)
    assert "vgg11" not in summary


def test_the_steps_run_the_gate_with_both_pythons_and_a_report_dir(tmp_path):
    runner = FakeRunner()
    rc, out, _ = run(["--range", "1.8.0.post0..1.9.1", "--report-dir", str(tmp_path), *ARGS], runner)
    assert rc == 0
    (step,) = runner.steps
    cmd = step.command()
    assert cmd[:3] == [sys.executable, "-m", "pytest"]
    assert cmd[3:3 + len(ARGS) - 1] == ARGS[1:]
    rest = cmd[3 + len(ARGS) - 1:]
    assert rest == ["--perf-python", "/venvs/mxnet==1.9.1/bin/python",
                    "--perf-reference", "/venvs/mxnet==1.8.0.post0/bin/python",
                    "--perf-report", str(tmp_path / "1.8.0.post0..1.9.1"), "-p", "no:cacheprovider"]
    assert (tmp_path / "1.8.0.post0..1.9.1" / "results.json").exists()  # kept
    assert "== no cell changed between 1.8.0.post0 and 1.9.1 (1 step(s) measured)" in out


def test_pytest_arguments_without_a_double_dash_are_passed_on():
    runner = FakeRunner()
    rc, _, err = run(["--range", "1.8.0.post0..1.9.1", "perf_tests", "-m", "cpu", "--perf-models", "lenet"], runner)
    assert rc == 0, err
    assert runner.steps[0].pytest_args == ["perf_tests", "-m", "cpu", "--perf-models", "lenet"]


def test_an_improvement_and_an_unresolved_cell_are_reported():
    runner = FakeRunner(drop={"1.7.0.post2": (1.25, 1.2, 1.3, "improvement"),
                              "1.8.0.post0": (0.97, 0.9, 1.01, "unresolved")})
    rc, out, _ = run(["--range", "1.7.0.post2..1.9.1", *ARGS], runner)
    assert rc == 0
    summary = out.split("== where cells changed", 1)[1]
    assert "1.7.0.post2 -> 1.8.0.post0: mxnet 1.7.0 -> 1.8.0; build features: same" in summary
    assert "improvement" in summary
    assert f"unresolved at 1.8.0.post0 -> 1.9.1: {KEY}" in summary


def test_a_step_that_cannot_run_exits_1_with_one_line():
    runner = FakeRunner(rc=4)
    rc, out, err = run(["--range", "1.6.0..1.9.1", *ARGS], runner)
    assert rc == 1
    assert err.splitlines() == [
        "pytest_mxperf.cli.find_release: step 1.6.0 -> 1.7.0.post2 could not run: pytest exited with code 4 (usage error)"]
    assert len(runner.steps) == 1  # it stops there


def test_a_step_without_results_exits_1_with_one_line(tmp_path):
    stale = tmp_path / "1.8.0.post0..1.9.1" / "results.json"  # an earlier search's, never read
    stale.parent.mkdir()
    stale.write_text(json.dumps({"records": [{"key": KEY, "ab": {"ratio": 1.0, "verdict": "unchanged"}}]}))
    rc, _, err = run(["--range", "1.8.0.post0..1.9.1", "--report-dir", str(tmp_path), *ARGS], FakeRunner(write=False))
    assert rc == 1
    (line,) = err.splitlines()
    assert line.startswith("pytest_mxperf.cli.find_release: step 1.8.0.post0 -> 1.9.1 could not run: no ")
    assert line.endswith("results.json (did the session start measuring?)")


def test_a_step_without_any_ab_cell_exits_1(tmp_path):
    def runner(step):
        (step.report_dir / "results.json").write_text(json.dumps({"records": [{"key": KEY, "status": "crash"}]}))
        return 1
    rc, _, err = run(["--range", "1.8.0.post0..1.9.1", *ARGS], runner)
    assert rc == 1
    (line,) = err.splitlines()
    assert line.endswith("has no A/B cell (do the pytest arguments select a measured test?)")


def test_a_regression_failing_the_gate_is_a_finding_not_a_failure():
    runner = FakeRunner(drop={"1.8.0.post0": (0.8, 0.75, 0.85, "regression")}, rc=1)
    rc, out, err = run(["--range", "1.8.0.post0..1.9.1", *ARGS], runner)
    assert rc == 0, err
    assert "1.8.0.post0 -> 1.9.1: mxnet 1.8.0 -> 1.9.1" in out


def test_a_failing_mkl_wheel_falls_back_to_the_plain_one_with_a_warning():
    inst = FakeInstalls(fail={"mxnet-mkl==1.6.0"})
    rc, out, err = run(["--range", "1.6.0..1.7.0.post2", *ARGS], FakeRunner(), inst)
    assert rc == 0, err
    assert inst.asked == ["mxnet-mkl==1.6.0", "mxnet==1.6.0", "mxnet==1.7.0.post2"]
    (warning,) = [ln for ln in out.splitlines() if ln.startswith("warning:")]
    assert warning.startswith("warning: using mxnet==1.6.0 (mxnet-mkl==1.6.0 did not install: ")
    assert "crosses the MKLDNN packaging change" in warning


def test_an_install_that_fails_exits_1_with_one_line():
    inst = FakeInstalls(fail={"mxnet==1.8.0.post0"})
    rc, _, err = run(["--range", "1.8.0.post0..1.9.1", *ARGS], FakeRunner(), inst)
    assert rc == 1
    assert err.splitlines() == ["pytest_mxperf.cli.find_release: pip install mxnet==1.8.0.post0 numpy<1.24 failed: "
                                "ERROR: No matching distribution found for mxnet==1.8.0.post0"]


@pytest.mark.parametrize("argv, says", [
    (["--range", "1.9.1..1.6.0"], "must be older"),
    (["--range", "1.6.0"], "expected OLD..NEW"),
    (["--range", "1.6.0..2.0.0"], "2.0.0 is not one of the releases"),
    (["--range", "1.6.0..1.6.0"], "must be older"),
    ([], "the following arguments are required: --range"),
    (["--range", "1.6.0..1.9.1", "--", "perf_tests", "--perf-reference", "/x/python"], "--perf-reference is set"),
    (["--range", "1.6.0..1.9.1", "perf_tests", "--perf-report=dir"], "--perf-report is set"),
])
def test_usage_errors_exit_2(argv, says):
    runner = FakeRunner()
    rc, _, err = run(argv, runner)
    assert rc == 2
    (line,) = err.splitlines()
    assert line.startswith("pytest_mxperf.cli.find_release: usage error: ") and says in line
    assert runner.steps == []


def test_the_module_runs_as_a_script():
    proc = subprocess.run([sys.executable, "-m", "pytest_mxperf.cli.find_release", "--range", "0.1..0.2"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                          cwd=str(Path(__file__).resolve().parent.parent))
    assert proc.returncode == 2
    assert "0.1 is not one of the releases" in proc.stderr


def test_features_diff():
    assert bisect.features_diff(["A", "B"], ["B", "C"]) == ["+C", "-A"]
    assert bisect.features_diff(None, ["X"]) == ["+X"]
    assert bisect.features_diff(["X"], ["X"]) == []
