"""Duet A/B: the pair estimator, the t-test and its interval, the pair-by-pair verdict, and the
session-level false-alarm rate on the recorded speed regimes (a smaller run of
benchmarks/duet_false_alarms.py: same model, fewer sessions)."""

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stand_ins

from pytest_mxperf.judge import thresholds
from pytest_mxperf.judge import verdict as V
from pytest_mxperf.judge import verdict_duet as D
from pytest_mxperf.model import stats as S
from pytest_mxperf.model.measurement import METRICS

THROUGHPUT = METRICS["throughput"]
LATENCY = METRICS["latency_p50_ms"]
LOG2 = math.log(2.0)


def _t2_quantile(p):
    """Student t quantile with 2 df, closed form."""
    return (2 * p - 1) / math.sqrt(2 * p * (1 - p))


def _t2_sf(t):
    """Student t upper tail with 2 df, closed form."""
    return 0.5 * (1 - t / math.sqrt(t * t + 2))


# ----------------------------------------------------------------------------- estimator

def test_pair_estimate_is_the_median_round_log_ratio():
    # reference / candidate per round: 2, 1, 1/2 -> median log ratio 0
    assert S.duet_pair_log_ratio([1.0, 2.0, 4.0], [2.0, 2.0, 2.0]) == 0.0
    # even number of rounds: the mean of the middle two (log 2 and log 4)
    assert S.duet_pair_log_ratio([1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 4.0, 4.0]) == pytest.approx(1.5 * LOG2)
    # the candidate twice as slow in every round: log(1/2) < 0
    assert S.duet_pair_log_ratio([0.2, 0.4, 0.3], [0.1, 0.2, 0.15]) == pytest.approx(-LOG2)


def test_pair_estimate_cancels_the_side_that_runs_first_in_each_round():
    """Rounds alternate A,B | B,A | ...: the side that runs first in a round ran last before
    it. Where that side runs 10% faster, an A/A pair's round ratios form two clusters (even
    rounds x1.1, odd x1/1.1); the estimate is the mean of the two clusters' medians: 0, and a
    round that strays from its cluster to the other moves it by little, where the median of
    all rounds would jump by the whole gap."""
    step = math.log(1.1)
    ref = [1.0] * 20
    cand = [math.exp(-step if j % 2 == 0 else step) * (1 + 0.001 * j) for j in range(20)]
    assert S.duet_pair_log_ratio(cand, ref) == pytest.approx(-0.0095, abs=0.001)  # the drift of 0.1% a round
    cand[1] = cand[0]  # one odd round reads like an even one
    logs = sorted(math.log(r / c) for c, r in zip(cand, ref))
    assert statistics.median(logs) > 0.07  # the median of all rounds: in the upper cluster
    assert S.duet_pair_log_ratio(cand, ref) == pytest.approx(-0.0095, abs=0.002)


def test_pair_estimate_ignores_a_few_rounds_a_regime_switch_fell_between():
    cand = [0.15] * 9 + [0.30]            # the machine halved its speed for the candidate's last round
    ref = [0.15] * 10
    assert S.duet_pair_log_ratio(cand, ref) == 0.0


def test_pair_estimate_drops_invalid_rounds_and_refuses_unequal_sides():
    assert S.duet_pair_log_ratio([1.0, 0.0, 1.0, float("nan")], [2.0, 5.0, 2.0, 1.0]) == pytest.approx(LOG2)
    with pytest.raises(ValueError):
        S.duet_pair_log_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        S.duet_pair_log_ratio([0.0, -1.0], [1.0, 1.0])


# ----------------------------------------------------------------------------- t-test and interval

# a run to its own end (time to accuracy): 3 epochs of 4 rounds, the last of each evaluating
RUN = [0.2, 0.1, 0.1, 0.14] + [0.1, 0.1, 0.1, 0.14] * 2


