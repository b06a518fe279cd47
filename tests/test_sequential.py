"""The pair-by-pair rule (judge/sequential.py): Pocock's boundaries against published values,
and its error rates, spent across looks, checked by simulating the rule itself."""

import math

import numpy as np
import pytest

from pytest_mxperf.judge import sequential


@pytest.mark.parametrize("looks,published", [(2, 2.178), (5, 2.413), (10, 2.555)])
def test_pocock_matches_the_published_constants(looks, published):
    # Pocock (1977), two-sided 5% (each side 2.5%; the two sides' joint crossings are negligible)
    assert abs(sequential.pocock(0.025, looks) - published) < 0.01
    assert abs(sequential.crossing_probability(published, looks) - 0.025) < 0.0005


def test_one_look_is_the_fixed_design():
    assert abs(sequential.pocock(0.05, 1) - 1.6449) < 1e-3


def test_a_pooled_spread_adds_cells_and_sessions():
    a = sequential.Spread.of([[0.01, -0.01], [0.0, 0.02, 0.04], [0.3]])
    assert a.df == 3 and abs(a.ss - (0.0002 + 0.0008)) < 1e-12
    assert (a + sequential.Spread(0.001, 2)).df == 5
    assert sequential.Spread().sd is None


RULE = dict(min_effect=0.05, alpha_regression=0.05 / 24, alpha_pass=0.05, max_pairs=12)


def _simulate(true_change, sd, n=4000, seed=1, **rule):
    rng = np.random.default_rng(seed)
    kinds, looks = [], []
    for _ in range(n):
        xs = list(true_change + sd * rng.standard_normal(rule["max_pairs"]))
        call, _ = sequential.first_call(xs, sd, None, **rule)
        kinds.append(call.kind)
        looks.append(call.look)
    return kinds, looks


def test_an_unchanged_cell_is_called_a_regression_at_most_as_often_as_its_share_of_the_budget():
    kinds, looks = _simulate(0.0, 0.03, **RULE)
    false = kinds.count("regression") / len(kinds)
    assert false <= RULE["alpha_regression"], false
    assert kinds.count("unchanged") / len(kinds) > 0.98
    # most stop within a few pairs at a 3% pair spread
    assert np.median(looks) <= 4, np.median(looks)


def test_a_cell_at_the_minimum_effect_is_passed_at_most_alpha_pass_of_the_time():
    kinds, _ = _simulate(math.log(0.95), 0.03, **RULE)
    passed = kinds.count("unchanged") / len(kinds)
    assert passed <= RULE["alpha_pass"], passed
    assert passed > RULE["alpha_pass"] / 4, passed  # spent, not thrown away


def test_a_ten_percent_slowdown_is_called_a_regression_within_a_few_pairs():
    kinds, looks = _simulate(math.log(0.90), 0.03, **RULE)
    assert kinds.count("regression") / len(kinds) >= 0.99
    assert kinds.count("unchanged") == 0
    assert np.median(looks) <= 3, np.median(looks)


def test_the_last_look_says_unresolved_where_worse_than_the_minimum_effect():
    call = sequential.decide([-0.07, -0.02, -0.08], 0.2, None, last=True, **RULE)
    assert call.kind == "unresolved" and call.look == 3
    call = sequential.decide([-0.01, 0.02], 0.2, None, last=False, **RULE)
    assert call.kind is None


def test_few_degrees_of_freedom_widen_the_boundary():
    c = sequential.pocock(0.05, 12)
    assert sequential.widened(c, 5) > sequential.widened(c, 50) > c
    assert sequential.widened(c, None) == c == sequential.widened(c, sequential.Z_DF)
