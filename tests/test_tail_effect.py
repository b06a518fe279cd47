"""A tail figure (a latency cell's p99) is judged at its own minimum effect, and its spread
never sizes the other cells' second stage.

Seen in a daily-gate session (benchmarks/results/daily-gate-2026-11-26.txt): the latency
cells' duet pairs spread 12.9-31.4% in p99 where their rounds spread 3.5-4.9%; pooled with the
rounds' spread, the p99s asked every suspect of the session (training MLP b256 too) for the
most pairs a cell gets (40), and 22 of the session's 27 minutes went to settling.
"""

import math

import pytest

from pytest_mxperf.judge import ab_pairs, verdict_duet
from pytest_mxperf.judge import verdict as vd
from pytest_mxperf.judge.thresholds import MIN_EFFECT, TAIL_MIN_EFFECT, effect_for
from pytest_mxperf.measure.session import CellRecord
from pytest_mxperf.model.measurement import METRICS, CellMeasurement, RunResult
from pytest_mxperf.model.workload import Workload
from pytest_mxperf.outcome import ab_judging

P99, P50, THROUGHPUT = METRICS["latency_p99_ms"], METRICS["latency_p50_ms"], METRICS["throughput"]


def test_a_tail_is_judged_at_the_wider_effect_and_other_figures_at_the_sessions():
    assert TAIL_MIN_EFFECT > MIN_EFFECT
    assert effect_for("latency_p99_ms", 0.05) == TAIL_MIN_EFFECT
    assert effect_for("latency_p99_ms", 0.30) == 0.30      # a wider session's effect stands
    assert effect_for("latency_p50_ms", 0.05) == 0.05
    assert effect_for("throughput", 0.05) == 0.05


def _duet(metric, worse_by, final=True, n=12):
    """n duet pairs of ``metric`` each worse by ``worse_by`` (log), +-1% about it."""
    sign = -1.0 if metric.higher_is_better else 1.0
    return verdict_duet.DuetPairing(metric, [sign * (worse_by + 0.01 * ((-1) ** i)) for i in range(n)], final=final)


def _judge(cells):
    return verdict_duet.judge_duet_sequential(cells, ab_judging.pooled_spreads(cells, {}), min_effect=0.05)


def test_a_duet_calls_ten_percent_a_regression_in_the_rounds_and_p50_but_not_in_the_tail():
    v = _judge({"thr": _duet(THROUGHPUT, 0.10), "p50": _duet(P50, 0.10), "p99": _duet(P99, 0.10)})
    assert v["thr"].kind == "regression" and v["p50"].kind == "regression"
    assert v["p99"].kind == "unchanged" and v["p99"].threshold == TAIL_MIN_EFFECT
    # beyond the tail's effect, the tail is a regression too
    v = _judge({"p99": _duet(P99, math.log(1.35))})
    assert v["p99"].kind == "regression" and "worse than -20%" in v["p99"].reason


def test_process_pairs_judge_the_tail_at_the_wider_effect():
    cand = [10.0 * 1.10 * (1 + 0.002 * i) for i in range(6)]   # ms: 10% slower, every pair
    ref = [10.0 * (1 + 0.002 * i) for i in range(6)]
    out = ab_pairs.judge_ab({"p99": ab_pairs.Pairing(P99, cand, ref, final=True),
                             "p50": ab_pairs.Pairing(P50, cand, ref, final=True)}, min_effect=0.05)
    assert out["p50"].kind != "unchanged"
    assert out["p99"].kind == "unchanged" and out["p99"].threshold == TAIL_MIN_EFFECT


def test_against_a_baseline_the_tail_is_judged_at_the_wider_effect():
    base = [10.0, 10.1, 9.9, 10.05, 9.95, 10.0, 10.02]
    now = [x * 1.10 for x in base]
    v99 = vd.judge(now, base, metric="latency_p99_ms", confirmed=True)
    v50 = vd.judge(now, base, metric="latency_p50_ms", confirmed=True)
    assert v99.threshold is not None and v99.threshold >= TAIL_MIN_EFFECT
    assert v99.kind == "unchanged"
    assert v50.kind != "unchanged"


LATENCY = Workload("lenet", mode="latency", batch_size=1)
SCORE = Workload("alexnet", mode="score", batch_size=8)


def _run(w, seconds, figures=None):
    return RunResult(w, "ok", batches_per_round=1, round_seconds=seconds, figures=figures or {}, meta={"duet": {}})


def _cells():
    """Three duet pairs each of a score cell (its rounds within 1% of each other) and of a
    latency cell whose rounds are as steady but whose p99 swings by a third from pair to pair."""
    score = CellMeasurement(SCORE, [_run(SCORE, [0.10 * (1 + 0.01 * j)] * 6) for j in (0, 1, -1)],
                            [_run(SCORE, [0.10] * 6) for _ in range(3)])
    tails = (1.4, 0.7, 1.1)
    lat = CellMeasurement(
        LATENCY,
        [_run(LATENCY, [0.15] * 6, {"latency_p50_ms": 0.30, "latency_p99_ms": 20.0 * t}) for t in tails],
        [_run(LATENCY, [0.15] * 6, {"latency_p50_ms": 0.30, "latency_p99_ms": 20.0}) for _ in tails])
    return {SCORE.key(): CellRecord("s", score), LATENCY.key(): CellRecord("l", lat)}


def test_the_tails_spread_does_not_widen_the_other_cells_nor_size_their_looks():
    cells = _cells()
    duets = ab_judging._ab_inputs(cells, set())[2]
    spreads = ab_judging.pooled_spreads(duets, {})
    by = {(mk.split("/")[0], d.metric.name): mk for mk, d in duets.items()}
    score, p99 = by[("score", "throughput")], by[("latency", "latency_p99_ms")]
    # the score cell is judged at the rounds' spread (its own 1%), never at the p99s' (a third)
    assert spreads[score].sd < 0.02 < 0.2 < spreads[p99].sd
    verdicts = ab_judging.judge_ab_once(cells, set(), 0.05)
    looks = ab_judging.next_looks(cells, verdicts, 0.05)
    assert verdicts[score].kind == "unchanged" and looks(SCORE.key()) == (0, True)
    # the latency cell is not called on its tail yet: its next look, at most as many pairs again
    assert verdicts[p99].kind == "suspect"
    n, last = looks(LATENCY.key())
    assert 1 <= n <= verdict_duet.STAGE1_PAIRS and not last


def test_spread_families():
    fam = ab_judging.spread_family
    assert fam(THROUGHPUT, "score/a/b1") == fam(THROUGHPUT, "score/b/b8") == "rounds/score"
    assert fam(THROUGHPUT, "train/a/b8") == "rounds/train" and fam(METRICS["comm_seconds"], "kvstore/a") == "rounds/kvstore"
    assert fam(P99, "latency/a/b1") == "latency_p99_ms" != fam(P50, "latency/a/b1#latency_p50_ms")
    # a history row is read by its figure key alone; a family's own row names no figure
    assert verdict_duet.family_of_key("score/a/b1") == "rounds/score"
    assert verdict_duet.family_of_key("latency/a/b1") == "latency_p99_ms"
    assert verdict_duet.family_of_key("latency/a/b1#latency_p50_ms") == "latency_p50_ms"
    assert verdict_duet.family_of_key("rounds/score") is None and verdict_duet.family_of_key("rounds") is None
