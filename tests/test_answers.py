"""The gate checks answers beside speed (workers/answers.py, judge/answers.py,
outcome/answer_check.py).

The rules are tested on sketches of numpy arrays; the gate end to end on real MXNet with a
wrong candidate built here: an interpreter whose ``sitecustomize.py`` makes MXNet's ReLU a
leaky one (slope 0.01) in every graph it builds, and a candidate that only changes kernels
(oneDNN's fusion off, ``MXNET_SUBGRAPH_BACKEND=NONE``). Nothing here depends on speed."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

import stand_ins

from pytest_mxperf.judge import answers as rule
from pytest_mxperf.workers import answers

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import wrong_candidate  # noqa: E402
from stand_ins import cached_setup  # noqa: E402

# ----------------------------------------------------------------------------- the numbers


def test_a_parameter_depends_on_its_name_shape_and_seed_only():
    a = answers.param_value("conv1_weight", (4, 3, 3, 3), 0)
    assert a.dtype == np.float32 and a.shape == (4, 3, 3, 3)
    assert np.array_equal(a, answers.param_value("conv1_weight", (4, 3, 3, 3), 0))
    assert not np.array_equal(a, answers.param_value("conv2_weight", (4, 3, 3, 3), 0))
    assert not np.array_equal(a, answers.param_value("conv1_weight", (4, 3, 3, 3), 1))
    # Xavier(magnitude=2)'s bound: sqrt(2 / ((27 + 36) / 2))
    bound = math.sqrt(2.0 / ((3 * 9 + 4 * 9) / 2))
    assert np.abs(a).max() <= bound and np.abs(a).max() > 0.8 * bound
    assert not answers.param_value("fc_bias", (5,), 0).any()
    assert (answers.param_value("bn_moving_var", (5,), 0) == 1).all()
    assert (answers.param_value("bn_running_var", (5,), 0) == 1).all()
    assert (answers.param_value("bn_gamma", (5,), 0) == 1).all()


def test_the_numbers_are_numpys_legacy_stream():
    """RandomState's stream is frozen by numpy's policy: the same values in this interpreter's
    numpy as in a generator made by hand from the documented seed rule."""
    import zlib
    got = answers.param_value("fc1_weight", (3, 2), 7)
    rng = np.random.RandomState((zlib.crc32(b"fc1_weight") + 1000003 * 7) % 2 ** 32)
    bound = math.sqrt(2.0 / 2.5)
    assert np.array_equal(got, rng.uniform(-bound, bound, size=(3, 2)).astype(np.float32))
    x = answers.input_batch((2, 3), 5)
    assert np.array_equal(x, np.random.RandomState(5).uniform(-1, 1, size=(2, 3)).astype(np.float32))


# ----------------------------------------------------------------------------- sketches


def _rec(outputs, ops=None, seed=0, kind="outputs", **extra):
    r = answers.fingerprint(outputs, seed=seed, kind=kind)
    if ops is not None:
        r["ops"] = [[name, answers.sketch(v, answers.OP_SKETCH)] for name, v in ops]
    r.update(extra)
    return json.loads(json.dumps(r))  # as results.json and the baseline keep it


def test_a_sketch_distance_estimates_the_relative_difference():
    rng = np.random.RandomState(0)
    b = rng.standard_normal(5000)
    for eps in (1e-6, 1e-3, 1e-1):
        a = b + eps * np.linalg.norm(b) / math.sqrt(b.size) * rng.standard_normal(b.size)
        d = rule.distance(answers.sketch(a), answers.sketch(b))
        assert eps / 3 < d < eps * 3, (eps, d)
    assert rule.distance(answers.sketch(b), answers.sketch(b)) == 0.0
    assert rule.distance(answers.sketch(b), answers.sketch(b[:100])) is None  # other shape
    nan = b.copy()
    nan[3] = np.nan
    assert rule.distance(answers.sketch(nan), answers.sketch(b)) == math.inf


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def test_probabilities_are_compared_as_their_logits():
    """A softmax of small logits is nearly uniform: a 2% change of the logits moves the
    probabilities by 2e-5 of themselves, and the centred log-probabilities by 2e-2."""
    z = 1e-3 * np.random.RandomState(1).standard_normal((4, 1000))
    p, q = _softmax(z), _softmax(1.02 * z)
    assert np.linalg.norm(q - p) / np.linalg.norm(p) < 1e-4
    s = answers.output_sketch(p)
    assert s["of"] == "centred-log"
    d = rule.distance(answers.output_sketch(q), s)
    assert 0.005 < d < 0.08, d
    assert d > rule.output_tolerance(s, rule.TOLERANCES["float32"])


def test_a_rounding_passes_and_a_changed_operator_fails_naming_it():
    rng = np.random.RandomState(2)
    x = rng.standard_normal(2000).astype(np.float32)
    relu, leaky = np.maximum(x, 0), np.where(x > 0, x, 0.01 * x)
    fc = rng.standard_normal((10, 2000)).astype(np.float32)
    ref = _rec([_softmax((fc @ relu)[None])], ops=[("conv_output", x), ("relu_output", relu), ("fc_output", fc @ relu)])
    rounded = x * np.float32(1 + 2 ** -23)
    same = _rec([_softmax((fc @ np.maximum(rounded, 0))[None])],
                ops=[("conv_output", rounded), ("relu_output", np.maximum(rounded, 0)),
                     ("fc_output", fc @ np.maximum(rounded, 0))])
    wrong = _rec([_softmax((fc @ leaky)[None])], ops=[("conv_output", x), ("relu_output", leaky), ("fc_output", fc @ leaky)])
    ok = rule.compare([same], [ref])
    assert ok.kind == rule.SAME, ok.reason
    bad = rule.compare([wrong], [ref])
    assert bad.kind == rule.DIFFERENT and bad.first_op[0] == "relu_output", bad.reason
    assert "first operator whose output differs: relu_output" in bad.reason
    # int8: operators are not compared, the outputs are, with int8's tolerance
    assert rule.compare([wrong], [ref], "int8").first_op is None


def test_records_pair_by_seed_and_say_what_they_could_not_compare():
    a0, a1 = _rec([np.ones((2, 3))], seed=0), _rec([np.ones((2, 3))], seed=1)
    assert rule.compare([a1], [a0]).kind == rule.NOT_COMPARED
    assert rule.compare([], [a0]).kind == rule.NOT_COMPARED
    assert rule.compare([a0], []).kind == rule.NOT_COMPARED
    assert rule.compare([a0, a1], [a0]).kind == rule.SAME


def test_a_training_step_with_dropout_is_compared_only_within_one_release():
    w = np.arange(100.0)
    ref = _rec([np.ones((2, 3))], kind="train", weights=answers.sketch(w), loss=[2.3], random_ops=["Dropout"])
    cur = _rec([np.ones((2, 3))], kind="train", weights=answers.sketch(w * 1.1), loss=[2.3], random_ops=["Dropout"])
    assert rule.compare([cur], [ref], same_release=True).kind == rule.DIFFERENT
    other = rule.compare([cur], [ref], same_release=False)
    assert other.kind == rule.NOT_COMPARED and "Dropout" in other.reason


# ----------------------------------------------------------------------------- the gate, real MXNet

CELL = """
import pytest