def test_a_runs_pair_estimate_is_the_ratio_of_its_totals():
    assert S.duet_run_log_ratio(RUN, RUN) == 0.0
    assert S.duet_run_log_ratio([t * 1.1 for t in RUN], RUN) == pytest.approx(math.log(1.1))
    # a change of the evaluation alone (every 4th round x1.4) counts in full, as in the totals
    slower_eval = [t * 1.4 if i % 4 == 3 else t for i, t in enumerate(RUN)]
    assert S.duet_run_log_ratio(slower_eval, RUN) == pytest.approx(math.log(sum(slower_eval) / sum(RUN)))
    # one more epoch to the target: its rounds count as they are
    assert S.duet_run_log_ratio(RUN + RUN[4:8], RUN) == pytest.approx(math.log((sum(RUN) + sum(RUN[4:8])) / sum(RUN)))
    assert S.duet_run_log_ratio(RUN, RUN + RUN[4:8]) == pytest.approx(-math.log((sum(RUN) + sum(RUN[4:8])) / sum(RUN)))


def test_a_burst_on_one_side_counts_at_the_bound_not_in_full():
    """A process beside the pair stretches the one round it falls in (0.15 s to 2.6 s seen):
    that round counts as its partner's x1.5, so the pair reads x1.04, not x1.9; on either side."""
    burst = list(RUN)
    burst[5] = 2.6
    bound = math.log((sum(RUN) - RUN[5] + 1.5 * RUN[5]) / sum(RUN))
    assert S.duet_run_log_ratio(burst, RUN) == pytest.approx(bound)
    assert S.duet_run_log_ratio(RUN, burst) == pytest.approx(-bound)
    assert math.log(sum(burst) / sum(RUN)) > 10 * bound  # what the plain totals would say
    # the bound stands around the pair's median: a uniform x2 with a burst on top reads x2 and a bit
    doubled = [2 * t for t in RUN]
    doubled_burst = list(doubled)
    doubled_burst[5] = 2.6
    assert S.duet_run_log_ratio(doubled_burst, RUN) == pytest.approx(
        math.log((sum(doubled) - doubled[5] + 3.0 * RUN[5]) / sum(RUN)))


def test_a_runs_pair_estimate_drops_invalid_rounds_and_refuses_none():
    # a round pair with a side that is not a time is dropped whole
    assert S.duet_run_log_ratio(RUN + [float("nan")], RUN + [0.1]) == 0.0
    assert S.duet_run_log_ratio(RUN + [float("inf"), 0.1], RUN) == pytest.approx(math.log((sum(RUN) + 0.1) / sum(RUN)))
    with pytest.raises(ValueError):
        S.duet_run_log_ratio([float("nan"), 0.0], [0.1, 0.1])
    with pytest.raises(ValueError):
        S.duet_run_log_ratio([], RUN)


def test_a_time_to_accuracy_duet_pair_is_judged_from_its_rounds():
    """``ab_judging.duet_log_ratio`` takes a duet pair's seconds to the target from its rounds
    (the burst bounded), a process pair's (no rounds) from the two figures."""
    from pytest_mxperf.model.measurement import RunResult
    from pytest_mxperf.model.workload import Workload
    from pytest_mxperf.outcome import ab_judging
    w = Workload(model="lenet", mode="convergence", batch_size=64)
    burst = list(RUN)
    burst[5] = 2.6

    def run(rounds):
        return RunResult(workload=w, status="ok", round_seconds=rounds or (), batches_per_round=1 if rounds else 0,
                         figures={"seconds_to_target": sum(rounds or RUN) + (1.0 if not rounds else 0.0),
                                  "epochs_to_target": 3.0})
    m = METRICS["seconds_to_target"]
    assert ab_judging.duet_log_ratio(run(burst), run(RUN), m) == pytest.approx(S.duet_run_log_ratio(burst, RUN))
    assert ab_judging.duet_log_ratio(run(None), run(None), m) == 0.0
    assert ab_judging.duet_log_ratio(run(burst), run(RUN), METRICS["epochs_to_target"]) == 0.0


