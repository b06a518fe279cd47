"""A real A/B gate on small cells, with real MXNet installs (built once into the
reference-venv cache by ``installs.reference_python``; the first run downloads the wheels).

* two installs of the same MXNet (this interpreter's 1.9.1 and a cached venv with 1.9.1)
  are not flagged;
* MXNet 1.6.0 (plain wheel: no MKLDNN) as the candidate against 1.9.1 as the reference is a
  regression on ResNet-50 v2 batch 1, and the report names both versions and the MKLDNN
  difference. (It was LeNet b1 until a CI run on a noisy VM left LeNet's x0.86 unresolved:
  p=0.0625 over 12 clean pairs. The gate failed the session, as it should, but a test needs
  an effect that no VM's noise can hide: without MKLDNN, ResNet-50's convolutions ran about
  3-4x slower here, x3.87 [3.24, 4.67] for 1.9.1 over 1.6.0 at b1.)

These run the real workers on this machine; the verdicts come from the gate's statistics,
not from thresholds in this file.
"""

import json
import os
import sys

import pytest

from pytest_mxperf.proc import installs
from pytest_mxperf.proc import distributions

CELL = """
import pytest

@pytest.mark.cpu
def test_{model}_b1(mxperf):
    mxperf.expect_ok(mxperf.measure("{model}", 1))
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


def _ab(pytester, candidate, reference, model="lenet"):
    pytester.makepyfile(test_ab=CELL.format(model=model))
    # a 0.5-s timed part per process (the default is 1.5 s): the verdict's statistics are over
    # processes, and these tests' effects need no long rounds; it keeps CI shorter
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--perf-python", candidate,
                                         "--perf-reference", reference, "--perf-report", "rep",
                                         "--perf-baselines-dir", str(pytester.path / "bl"),
                                         "--perf-time-budget", "0.5")


def _record(pytester, model="lenet"):
    doc = json.loads((pytester.path / "rep" / "results.json").read_text())
    (rec,) = [r for r in doc["records"] if r["key"].startswith(f"score/{model}/b1")]
    return doc, rec


def test_two_installs_of_the_same_mxnet_are_not_flagged(mxnet_191, pytester):
    other = mxnet_191
    assert not other.startswith(sys.prefix + os.sep)  # another install, not this venv
    r = _ab(pytester, sys.executable, other)
    out = r.stdout.str()
    # throughput: not flagged either way. (Peak memory is judged too and can differ between
    # two venvs of the same MXNet: measured here 214 vs 161 MiB, this venv loading more
    # libraries; that is a real difference of the installs, reported, not asserted on.)
    primary = "score/lenet/b1/cpu:0/float32/threads=auto:"
    assert f"REGRESSION {primary}" not in out and f"IMPROVEMENT {primary}" not in out, out
    doc, rec = _record(pytester)
    assert rec["ab"]["verdict"] in ("unchanged", "unresolved"), rec["ab"]
    assert rec["ab"]["reference"]["mxnet_version"] == rec["ab"]["candidate"]["mxnet_version"] == "1.9.1"
    print(f"\nA/A 1.9.1 vs 1.9.1 LeNet b1: {json.dumps(rec['ab'], default=str)[:300]}")


def test_mxnet_1_6_against_1_9_1_is_a_regression_on_resnet50(mxnet_160, pytester):
    old = mxnet_160
    r = _ab(pytester, old, sys.executable, "resnet50_v2")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "REGRESSION score/resnet50_v2/b1" in out, out
    assert "candidate: mxnet 1.6.0" in out and "reference: mxnet 1.9.1" in out
    doc, rec = _record(pytester, "resnet50_v2")
    ab = rec["ab"]
    assert ab["verdict"] == "regression" and ab["high"] < 1.0
    assert "MKLDNN" in ab["reference"]["features"] and "MKLDNN" not in ab["candidate"]["features"]
    print(f"\nA/B 1.6.0 vs 1.9.1 ResNet-50 v2 b1: ratio {ab['ratio']:.3f} [{ab['low']:.3f}, {ab['high']:.3f}] "
          f"over {ab['pairs']} pairs -> {ab['verdict']}")
