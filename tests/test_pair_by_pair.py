"""The pair-by-pair rule as the sessions use it (issue 76, part 2): duet figures judged from
their first pair at the spread pooled over their kind of figure (the session's pairs and this
machine's history), each cell given more pairs look by look until it is called, and the
history store keeping each session's pooled spread for the next."""

import math

import numpy as np
import pytest

from test_history_store import doc

from pytest_mxperf.history.store import open_store
from pytest_mxperf.judge import sequential
from pytest_mxperf.judge import verdict_duet as D
from pytest_mxperf.model.measurement import METRICS
from pytest_mxperf.judge import thresholds
from pytest_mxperf.outcome import ab_judging

THROUGHPUT = METRICS["throughput"]
SECONDS = METRICS["comm_seconds"]
KEY = "score/lenet/b8/cpu:0/float32/threads=auto"


def _pairing(ratios, metric=THROUGHPUT, final=False, complete=False):
    return D.DuetPairing(metric, [math.log(r) for r in ratios], final=final, complete=complete)


def _judge(cells, sd=0.02, df=200, **kw):
    spreads = {k: sequential.Spread(sd * sd * df, df) for k in cells}
    return D.judge_duet_sequential(cells, spreads, **kw)


def test_an_unchanged_cell_is_called_after_its_first_pairs_at_a_known_spread():
    v = _judge({KEY: _pairing([1.004, 0.995, 1.001])})[KEY]
    assert v.kind == "unchanged" and v.n_current == 3
    assert v.interval[0] > 0.95 and "pooled pair spread 2.0% (200 df)" in v.reason


def test_one_pair_can_settle_a_cell_when_the_spread_is_small():
    assert _judge({KEY: _pairing([1.0])}, sd=0.01)[KEY].kind == "unchanged"
    assert _judge({KEY: _pairing([1.0])}, sd=0.04)[KEY].kind == "suspect"


def test_a_ten_percent_slowdown_is_a_regression_and_a_three_percent_one_needs_more_pairs():
    assert _judge({KEY: _pairing([0.90, 0.91, 0.89])})[KEY].kind == "regression"
    v = _judge({KEY: _pairing([0.97, 0.96, 0.975])}, sd=0.03)[KEY]
    assert v.kind == "suspect" and "adding pairs" in v.reason


def test_a_cell_that_reaches_its_last_look_is_judged_as_it_stands():
    # worse than the minimum effect, not significant at a wide spread: unresolved, never passed
    worse = _judge({KEY: _pairing([0.93] * 12, final=True)}, sd=0.15)[KEY]
    assert worse.kind == "unresolved"
    # within the minimum effect but imprecise: unchanged, its bound said
    within = _judge({KEY: _pairing([0.98] * 12, final=True)}, sd=0.15)[KEY]
    assert within.kind == "unchanged" and "its bound reaches" in within.reason


def test_a_time_is_worse_when_it_grows_and_its_effect_is_on_its_own_scale():
    # seconds per round 10% longer: a slowdown
    assert _judge({KEY: _pairing([1.10, 1.11, 1.09], metric=SECONDS)})[KEY].kind == "regression"
    assert D.log_effect(SECONDS, 0.05) == pytest.approx(math.log(1.05))
    assert D.log_effect(THROUGHPUT, 0.05) == pytest.approx(-math.log(0.95))


def test_the_session_budget_is_shared_by_its_figures():
    # the same pairs are a regression alone and only a suspect among 200 figures
    few = _judge({KEY: _pairing([0.935, 0.94, 0.93])}, sd=0.03)[KEY]
    many = _judge({f"{KEY}/{i}": _pairing([0.935, 0.94, 0.93]) for i in range(200)}, sd=0.03)[f"{KEY}/0"]
    assert few.kind == "regression" and many.kind == "suspect"


def test_no_spread_to_judge_at_is_a_suspect_then_unresolved():
    cells = {KEY: _pairing([1.0])}
    assert D.judge_duet_sequential(cells, {})[KEY].kind == "suspect"
    cells = {KEY: _pairing([1.0], final=True)}
    assert D.judge_duet_sequential(cells, {})[KEY].kind == "unresolved"