def test_t_test_exact_values():
    # mean 2, s 1, n 3: t = 2 sqrt(3) with 2 df
    assert S.mean_t_p([1.0, 2.0, 3.0], "greater") == pytest.approx(_t2_sf(2 * math.sqrt(3)), rel=1e-9)
    assert S.mean_t_p([-1.0, -2.0, -3.0], "less") == pytest.approx(_t2_sf(2 * math.sqrt(3)), rel=1e-9)
    assert S.mean_t_p([-1.0, 0.0, 1.0], "less") == pytest.approx(0.5)
    assert S.mean_t_p([-1.0, 0.0, 1.0], "greater") == pytest.approx(0.5)
    assert S.mean_t_p([0.1], "less") is None
    assert S.mean_t_p([-0.1, -0.1, -0.1], "less") == 0.0
    assert S.mean_t_p([-0.1, -0.1, -0.1], "greater") == 1.0
    with pytest.raises(ValueError):
        S.mean_t_p([1.0, 2.0], "two-sided")


def test_t_interval_exact_values():
    lo, hi = S.mean_t_interval([1.0, 2.0, 3.0], 0.05)
    half = _t2_quantile(0.95) / math.sqrt(3)
    assert lo == pytest.approx(2 - half, rel=1e-9) and hi == pytest.approx(2 + half, rel=1e-9)
    assert S.mean_t_interval([0.5], 0.05) == (-math.inf, math.inf)
    assert S.mean_t_interval([0.5, 0.5, 0.5], 0.05) == (0.5, 0.5)


@settings(deadline=None, max_examples=300)
@given(st.lists(st.floats(-0.3, 0.3), min_size=2, max_size=12), st.sampled_from([0.05, 0.01, 0.0025, 0.001]))
def test_t_test_and_interval_agree(xs, alpha):
    """The verdict is decided from the interval it shows: its upper end is below 0 exactly
    when the one-sided test rejects "no slowdown" at that level, and the lower end above 0
    when it rejects "no speed-up"."""
    lo, hi = S.mean_t_interval(xs, alpha)
    p_less, p_greater = S.mean_t_p(xs, "less"), S.mean_t_p(xs, "greater")
    if abs(p_less - alpha) > 1e-9:
        assert (hi < 0) == (p_less <= alpha)
    if abs(p_greater - alpha) > 1e-9:
        assert (lo > 0) == (p_greater <= alpha)
    assert lo <= sum(xs) / len(xs) + 1e-12 and sum(xs) / len(xs) - 1e-12 <= hi


def test_pairs_for_a_halfwidth():
    # 3 values (2 df): t_0.95 / sqrt(3) = 1.686 x sd; 4 values: 2.353 / 2 = 1.177 x sd
    h3 = _t2_quantile(0.95) / math.sqrt(3)
    assert S.t_pairs_for_halfwidth(1.0, h3 + 1e-9, 0.05, 3, 40) == 3
    assert S.t_pairs_for_halfwidth(1.0, h3 - 1e-3, 0.05, 3, 40) == 4
    assert S.t_pairs_for_halfwidth(1.0, 0.01, 0.05, 3, 40) == 40   # never reached: the cap
    assert S.t_pairs_for_halfwidth(0.0, 0.01, 0.05, 5, 40) == 5


# ----------------------------------------------------------------------------- the pair-by-pair verdict

def _one(ratios, final=False, metric=THROUGHPUT, **kw):
    """One cell's verdict as a session gives it: at the spread ``pooled_spreads`` gives it (no
    other cell, no history: its own pairs' spread)."""
    from pytest_mxperf.outcome import ab_judging
    cells = {"c": D.DuetPairing(metric, ratios, final=final, **kw)}
    return D.judge_duet_sequential(cells, ab_judging.pooled_spreads(cells, {}))["c"]


SLOW = [-0.10, -0.11, -0.09, -0.105]       # x0.90, tight
MORE_SLOW = [-0.095, -0.10, -0.10]
NOISY_SLOW = [-0.2, 0.05, -0.1]            # -8% but not significant
MORE_NOISY = [-0.25, 0.1, -0.1]