@pytest.mark.mxperf_grid(models=("mlp",), batch_sizes=(4,))
def test_cells(mxperf, ctx, model, batch_size):
    mxperf.expect_ok(mxperf.measure(model, batch_size, contexts=ctx))
"""

@pytest.fixture
def wrong_python(tmp_path):
    """A candidate that computes something else: every ReLU MXNet builds is a leaky one."""
    return wrong_candidate.wrong(tmp_path, sys.executable)


def _session(pytester, *args):
    pytester.makepyfile(test_cells=CELL)
    return stand_ins.session(pytester, 
        "-p", "no:cacheprovider", "-m", "cpu", "--perf-ctx", "cpu", "--perf-no-probe", "--perf-no-peak",
        "--perf-time-budget", "0.3",
        "--perf-baselines-dir", str(pytester.path / "bl"), "--perf-machine", "box", *args)


def _answers(pytester, rep):
    doc = json.loads((Path(pytester.path) / rep / "results.json").read_text())
    (rec,) = [r for r in doc["records"] if r["key"].startswith("score/mlp/b4")]
    return rec


def test_baseline_mode_fails_a_candidate_that_computes_something_else_and_names_the_operator(
        pytester, wrong_python, monkeypatch):
    r = _session(pytester, "--perf-update-baselines", "--perf-processes", "2", "--perf-report", "rec")
    assert r.ret == 0, r.stdout.str()
    # the recorded setup (this interpreter's MXNet) as a first build leaves it: found, not built
    monkeypatch.setenv("MXPERF_CACHE_DIR", str(pytester.path / "cache"))
    for like in (None, wrong_python):
        cached_setup(pytester.path / "cache", sys.executable, like)
    kept = json.loads((Path(pytester.path) / "bl" / "box.json").read_text())
    (key,) = [k for k in kept["cells"] if k.startswith("score/mlp/b4")]
    recorded = kept["cells"][key]["history"][-1]["answers"]
    assert sorted(a["seed"] for a in recorded) == [0, 1] and any(a.get("ops") for a in recorded)

    # one process (seed 0) a side from here: the record of seed 0 is compared with the baseline's;
    # --perf-smoke: what it computed is judged, its speed not settled (paired from the start against
    # a one-session baseline, a cell of 0.3 s rounds took its 40 pairs: 224 s of the test run)
    wrong = _session(pytester, "--perf-python", wrong_python, "--perf-report", "wrong", "--perf-processes", "1",
                     "--perf-smoke")
    out = wrong.stdout.str()
    assert wrong.ret == pytest.ExitCode.TESTS_FAILED, out
    assert f"WRONG-ANSWERS {key}#answers" in out and "first operator whose output differs: " in out, out
    first_op = out.split("first operator whose output differs: ")[1].split(" ")[0]
    assert "relu" in first_op, first_op  # the first ReLU, not an operator before it
    assert "computed something else" in out.splitlines()[[i for i, ln in enumerate(out.splitlines())
                                                          if "mxperf: FAILED" in ln][0]]

    # only kernels change: oneDNN's fusion off
    monkeypatch.setenv("MXNET_SUBGRAPH_BACKEND", "NONE")
    # --perf-smoke: the cell is measured and its answers compared, its speed not settled (the
    # setup changed, so every cell would go to a duet against the recorded one: 4 pairs alone,
    # 150 s of the test beside another session in the test run)
    kernels = _session(pytester, "--perf-report", "kernels", "--perf-processes", "1", "--perf-smoke")
    out = kernels.stdout.str()
    assert "WRONG-ANSWERS" not in out and "answers: the same in 1 cell(s)" in out, out
    verdict = json.loads((Path(pytester.path) / "kernels" / "results.json").read_text())
    assert verdict["records"]


def test_ab_mode_fails_a_candidate_that_computes_something_else(pytester, wrong_python):
    r = _session(pytester, "--perf-python", wrong_python, "--perf-reference", sys.executable, "--perf-smoke",
                 "--perf-report", "ab", "--perf-fail-on=-regression,-unresolved")
    out = r.stdout.str()
    assert r.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "WRONG-ANSWERS score/mlp/b4" in out and "failing the session: 1 cell(s) computed something else" in out, out
    assert "first operator whose output differs: " in out, out


def test_the_policy_fails_on_wrong_answers_unless_told_not_to():
    from pytest_mxperf.judge.verdict_record import Verdict
    from pytest_mxperf.measure.session import SessionContext
    from pytest_mxperf.model import options as opts
    from pytest_mxperf.model.outcome import SessionOutcome
    from pytest_mxperf.outcome import policy
    from pytest_mxperf.output import messages

    verdicts = {"score/x#answers": Verdict(kind="wrong-answers", reason="answers differ: the outputs off by 1e-2")}
    for fail_on, fails in (("", True), ("-answers", False)):
        ctx = SessionContext(opts.PerfOptions(fail_on=opts.parse_fail_on(fail_on)), {}, machine={"id": "box"})
        failures = policy.failures(ctx, (), (), {}, verdicts)
        out = SessionOutcome(ctx, {}, verdicts, failures)
        lines = messages.verdict_lines(out)
        assert out.failed is fails, lines
        assert any("WRONG-ANSWERS score/x#answers" in ln for ln in lines), lines
        assert any("computed something else" in ln for ln in lines) is fails, lines


def test_a_parameter_filled_in_chunks_has_the_values_of_one_draw(monkeypatch):
    """``fill`` draws CHUNK elements at a time into the array in place: the legacy stream draws
    one double an element in order, so the values are those of one draw of the whole
    (checked with a small chunk against numpy's generator by hand)."""
    import zlib
    monkeypatch.setattr(answers, "CHUNK", 7)
    arr = np.zeros((5, 4, 3), np.float32)
    answers.fill("conv9_weight", arr, 3)
    bound = math.sqrt(2.0 / ((4 * 3 + 5 * 3) / 2))
    rng = np.random.RandomState((zlib.crc32(b"conv9_weight") + 1000003 * 3) % 2 ** 32)
    assert np.array_equal(arr, rng.uniform(-bound, bound, size=(5, 4, 3)).astype(np.float32))
    ones = np.zeros((4,), np.float32)
    answers.fill("bn_gamma", ones, 3)
    assert (ones == 1).all()