def test_the_next_look_grows_at_most_as_many_again_and_stops_at_the_last():
    eff = D.log_effect(THROUGHPUT, 0.05)
    rule = dict(min_effect=eff, q=0.05, n_figures=24, max_pairs=12)
    assert D.next_look([], 0.03, 200, **rule) == D.STAGE1_PAIRS
    near_zero = D.next_look([0.0, -0.01, 0.01], 0.03, 200, **rule)
    assert 1 <= near_zero <= 3
    near_effect = D.next_look([-0.04, -0.045, -0.035], 0.03, 200, **rule)
    assert near_effect == 3  # far from called: as many again, no more
    assert D.next_look([-0.03] * 10, 0.05, 200, **rule) == 2  # never past the last look
    assert D.next_look([-0.04] * 12, 0.03, 200, **rule) == 0


def test_after_a_first_pair_the_next_look_reaches_the_first_stage_and_with_no_spread_waits_for_it():
    eff = D.log_effect(THROUGHPUT, 0.05)
    rule = dict(min_effect=eff, q=0.05, n_figures=24, max_pairs=40)
    assert D.STAGE1_PAIRS == 3
    # one pair (planning.first_pairs) far from a call: up to the first stage's three, not one more only
    assert D.next_look([-0.045], 0.03, 200, **rule) == 2
    assert D.next_look([-0.045, -0.04], 0.03, 200, **rule) == 2  # as many again from two
    # a kind the history has not seen: no spread to judge one pair at, the first stage's pairs in all
    assert D.next_look([0.0], None, 0, **rule) == 2
    assert D.next_look([0.0, 0.01], None, 0, **rule) == 1
    assert D.pairs_to_call([0.0], None, 0, **rule) == 3
    # a cell called unchanged after its one pair at a known spread of 1.6% (a score cell on the Zen 4)
    call = sequential.decide([0.0], 0.016, 50, min_effect=eff, alpha_regression=0.05 / 24, alpha_pass=D.ALPHA_PASS,
                             max_pairs=40)
    assert call.kind == "unchanged", call
    slow = sequential.decide([math.log(0.9)], 0.016, 50, min_effect=eff, alpha_regression=0.05 / 24,
                             alpha_pass=D.ALPHA_PASS, max_pairs=40)
    assert slow.kind == "regression", slow


def test_the_pooled_spread_adds_this_machines_history_of_the_kind_to_the_sessions_own_pairs():
    duets = {"score/a/b1": _pairing([1.0, 1.02]), "score/b/b8": _pairing([0.99, 1.01, 1.0])}
    own = sequential.Spread.of(d.signed() for d in duets.values())
    known = {"score/c/b1": sequential.Spread(0.01, 10),          # a score cell's history: the kind's
             "train/d/b8": sequential.Spread(0.5, 10),           # another kind's: not pooled with it
             "rounds/score": sequential.Spread(9.0, 10),         # a family's own row: read from its figures
             "rounds": sequential.Spread(9.0, 10)}               # ... as an older session wrote it
    pooled = ab_judging.pooled_spreads(duets, known)
    assert pooled["score/a/b1"].df == own.df + 10 == 13
    assert pooled["score/a/b1"].ss == pytest.approx(own.ss + 0.01)
    # a train cell is judged at its kind's spread, not the score cells'
    train = {"train/e/b8": _pairing([1.0, 1.1])}
    assert ab_judging.pooled_spreads(train, known)["train/e/b8"].ss == pytest.approx(
        0.5 + sequential.Spread.of([train["train/e/b8"].signed()]).ss)
    # a tail is its own kind: the rounds' history does not narrow it
    tail = {"latency/c/b1": _pairing([1.0, 1.2], metric=METRICS["latency_p99_ms"])}
    assert ab_judging.pooled_spreads(tail, known)["latency/c/b1"].df == 1