def test_every_kind_is_reachable():
    assert _one(SLOW).kind == "regression"                            # called at its first look
    assert _one([0.10, 0.11, 0.09]).kind == "improvement"
    assert _one([0.001, -0.002, 0.0005]).kind == "unchanged"
    assert _one(NOISY_SLOW).kind == "suspect"                         # not called yet: one more look
    assert _one(NOISY_SLOW + MORE_NOISY, final=True).kind == "unresolved"  # a slowdown never passes silently
    for v in (_one(SLOW), _one(NOISY_SLOW), _one(NOISY_SLOW + MORE_NOISY, final=True)):
        assert isinstance(v, V.Verdict) and v.reason.startswith("candidate/reference ")


def test_regression_reports_the_ratio_its_interval_and_the_pairs():
    pairs = SLOW + MORE_SLOW
    v = _one(pairs, final=True, rounds=20)
    est = math.exp(sum(pairs) / len(pairs))
    assert v.change == pytest.approx(est - 1)
    assert v.interval[0] <= est <= v.interval[1] < 1.0
    assert v.n_current == v.n_baseline == 7
    assert v.p_value <= thresholds.FDR_Q and v.threshold == thresholds.MIN_EFFECT
    assert v.failed and "20 rounds each" in v.reason and "worse than -5% and significant" in v.reason
    assert "over 7 duet pair(s)" in v.reason and "pair by pair" in v.reason


def test_a_final_slowdown_that_stays_unclear_fails_as_unresolved():
    v = _one(NOISY_SLOW + MORE_NOISY, final=True)
    assert v.kind == "unresolved" and v.failed and v.change < -thresholds.MIN_EFFECT
    assert v.interval[0] < 1 + v.change < 1.0 < v.interval[1] and "could not confirm" in v.reason


def _spread_pairs(n, mean, sd):
    """n log ratios with exactly this mean and sample SD (alternating around the mean)."""
    xs = [(1 if i % 2 else -1) for i in range(n)]
    if n % 2:
        xs[-1] = 0
    m = sum(xs) / n
    k = sd / S.sample_sd([x - m for x in xs])
    return [mean + k * (x - m) for x in xs]


def test_a_figure_whose_spread_is_the_machines_is_below_resolution_after_every_pair():
    """A figure with a 30% pair spread (an ndarray loader here) that got every pair it was
    planned (``complete``) and is still not significant: -6% is the machine's noise (a standard
    error of 4.7% at 40 pairs), not a slowdown the duet failed to confirm; beyond
    NOISE_LIMIT_Z standard errors it is unresolved, and a cell the deadline cut (not complete)
    is unresolved as before."""
    n = D.SEQUENTIAL_MAX_PAIRS
    se = 0.30 / math.sqrt(n)
    near = _one(_spread_pairs(n, -0.06, 0.30), final=True, complete=True)
    assert near.kind == "below-resolution" and not near.failed and "not passed as unchanged" in near.reason
    assert near.interval[0] < 1.0 < near.interval[1]
    far = _one(_spread_pairs(n, -(thresholds.NOISE_LIMIT_Z + 0.2) * se, 0.30), final=True, complete=True)
    assert far.kind in ("unresolved", "regression") and far.failed
    cut = _one(_spread_pairs(n, -0.06, 0.30), final=True)
    assert cut.kind == "unresolved" and cut.failed
    # a precise figure is judged as before: -6% at a 2% spread is significant
    assert _one(_spread_pairs(n, -0.06, 0.02), final=True, complete=True).kind == "regression"


def test_too_imprecise_to_pass_yet():
    # estimate -0.7%, but a 5% spread over 3 pairs reaches far past -5%: one more look
    v = _one([-0.04, 0.05, -0.03])
    assert v.kind == "suspect" and "not called yet" in v.reason and "bound reaches" in v.reason
    # final: the estimate is within -5%: passed, the reason shows how far its bound reaches
    final = _one([-0.08, 0.09, -0.03, -0.06, 0.08, -0.02], final=True)
    assert final.kind == "unchanged" and "bound reaches" in final.reason


def test_pairs_that_are_not_numbers_are_left_out():
    assert _one([float("nan"), -0.1, float("inf")]).kind == "suspect"   # one pair, no spread of its own
    assert _one([float("nan")], final=True).kind == "unresolved"        # none: could not judge


