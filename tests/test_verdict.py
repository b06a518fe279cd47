"""Verdict statistics: per-process medians, threshold, one-sided U test, BH across cells."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from pytest_mxperf import verdict as V
from pytest_mxperf.samples import CellMeasurement, RunResult
from pytest_mxperf.workload import Workload

values = st.floats(min_value=1.0, max_value=1e4, allow_nan=False, allow_infinity=False)


@settings(deadline=None, max_examples=200)
@given(st.lists(values, min_size=1, max_size=20))
def test_identical_sample_sets_never_regress(xs):
    v = V.judge(xs, list(xs))
    assert v.kind == "unchanged", v
    assert v.change == 0.0


@settings(deadline=None, max_examples=200)
@given(n_base=st.integers(8, 16), n_cur=st.integers(8, 16), level=st.floats(5.0, 5000.0),
       noise=st.floats(0.0, 0.02), slowdown=st.floats(0.25, 0.6), seed=st.integers(0, 2 ** 32 - 1))
def test_uniform_slowdown_with_enough_processes_always_regresses(n_base, n_cur, level, noise, slowdown, seed):
    rng = random.Random(seed)
    base = [level * (1 + rng.uniform(-noise, noise)) for _ in range(n_base)]
    cur = [level * (1 - slowdown) * (1 + rng.uniform(-noise, noise)) for _ in range(n_cur)]
    v = V.judge(cur, base)
    assert v.kind == "regression", v
    assert v.q_value <= V.FDR_Q and v.change < -v.threshold


@settings(deadline=None, max_examples=200)
@given(st.lists(values, min_size=1, max_size=15), st.lists(values, min_size=1, max_size=15), st.randoms())
def test_order_of_samples_does_not_matter(cur, base, rnd):
    a = V.judge(cur, base)
    cur2, base2 = list(cur), list(base)
    rnd.shuffle(cur2)
    rnd.shuffle(base2)
    b = V.judge(cur2, base2)
    assert (a.kind, a.change, a.threshold) == (b.kind, b.change, b.threshold)
    assert a.p_value == pytest.approx(b.p_value)


@settings(deadline=None, max_examples=100)
@given(st.lists(values, min_size=1, max_size=15), st.lists(values, min_size=1, max_size=15))
def test_kind_is_always_known_and_regression_means_slower(cur, base):
    v = V.judge(cur, base)
    assert v.kind in V.KINDS
    if v.kind == "regression":
        assert v.change < -V.MIN_EFFECT and v.p_value < V.FDR_Q
    if v.kind == "improvement":
        assert v.change > V.MIN_EFFECT and v.p_value < V.FDR_Q


def test_few_processes_give_suspect_not_regression():
    # 30% slower, but with 2 vs 2 processes no test can be significant: re-measure.
    v = V.judge([7.0, 7.1], [10.0, 10.1])
    assert v.kind == "suspect" and "re-measure" in v.reason
    assert V.min_achievable_p(2, 2) > V.FDR_Q


def test_not_significant_with_many_processes_is_unchanged():
    base = [10, 11, 9, 10.5, 9.5, 10.2, 12, 8]
    cur = [9.0, 8.0, 13, 9.2, 12, 8.5, 11, 9.1, 10, 8.2]
    v = V.judge(cur, base)
    assert v.kind in ("unchanged", "suspect") and v.kind != "regression"


def test_threshold_grows_with_baseline_spread():
    tight = V.judge([9.0] * 5, [10.0, 10.05, 9.95, 10.02, 9.98])
    loose = V.judge([9.0] * 5, [10.0, 13.0, 7.0, 12.0, 8.0])
    assert tight.threshold == V.MIN_EFFECT
    assert loose.threshold > 0.2 and loose.kind != "regression"


def test_improvement_reported_with_hint():
    v = V.judge([13, 13.2, 12.9, 13.1, 13.05], [10, 10.1, 9.9, 10.2, 10.05])
    assert v.kind == "improvement" and "baseline" in v.reason


def test_no_baseline():
    assert V.judge([1.0, 2.0], None).kind == "no-baseline"
    assert V.judge([1.0, 2.0], []).kind == "no-baseline"


def test_benjamini_hochberg_known_values():
    q = V.benjamini_hochberg([0.01, 0.04, 0.03, 0.5, None])
    assert q[4] is None
    assert q[0] == pytest.approx(0.04)
    assert q[1] == pytest.approx(0.04 * 4 / 3)
    assert q[2] == pytest.approx(0.04 * 4 / 3)  # monotone: min(0.03*4/2, 0.04*4/3)
    assert q[3] == pytest.approx(0.5)


def test_session_applies_fdr():
    # one borderline cell alone is a regression; among many unchanged cells BH demotes it
    base = [10.0, 10.1, 9.9, 10.05, 9.95]
    border = [9.0, 9.05, 10.0, 8.9, 9.1]  # one overlapping process -> p ~ 0.02-0.04
    alone = V.judge_session({"x": (border, base)})
    assert alone["x"].kind == "regression"
    cells = {"x": (border, base)}
    for i in range(20):
        cells[f"u{i}"] = (list(base), list(base))
    many = V.judge_session(cells)
    assert many["x"].q_value > alone["x"].q_value
    assert many["x"].kind in ("suspect", "unchanged")


def test_env_and_version_diff():
    assert V.env_diff({"MXNET_SUBGRAPH_BACKEND": "NONE", "OMP_NUM_THREADS": "2"},
                      {"OMP_NUM_THREADS": "2"}) == ["MXNET_SUBGRAPH_BACKEND: unset -> NONE"]
    assert V.env_diff({}, {"KMP_AFFINITY": "granularity=fine"}) == ["KMP_AFFINITY: granularity=fine -> unset"]
    assert V.version_diff({"mxnet_version": "1.8.0"}, {"mxnet_version": "1.9.1"}) == ["mxnet: 1.9.1 -> 1.8.0"]
    assert V.version_diff({"features": ["MKLDNN", "OPENMP"]}, {"features": ["OPENMP"]}) == ["features: +MKLDNN"]


def test_resource_notes():
    changes, notes = V.resource_notes({"peak_rss_bytes": 1300 * 2 ** 20, "bind_seconds": 1.0, "first_batch_seconds": 1.0},
                                      {"peak_rss_bytes": 1000 * 2 ** 20, "bind_seconds": 0.5, "first_batch_seconds": 0.5})
    assert changes["memory_change"] == pytest.approx(0.3) and changes["startup_change"] == pytest.approx(1.0)
    assert len(notes) == 1 and "peak memory grew 30%" in notes[0]
    _, notes = V.resource_notes({"peak_rss_bytes": 1100}, {"peak_rss_bytes": 1000})
    assert notes == []


def _cell(medians, env=None, rss=10 ** 9, version="1.9.1"):
    w = Workload("resnet50_v2", batch_size=8)
    runs = [RunResult(w, "ok", batches_per_round=1, round_seconds=[8 / m] * 3,
                      meta={"env": env or {}, "mxnet_version": version, "peak_rss_bytes": rss,
                            "bind_seconds": 0.5, "first_batch_seconds": 0.2}) for m in medians]
    return CellMeasurement(w, runs)


def test_verdicts_for_session_with_baseline_doc(tmp_path):
    from pytest_mxperf import baselines
    base = _cell([10, 10.1, 9.9, 10.05, 9.95], rss=10 ** 9)
    baselines.update("m1", [base], {"hardware": {}}, {"mxnet_version": "1.9.1"}, baselines_dir=tmp_path)
    doc = baselines.load("m1", tmp_path)
    cur = _cell([7.6, 7.7, 7.5, 7.65, 7.55], env={"MXNET_SUBGRAPH_BACKEND": "NONE"}, rss=13 * 10 ** 8)
    out = V.verdicts_for_session([cur], doc, software={"mxnet_version": "1.9.1"})
    v = out[cur.workload.key()]
    assert v.kind == "regression"
    assert v.env_diff == ["MXNET_SUBGRAPH_BACKEND: unset -> NONE"]
    assert any("peak memory" in n for n in v.notes)
    assert V.Verdict.from_dict(v.to_dict()) == v


def test_cpu_share_from_meta():
    assert V.cpu_share({"cpu_utilization": 1.9, "threads": {"openmp": 2}}) == pytest.approx(0.95)
    assert V.cpu_share({"cpu_utilization": 0.5, "env_defaults_applied": {"OMP_NUM_THREADS": "2"}}) == pytest.approx(0.25)
    assert V.cpu_share({"cpu_utilization": 0.98, "env": {"OMP_NUM_THREADS": "1"}}) == pytest.approx(0.98)
    assert V.cpu_share({}) is None and V.cpu_share(None) is None
    assert V.cpu_share({"cpu_utilization": float("nan"), "threads": {"openmp": 2}}) is None


def test_starved_processes_are_excluded_from_the_statistics():
    base = [35.0, 36.0, 34.5, 35.5, 36.2]
    base_cpu = [0.95] * 5
    cur = [26.6, 27.0, 26.8, 9.0, 8.0]           # 3 clean processes 24% slower, 2 starved
    cur_cpu = [0.96, 0.95, 0.94, 0.25, 0.23]
    v = V.judge(cur, base, current_cpu=cur_cpu, baseline_cpu=base_cpu)
    assert v.kind == "regression" and v.n_current == 3
    assert v.change == pytest.approx(26.8 / 35.5 - 1)
    assert "CPU-starved" in v.reason and any("2 current" in n for n in v.notes)
    # identical sides where some processes were starved: never a regression
    v = V.judge(cur, cur, current_cpu=cur_cpu, baseline_cpu=cur_cpu)
    assert v.kind == "unchanged"


def test_fewer_threads_is_still_judged_but_whole_session_starvation_is_suspect():
    base = [35.0, 36.0, 34.5, 35.5, 36.2]
    cur = [x * 0.55 for x in base]
    # OMP_NUM_THREADS=1: utilisation halves, but so do the threads -> share unchanged -> regression
    v = V.judge(cur, base, current_cpu=[0.97] * 5, baseline_cpu=[0.95] * 5)
    assert v.kind == "regression"
    # same numbers, but every current process got a third of its CPUs: busy machine -> suspect
    v = V.judge(cur, base, current_cpu=[0.33] * 5, baseline_cpu=[0.95] * 5)
    assert v.kind == "suspect" and "busy" in v.reason


@settings(deadline=None, max_examples=100)
@given(st.lists(st.tuples(values, st.floats(0.05, 1.0)), min_size=1, max_size=12))
def test_identical_sets_with_cpu_shares_never_regress(pairs):
    xs = [p[0] for p in pairs]
    sh = [p[1] for p in pairs]
    assert V.judge(xs, xs, current_cpu=sh, baseline_cpu=sh).kind == "unchanged"