def test_the_history_store_keeps_each_sessions_spread_and_sums_the_last_ones(tmp_path):
    where = str(tmp_path / "h.sqlite")
    with open_store(where) as s:
        for i, (ss, df) in enumerate([(0.5, 50), (0.02, 20), (0.03, 30), (0.04, 40)]):
            d = doc(f"s{i}", float(i), 100.0)
            d["session"]["pair_spreads"] = {"rounds": [ss, df], "latency_p99_ms": [0.1, 2]}
            assert s.append(d)
        d = doc("other-machine", 9.0, 100.0, machine="elsewhere")
        d["session"]["pair_spreads"] = {"rounds": [9.0, 9]}
        s.append(d)
        s.append(doc("no-pairs", 10.0, 100.0))  # a session without duet pairs is not one of the last
        got = dict((f, (ss, df)) for f, ss, df in s.pair_spreads("box", 3))
    assert got["rounds"] == (pytest.approx(0.09), 90)  # s1..s3: the oldest (s0) left out
    assert got["latency_p99_ms"] == (pytest.approx(0.3), 6)


def test_a_session_of_one_kind_does_not_push_the_other_kinds_out_of_the_history(tmp_path):
    """Seen on the Zen 4: an A/A of the two distributed cells alone made the history's last three
    sessions hold 10 df of the kvstore kind instead of 24, and the next paired session's cells got
    three pairs before their first look instead of one. Each kind sums its own last sessions."""
    with open_store(str(tmp_path / "h.sqlite")) as s:
        for i, ss in enumerate([0.01, 0.02, 0.03, 0.04]):
            d = doc(f"whole{i}", float(i), 100.0)
            d["session"]["pair_spreads"] = {"rounds/kvstore": [ss, 8], "rounds/score": [ss, 20]}
            assert s.append(d)
        d = doc("dist-only", 10.0, 100.0)
        d["session"]["pair_spreads"] = {"rounds/dist": [0.009, 13]}
        assert s.append(d)
        got = dict((f, (ss, df)) for f, ss, df in s.pair_spreads("box", 3))
    # the last three sessions that measured kvstore pairs (whole1..whole3), not whole2, whole3 and dist-only
    assert got["rounds/kvstore"] == (pytest.approx(0.09), 24)
    assert got["rounds/score"] == (pytest.approx(0.09), 60)
    assert got["rounds/dist"] == (pytest.approx(0.009), 13)


def test_a_bad_spread_in_a_results_document_is_left_out_not_stored(tmp_path):
    d = doc("bad", 1.0, 100.0)
    d["session"]["pair_spreads"] = {"rounds": [-1.0, 3], "x": [0.1, 0], "y": "no", "z": [0.2, 4]}
    with open_store(str(tmp_path / "h.sqlite")) as s:
        assert s.append(d)
        assert s.pair_spreads("box") == [("z", 0.2, 4)]


def test_a_figure_measured_after_a_duets_rounds_is_below_resolution_within_its_pairs_noise():
    """An unchanged session on an Intel model 207 (benchmarks/results/paired-sessions-intel-2026-12-02.txt)
    failed on LeNet b64's loader alone: 12 A/A pairs, measured one side after the other after the
    rounds, spread 11% with a median of x0.934. Such a figure's slowdown within NOISE_LIMIT_Z
    standard errors of its pairs is below the resolution; a fast-end figure of process pairs keeps
    the stricter rule (its pairs' median beyond the minimum effect: unresolved)."""
    from pytest_mxperf.judge import ab_pairs
    metric = METRICS["loader_samples_per_s"]
    # the session's own pairs (samples/s; candidate, reference)
    cand = [78856.8, 68721.5, 71611.1, 49603.5, 58921.7, 48005.8, 56160.8, 56826.2, 54263.2, 52083.3, 58820.5, 54052.6]
    ref = [64058.0, 83801.9, 85784.2, 52995.1, 54835.8, 55963.8, 59676.1, 56261.9, 58748.1, 56802.3, 59506.0, 60340.2]

    def judged(after):
        p = ab_pairs.Pairing(metric, cand, ref, final=True, complete=True, after_rounds=after)
        return ab_pairs.judge_ab({"k": p})["k"]
    after = judged(True)
    assert after.kind == "below-resolution" and "after the rounds" in after.reason, after.reason
    assert judged(False).kind == "unresolved"
    # far beyond its pairs' noise it fails as before
    far = [c * 0.8 for c in cand]
    p = ab_pairs.Pairing(metric, far, ref, final=True, complete=True, after_rounds=True)
    assert ab_pairs.judge_ab({"k": p})["k"].failed