def test_lower_is_better_metric():
    # latency ratios log(candidate ms / reference ms): +10% latency is worse
    up = [0.10, 0.11, 0.09, 0.105]
    v = _one(up + up, final=True, metric=LATENCY)
    assert v.kind == "regression" and v.change > 0.05
    assert 1.0 < v.interval[0] <= 1 + v.change <= v.interval[1]
    assert _one([-x for x in up], metric=LATENCY).kind == "improvement"
    # the same numbers as throughput are a speed-up
    assert _one(up, metric=THROUGHPUT).kind == "improvement"


@settings(deadline=None, max_examples=200)
@given(st.lists(st.floats(-0.4, 0.4), min_size=0, max_size=10), st.booleans(), st.booleans())
def test_interval_contains_the_estimate(ratios, final, higher):
    metric = THROUGHPUT if higher else LATENCY
    v = _one(ratios, final=final, metric=metric)
    assert v.kind in ("regression", "improvement", "unchanged", "suspect", "unresolved", "below-resolution")
    assert v.kind != ("suspect" if final else "unresolved")
    if v.interval is not None:
        assert v.interval[0] <= 1 + v.change + 1e-12 and 1 + v.change - 1e-12 <= v.interval[1]
    if v.kind == "regression":
        assert (v.change < -thresholds.MIN_EFFECT) if higher else (v.change > thresholds.MIN_EFFECT)


# ----------------------------------------------------------------------------- sessions on the recorded regimes

def _bench():
    return stand_ins.repository_module("benchmarks/duet_false_alarms.py")


@pytest.fixture(scope="module")
def bench():
    return _bench()


SESSIONS = 200


def test_the_simulated_pair_is_the_estimator(bench):
    import numpy as np

    rng = np.random.default_rng(1)
    ratios, cand, ref = bench.duet_pair_ratios(rng, np.array([1.0, 0.9, 0.76]), bench.SIGMA_AA, seconds=True)
    for i in range(3):
        assert ratios[i] == pytest.approx(S.duet_pair_log_ratio(list(cand[i]), list(ref[i])), abs=1e-12)


def test_rounds_cancel_the_regimes(bench):
    """Same install on both sides, no per-process factor: the machine's speed moves between
    x0.57 and x1.09 of its fast regime, yet the pairs' ratios stay within a few percent."""
    import numpy as np

    rng = np.random.default_rng(2)
    r = bench.duet_pair_ratios(rng, np.ones(2000), 0.0)
    assert float(np.std(r)) < 0.02 and float(np.max(np.abs(r))) < 0.06


#: sessions of 20 cells held here: the first 100 of the 200 in docs/upgrade-gate.md (the same seed and
#: stream; none of the 200 failed), a minute of every test run on a Zen 3 at 200
SESSIONS_OF_20 = 100


@pytest.mark.parametrize("n_cells, sessions", [(1, 1000), (20, SESSIONS_OF_20)])
def test_equal_sessions_rarely_fail_whatever_their_size(bench, n_cells, sessions):
    row = bench.duet_sessions(n_cells, 1.0, bench.SIGMA_AA, sessions, seed=7)
    print(f"\nA/A, {n_cells} cell(s): {row}")
    assert row["failed"] <= thresholds.FDR_Q


@pytest.mark.parametrize("n_cells", [1, 6])
def test_a_ten_percent_slower_cell_is_flagged(bench, n_cells):
    row = bench.duet_sessions(n_cells, 0.90, bench.SIGMA_AA, SESSIONS, seed=7)
    print(f"\nx0.90 in 1 of {n_cells} cell(s): {row}")
    assert row["flagged"] >= 0.80
    assert row["others_failed"] <= thresholds.FDR_Q


def test_with_the_measured_duet_spread_three_to_six_pairs_flag_ten_percent(bench):
    row = bench.duet_sessions(1, 0.90, bench.SIGMA_DUET, SESSIONS, seed=7)
    assert row["flagged_regression"] >= 0.95 and row["pairs_per_cell"] < 7   # 3 + 3 fresh, a few more
