"""A real A/B session between two real MXNet installs, neither of them this interpreter (both
built once into the reference-venv cache by ``installs.reference_python``; the first run
downloads the wheels): MXNet 1.6.0 (plain wheel: no MKLDNN) as the candidate against a venv
of 1.9.1 as the reference, on LeNet batch 1.

What holds on any machine is asserted: both installs are found or built and run the cell in
duet pairs, the report and results.json name both versions and the MKLDNN difference, the
verdict agrees with its own interval, and the exit code follows the verdicts. Which verdict
comes is this machine's to say: how often an A/A session of two installs of 1.9.1 is flagged
and whether 1.6.0 is caught as a regression are timing claims, measured by
``benchmarks/ab_sessions.py`` (``--kind aa``, ``--kind release:mxnet==1.6.0``: 1.6.0 ran at
x0.287 [0.273, 0.302] of 1.9.1 on AlexNet b1 here, a regression) and on recorded A/A pairs by
tests/test_error_rates.py.
"""

import json
import os
import sys

import pytest

from pytest_mxperf.judge import thresholds
from pytest_mxperf.proc import installs
from pytest_mxperf.proc import distributions

CELL = """
import pytest

@pytest.mark.cpu
def test_{model}_b{batch}(mxperf):
    mxperf.expect_ok(mxperf.measure("{model}", {batch}))
"""


def _venv(spec):
    try:
        return installs.reference_python(spec)
    except distributions.InstallError as exc:  # no network for the first build: say so, do not pass
        pytest.skip(f"cannot build the venv for {spec}: {exc}")


# Module-scoped, so the venvs are built (or found) in the real cache before pytester
# points HOME at a temporary directory.
@pytest.fixture(scope="module")
def mxnet_191():
    return _venv("mxnet==1.9.1")


@pytest.fixture(scope="module")
def mxnet_160():
    return _venv("mxnet==1.6.0")


def _ab(pytester, candidate, reference, model, batch, budget, *more):
    pytester.makepyfile(test_ab=CELL.format(model=model, batch=batch))
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--perf-python", candidate,
                                         "--perf-reference", reference, "--perf-report", "rep",
                                         "--perf-baselines-dir", str(pytester.path / "bl"),
                                         "--perf-time-budget", budget, *more)


def _record(pytester, model, batch):
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    (rec,) = [r for r in doc["records"] if r["key"].startswith(f"score/{model}/b{batch}/")]
    return doc, rec


def test_an_ab_session_of_two_real_installs_names_both_and_its_exit_code_follows_its_verdicts(
        mxnet_160, mxnet_191, pytester):
    for other in (mxnet_160, mxnet_191):
        assert not other.startswith(sys.prefix + os.sep)  # other installs, not this venv
    # a minimum effect of 50%: LeNet b1 of 1.6.0 lies near 1.9.1's (x1.08 once, which was
    # unclear at 5% and asked for a second stage of 37 more pairs: 145 s); the statistics of
    # a 5% effect are tests/test_error_rates.py's and benchmarks/ab_sessions.py's
    # (--perf-no-peak: the peak GFLOP/s worker is test_plugin's and test_peak's, not this test's)
    r = _ab(pytester, mxnet_160, mxnet_191, "lenet", 1, "0.3", "--perf-no-probe", "--perf-no-peak",
            "--perf-min-effect", "0.5")
    out = r.stdout.str()
    assert r.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), out
    full = (pytester.path / "rep" / "report.txt").read_text()
    assert "candidate: mxnet 1.6.0" in full and "reference: mxnet 1.9.1" in full, full
    assert "(A/B; candidate mxnet 1.6.0)" in out, out
    doc, rec = _record(pytester, "lenet", 1)
    ab = rec["ab"]
    assert ab["candidate"]["mxnet_version"] == "1.6.0" and ab["reference"]["mxnet_version"] == "1.9.1"
    assert "MKLDNN" in ab["reference"]["features"] and "MKLDNN" not in ab["candidate"]["features"]
    # every process of both installs measured, in duet pairs
    assert len(rec["runs"]) == len(rec["reference_runs"]) == ab["pairs"] >= 1
    assert all(x["status"] == "ok" and x["meta"]["duet"]["side"] == "candidate" for x in rec["runs"])
    assert all(x["status"] == "ok" and x["meta"]["duet"]["side"] == "reference" for x in rec["reference_runs"])
    # the verdict is the one its interval says, and the exit code follows the verdicts
    assert ab["low"] <= ab["ratio"] <= ab["high"], ab
    if ab["verdict"] == "regression":
        assert ab["high"] < 1.0 and "REGRESSION score/lenet/b1" in out, ab
    if ab["verdict"] == "improvement":
        assert ab["low"] > 1.0, ab
    kinds = {k: v["kind"] for k, v in doc["session"]["verdicts"].items()}
    failing = sorted(k for k, kind in kinds.items() if kind in thresholds.FAILING)
    assert kinds and r.ret == (pytest.ExitCode.TESTS_FAILED if failing else pytest.ExitCode.OK), (kinds, out)
    print(f"\nA/B 1.6.0 vs 1.9.1 LeNet b1: ratio {ab['ratio']:.3f} [{ab['low']:.3f}, {ab['high']:.3f}] "
          f"over {ab['pairs']} pairs -> {ab['verdict']}")