def test_a_history_whose_spread_this_session_contradicts_is_left_out():
    """Seen on the Zen 4 (benchmarks/results/paired-session-zen4-2026-12-03c.txt): an unchanged
    session's score pairs spread about 2.7%, its history (a slow spell's sessions) 4.2% over 120
    df, and the session's cells were held to the history's spread for 29.8 minutes. A history
    the session's own pairs contradict (F test at HISTORY_AGREES_P, from SESSION_ALONE_DF of the
    kind) is left out, whichever way they differ; one that agrees is pooled as before."""
    rng = np.random.default_rng(5)

    def session(sd, cells=8, pairs=3):
        return {f"score/m{i}/b1": _pairing(list(np.exp(rng.normal(0.0, sd, pairs)))) for i in range(cells)}

    quiet = session(0.027)
    here = sequential.Spread.of(d.signed() for d in quiet.values())
    assert here.df == 16 >= thresholds.SESSION_ALONE_DF
    noisy_history = {"score/old/b1": sequential.Spread(0.045 ** 2 * 120, 120)}
    judged = ab_judging.pooled_spreads(quiet, noisy_history)["score/m0/b1"]
    assert (judged.ss, judged.df) == (pytest.approx(here.ss), here.df)  # the session's own: the history disagrees
    agreeing = {"score/old/b1": sequential.Spread(here.sd ** 2 * 120, 120)}
    assert ab_judging.pooled_spreads(quiet, agreeing)["score/m0/b1"].df == here.df + 120
    # a noisy session is not held to a quiet history's boundary either
    noisy = session(0.08)
    loud = sequential.Spread.of(d.signed() for d in noisy.values())
    quiet_history = {"score/old/b1": sequential.Spread(0.02 ** 2 * 120, 120)}
    held = ab_judging.pooled_spreads(noisy, quiet_history)
    assert all(v.df < 120 and v.sd >= loud.sd - 1e-12 for v in held.values()), held  # its own, or its figure's if larger
    # too few pairs of the kind here to tell: the history is pooled, as at a first look after one pair
    few = session(0.027, cells=4, pairs=2)
    assert ab_judging.pooled_spreads(few, noisy_history)["score/m0/b1"].df == 4 + 120
    # the rule itself: equal variances agree, a ratio of three at these degrees of freedom does not
    assert sequential.Spread(0.001 * 20, 20).agrees_with(sequential.Spread(0.001 * 100, 100), 0.05, 10)
    assert not sequential.Spread(0.001 * 20, 20).agrees_with(sequential.Spread(0.003 * 100, 100), 0.05, 10)
    assert sequential.Spread(0.001 * 5, 5).agrees_with(sequential.Spread(0.003 * 100, 100), 0.05, 10)

def test_a_figure_with_pairs_enough_of_its_own_is_judged_at_its_own_spread_below_its_kinds():
    quiet = [1.0 + 0.01 * ((-1) ** i) for i in range(4)]            # spread about 1.2%
    noisy = [1.0 + 0.1 * ((-1) ** i) for i in range(4)]             # about 12%: the kind's spread
    duets = {"train/lenet/b32": _pairing(quiet), "train/alexnet/b8": _pairing(noisy)}
    few = ab_judging.pooled_spreads(duets, {})
    # 3 df of its own: the kind's spread holds it (a cell's few pairs can show less than the machine's)
    assert few["train/lenet/b32"].df == 6 and few["train/lenet/b32"].sd > 0.05
    # with this machine's history of the cell, its own degrees of freedom reach OWN_ALONE_DF
    own_history = sequential.Spread(0.012 ** 2 * 8, 8)
    assert 3 + own_history.df >= thresholds.OWN_ALONE_DF
    enough = ab_judging.pooled_spreads(duets, {"train/lenet/b32": own_history})
    assert enough["train/lenet/b32"].df == 11 and enough["train/lenet/b32"].sd < 0.015
    # the noisy cell is judged at its own spread, larger than the kind's, as before
    assert enough["train/alexnet/b8"].sd == pytest.approx(few["train/alexnet/b8"].sd)


def test_the_pairs_to_a_call_are_what_the_next_look_steps_towards():
    eff = D.log_effect(THROUGHPUT, 0.05)
    rule = dict(min_effect=eff, q=0.05, n_figures=24, max_pairs=40)
    assert D.pairs_to_call([], 0.03, 200, **rule) == D.STAGE1_PAIRS
    c_r, c_u = sequential.boundaries(0.05 / 24, D.ALPHA_PASS, 40, 200)
    near_zero = [0.0, -0.01, 0.01]
    assert D.pairs_to_call(near_zero, 0.03, 200, **rule) == max(3, math.ceil((c_u * 0.03 / eff) ** 2))
    # a mean near the effect needs more than the last look allows: the last look
    assert D.pairs_to_call([-0.01] * 3, 0.2, 200, **rule) == 40
    # a mean already called needs no more than it has
    assert D.pairs_to_call([0.0] * 20, 0.005, 200, **rule) == 20
    for signed, sd in ((near_zero, 0.03), ([-0.04, -0.045, -0.035], 0.03), ([-0.03] * 10, 0.05), ([0.01] * 5, 0.08)):
        n = len(signed)
        need = D.pairs_to_call(signed, sd, 200, **rule) - n
        assert D.next_look(signed, sd, 200, **rule) == min(40 - n, max(1, min(need, n)))


def test_the_looks_after_the_next_are_the_rest_of_a_suspects_pairs_to_a_call():
    from pytest_mxperf.measure.ledger import CellRecord
    from pytest_mxperf.model.measurement import CellMeasurement, RunResult
    from pytest_mxperf.model.workload import Workload

    def run(w, s):
        return RunResult(w, "ok", batches_per_round=1, round_seconds=[s] * 6, figures={}, meta={"duet": {}})
    near, called = Workload("alexnet", mode="score", batch_size=1), Workload("alexnet", mode="score", batch_size=8)
    # three pairs at -3% (spread 5%): a suspect far from a call; three at 0% +- 0.5%, with this
    # machine's history of the cell at 0.5% (20 df): called unchanged
    cells = {near.key(): CellRecord("n", CellMeasurement(near, [run(near, 0.103 * f) for f in (1.0, 1.05, 0.95)],
                                                         [run(near, 0.100) for _ in range(3)])),
             called.key(): CellRecord("c", CellMeasurement(called, [run(called, 0.1 * f) for f in (1.0, 1.005, 0.995)],
                                                           [run(called, 0.100) for _ in range(3)]))}
    known = {called.key(): sequential.Spread(0.005 ** 2 * 20, 20), near.key(): sequential.Spread(0.05 ** 2 * 20, 20)}
    verdicts = ab_judging.judge_ab_once(cells, set(), 0.05, known=known)
    assert verdicts[called.key()].kind == "unchanged" and verdicts[near.key()].kind == "suspect"
    looks = ab_judging.next_looks(cells, verdicts, 0.05, known=known)
    after = looks.after
    n, last = looks(near.key())
    assert n == 3 and not last                       # as many again as it has
    assert after(near.key()) > 0                     # and more after that, as it reads now
    assert after(called.key()) == 0


RULE = dict(min_effect=math.log1p(0.05), q=0.05, n_figures=1)


def test_the_expected_pairs_count_the_looks_noise_keeps_open_and_the_truth_they_are_drawn_around():
    """``pairs_to_call`` takes the mean so far for the truth and its crossing for certain. The
    expected pairs follow the looks along noisy paths: around that same mean, more than the
    crossing (the paths whose pairs lean worse stay open); around no change, fewer for a cell
    whose first pairs leaned worse (its next pairs pull its mean back); around a truth far beyond
    the minimum effect, a regression called in fewer pairs than one at it; never fewer than it
    has, never more than the rule allows."""
    leaning = [-0.02, -0.03, -0.025]
    mean = sum(leaning) / 3
    crossing = D.pairs_to_call(leaning, 0.03, 200, **RULE)
    assert crossing < D.expected_pairs(leaning, 0.03, 200, **RULE, truth=mean) <= D.SEQUENTIAL_MAX_PAIRS
    assert len(leaning) <= D.expected_pairs(leaning, 0.03, 200, **RULE, truth=0.0) < crossing
    at_zero = [0.0, 0.0, 0.0]
    assert D.pairs_to_call(at_zero, 0.03, 200, **RULE) < D.expected_pairs(at_zero, 0.03, 200, **RULE)
    assert D.expected_pairs(leaning, 0.03, 200, **RULE, truth=-0.15) < D.expected_pairs(
        leaning, 0.03, 200, **RULE, truth=-math.log1p(0.05))
    # the same pairs, the same expectation (a fixed seed)
    assert D.expected_pairs(leaning, 0.03, 200, **RULE) == D.expected_pairs(leaning, 0.03, 200, **RULE)


def test_a_spread_of_few_degrees_is_not_taken_to_stay_so():
    """Two degrees of freedom widen the boundaries by Student's t about five times; each pair a
    cell adds joins its spread's degrees, so its expected pairs are far fewer than with the two
    held (which would ask for nearly every pair the rule allows)."""
    signed = [0.01, -0.01, 0.0]
    few = D.expected_pairs(signed, 0.03, 2, **RULE)
    many = D.expected_pairs(signed, 0.03, 200, **RULE)
    assert many <= few
    held = D.pairs_to_call(signed, 0.03, 2, **RULE)   # the crossing with 2 df held
    assert few < held


def test_means_are_shrunk_towards_no_change_as_far_as_the_session_spreads_within_its_noise():
    """Empirical Bayes: where every figure's mean lies within its noise (an unchanged session),
    the best guess of each truth is near 0, however far one noisy pair put it; where figures
    moved far beyond their noise, their means stand."""
    rng = np.random.default_rng(20261203)
    quiet = {f"c{i}": list(rng.normal(0.0, 0.03, 1)) for i in range(64)}
    sds = {k: 0.03 for k in quiet}
    shrunk = ab_judging.shrunk_means(quiet, sds)
    worst = min(quiet, key=lambda k: quiet[k][0])
    assert quiet[worst][0] < -0.05 and abs(shrunk[worst]) < abs(quiet[worst][0]) / 3
    moved = {f"c{i}": [(-0.2 if i % 2 else 0.2) + x for x in rng.normal(0.0, 0.03, 3)] for i in range(20)}
    stand = ab_judging.shrunk_means(moved, {k: 0.03 for k in moved})
    assert all(abs(stand[k] - sum(v) / 3) < 0.01 for k, v in moved.items())
    assert ab_judging.shrunk_means({"a": []}, {"a": 0.03}) == {}


def test_the_expected_pairs_step_and_call_as_next_look_and_decide_do():
    """``expected_pairs`` follows many paths at once (``_steps``, ``_called``); each path's step
    is ``next_look``'s and its call ``decide``'s, state by state, so that the two cannot drift
    apart."""
    eff, sd, max_pairs = math.log1p(0.05), 0.03, D.SEQUENTIAL_MAX_PAIRS
    for df in (2, 30, 200):
        c_r, c_u = sequential.boundaries(RULE["q"], D.ALPHA_PASS, max_pairs, df)
        means = np.linspace(-0.12, 0.12, 49)
        for n in (1, 2, 3, 5, 8, 17, 39, 40):
            s, ns = means * n, np.full(means.size, n)
            steps = D._steps(s, ns, sd, eff, np.full(means.size, c_r), np.full(means.size, c_u), max_pairs)
            called = D._called(s, ns, sd, eff, np.full(means.size, c_r), np.full(means.size, c_u), max_pairs)
            for m, step, call in zip(means, steps, called):
                signed = [float(m)] * n
                if n < max_pairs:
                    assert step == D.next_look(signed, sd, df, **RULE), (df, n, m)
                assert call == sequential.decide(signed, sd, df, min_effect=eff, alpha_regression=RULE["q"],
                                                 alpha_pass=D.ALPHA_PASS, max_pairs=max_pairs).decided, (df, n, m)


SERVING = "serving/resnet50_v2/b4/cpu:0/float32/threads=auto"


def test_a_kind_with_a_pair_cap_is_judged_as_it_stands_at_its_last_look():
    """A serving cell's pairs are whole LoadGen runs (a minute each for ResNet-50 v2 on 2 vCPUs):
    its kind caps them at what its pair budget holds (``Kind.pair_budget``), at least six. The
    same noisy pairs leave a zoo cell a suspect with looks to come and the serving figure final
    at its cap, judged as it stands: unchanged with its bound said when within its minimum
    effect, unresolved when worse."""
    latency = METRICS["serving_latency_ms"]
    cap = D.max_pairs_for(SERVING)                 # its pairs' cost not known: the least
    assert cap == 6 < D.max_pairs_for(KEY) == D.SEQUENTIAL_MAX_PAIRS
    assert D.max_pairs_for(SERVING + "#serving_p50_ms") == cap and D.max_pairs_for(SERVING, 4) == 4
    assert D.max_pairs_for(SERVING, pair_seconds=240.0) == 6 and D.max_pairs_for(SERVING, pair_seconds=40.0) == 18
    assert D.max_pairs_for(KEY, pair_seconds=240.0) == D.SEQUENTIAL_MAX_PAIRS
    noisy = [1.25, 0.8, 1.2, 0.85, 1.15, 0.9]                  # a queue's tail: +-20% a pair
    v = _judge({SERVING: _pairing(noisy, latency)}, sd=0.2)[SERVING]
    assert v.kind == "unchanged" and "after every pair it was planned" in v.reason and "at most" not in v.reason
    assert _judge({KEY: _pairing(noisy)}, sd=0.2)[KEY].kind == "suspect"
    worse = [r * 1.3 for r in noisy]                           # 30% slower, beyond the tail's 20%: not passed
    assert _judge({SERVING: _pairing(worse, latency)}, sd=0.2, min_effect=0.2)[SERVING].kind in ("unresolved",
                                                                                               "regression")
    # at its first look the rule's boundaries are its own cap's (fewer looks: lower boundaries)
    three = _judge({SERVING: _pairing(noisy[:3], latency)}, sd=0.2)[SERVING]
    assert three.kind == "suspect" and "of at most 6 pairs: its kind's least" in three.reason
    # pairs of 40 s: 12 min holds 18 of them, and six noisy pairs are a suspect with looks to come
    short = D.DuetPairing(latency, [math.log(r) for r in noisy], pair_seconds=40.0)
    v = _judge({SERVING: short}, sd=0.2)[SERVING]
    assert v.kind == "suspect" and "of at most 18 pairs: what 12 min holds of 40-s pairs" in v.reason
    c_serving = sequential.boundaries(0.05, D.ALPHA_PASS, cap, 200)[0]
    c_zoo = sequential.boundaries(0.05, D.ALPHA_PASS, D.SEQUENTIAL_MAX_PAIRS, 200)[0]
    assert c_serving < c_zoo


def test_a_capped_kinds_next_look_is_its_last():
    """``next_looks`` gives a suspect serving cell the pairs to its cap and calls that look
    final; a zoo cell with the same pairs gets its look and more after it."""
    from pytest_mxperf.measure.ledger import CellRecord
    from pytest_mxperf.model.measurement import CellMeasurement, RunResult
    from pytest_mxperf.model.workload import Workload

    def run(w, s):
        figures = {"serving_latency_ms": 1000 * s} if w.mode == "serving" else {}
        return RunResult(w, "ok", batches_per_round=1, round_seconds=[s] * 6, figures=figures, meta={"duet": {}})
    cells, known = {}, {}
    # each a suspect at its first look: the zoo cell 3% slower at a 5% spread, the serving cell's
    # tail (minimum effect 20%) 5% slower at a 25% spread
    for w, f, sd in ((Workload("alexnet", mode="score", batch_size=1), (1.0, 1.05, 0.95), 0.05),
                     (Workload("resnet50_v2", mode="serving", batch_size=4), (1.0, 1.3, 0.8), 0.25)):
        cells[w.key()] = CellRecord(w.mode, CellMeasurement(w, [run(w, 0.103 * x) for x in f],
                                                           [run(w, 0.100) for _ in range(3)]))
        known[w.key()] = sequential.Spread(sd ** 2 * 20, 20)
    score, serving = (Workload("alexnet", mode="score", batch_size=1).key(),
                      Workload("resnet50_v2", mode="serving", batch_size=4).key())
    assert serving == SERVING
    verdicts = ab_judging.judge_ab_once(cells, set(), 0.05, known=known)
    assert verdicts[score].kind == "suspect" and verdicts[serving].kind == "suspect"
    looks = ab_judging.next_looks(cells, verdicts, 0.05, known=known)
    assert looks(score) == (3, False) and looks(serving) == (3, True)
    assert looks.after(serving) == 0 < looks.after(score)


def test_a_serving_cells_cap_follows_its_first_pairs_cost_and_stays():
    """``next_looks`` caps a serving cell at what its pair budget holds of its first stage's
    pairs (their median wall): short pairs get looks past six; the cap is read from the first
    stage only, so slower pairs after it leave the cell's looks (and the rule's boundaries) where
    its first look put them."""
    from pytest_mxperf.measure import planning
    from pytest_mxperf.measure.ledger import CellRecord
    from pytest_mxperf.model.measurement import CellMeasurement, RunResult
    from pytest_mxperf.model.workload import Workload

    w = Workload("lenet", mode="serving", batch_size=4)

    def run(s, wall):
        return RunResult(w, "ok", batches_per_round=1, round_seconds=[s] * 2, figures={"serving_latency_ms": 1000 * s},
                         meta={"duet": {}}, wall_seconds=wall)

    def record(factors, walls):
        return {w.key(): CellRecord(w.mode, CellMeasurement(w, [run(0.010 * f, t) for f, t in zip(factors, walls)],
                                                            [run(0.010, t) for t in walls]))}
    known = {w.key(): sequential.Spread(0.25 ** 2 * 20, 20)}
    factors = (1.0, 1.3, 0.8, 1.25, 0.85, 1.2)
    for walls, cap in (((40.0, 41.0, 39.0), 18), ((240.0, 250.0, 230.0), 6)):
        cells = record(factors[:3], walls)
        assert planning.pair_seconds(cells[w.key()].cell, 3) == sorted(walls)[1]         # their median
        verdicts = ab_judging.judge_ab_once(cells, set(), 0.05, known=known)
        assert verdicts[w.key()].kind == "suspect" and f"of at most {cap} pairs" in verdicts[w.key()].reason
        n, final = ab_judging.next_looks(cells, verdicts, 0.05, known=known)(w.key())
        assert final == (cap == 6) and 3 + n <= cap
    # six pairs of 40 s then three of 400 s: the cap is still the first stage's (18), not 6
    cells = record(factors + (1.1, 0.9, 1.0), (40.0, 41.0, 39.0) + (400.0,) * 6)
    assert planning.pair_seconds(cells[w.key()].cell, 3) == 40.0
    assert planning.pair_seconds(cells[w.key()].cell) > 200.0           # what the deadline prices pairs at
    verdicts = ab_judging.judge_ab_once(cells, set(), 0.05, known=known)
    assert "of at most 18 pairs" in verdicts[w.key()].reason
