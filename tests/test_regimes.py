"""The A/B verdict of process pairs on recorded speed-regime data, not on simulated noise.

``benchmarks/data/vm-regimes-amd-epyc-2vcpu.json`` holds 12 back-to-back A/A pairs of one
cell (AlexNet b8, the same interpreter on both sides, order alternated) recorded on a
shared 2-vCPU VM that switches between two speed regimes at random: 146-173 and 93-98
img/s. None of those processes was slowed by another process, so the probe labels none of
them "slowed" and the verdict sees all of them.

Each simulated session is the product's end of a session (``benchmarks/replay_lib.py``:
``outcome.finish.end_session`` in A/B mode, the floor by ``Measurer.check_floor``) on
pairs drawn from those 12 recorded pairs, kept as pairs (a pair's two processes ran back
to back, in the same regime or not, as recorded); the candidate's figures are multiplied by
an effect. These cells carry no duet rounds, so they are judged as process pairs
(``judge/ab_pairs.py``'s fast-end rule), with ``stats.pairs_needed`` pairs and as many again
for a suspect, as the session does. What passes is "unchanged" or "improvement"; what fails
is "regression", "unresolved" (or the floor). The same sessions judged by the median of the
pair ratios (the exact signed-rank test and its Hodges-Lehmann interval, put in place of
``ab_pairs.judge_ab`` for the comparison only) show why the rule looks at the fast end.

Equal installs: a session fails (any failing kind) in at most FDR_Q (5%) of sessions, held on
enough sessions to support it (``benchmarks/error_claims.py``: 0 failures in at least 59
sessions, at most 1 in 93, at most 2 in 124, the one-sided 95% Clopper-Pearson bound); today's
rules miss it on these pairs, so that test is a strict xfail with the measured count
(``benchmarks/false_failures.py``, ``benchmarks/results/false-failures-2026-11-26.txt``). The
replayed session runs on its own clock (``replay_lib.ReplayClock``): fixed seeds give the same
sessions on any machine.
"""

import math
import random
import sys
from collections import Counter
from pathlib import Path
from unittest import mock

import pytest

from pytest_mxperf.judge import thresholds
from pytest_mxperf.judge.verdict_record import Verdict
from pytest_mxperf.model import stats as S
from pytest_mxperf.outcome import ab_judging

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import error_claims as E  # noqa: E402
import replay_lib  # noqa: E402

SESSIONS = 120
#: equal installs: the rule's count for up to 2 failing sessions (error_claims)
AA_SESSIONS = 124
SEED = 20261123

assert E.allowed(AA_SESSIONS) == 2



@pytest.fixture(scope="module")
def corpus():
    return replay_lib.load_regime_pairs()


def _pool(corpus):
    (pool,) = corpus.pools
    return [c["round_seconds"][0] for pair in pool.pairs for c in pair], pool.workload


#: (effect, n_cells) -> (the rng, the sessions replayed so far): the product's rule's sessions,
#: replayed once for the module's tests (the first k of a seed's sessions are the same whoever
#: asks for k)
_replayed = {}


def _sessions(corpus, effect, n_cells=1, sessions=SESSIONS, cache=True):
    """Kinds of the changed cell over ``sessions`` sessions of ``n_cells`` cells, how many
    sessions failed (any failing kind: regression, unresolved, floor), and how many failed by
    each kind. ``cache=False``: replayed afresh (another rule patched in)."""
    fresh = (random.Random(f"{SEED}-{effect}-{n_cells}"), [])
    rng, done = _replayed.setdefault((effect, n_cells), fresh) if cache else fresh
    while len(done) < sessions:
        done.append(replay_lib.ab_session(corpus, n_cells, effect, rng))
    kinds, failed, failing = Counter(), 0, Counter()
    for s in done[:sessions]:
        kinds[s.changed_kind] += 1
        failed += s.failed
        failing.update(s.kinds)
    return kinds, failed, failing


def _median_ratio_rule(cells, *, min_effect=thresholds.MIN_EFFECT, q=thresholds.FDR_Q):
    """The median-of-pair-ratios rule, for comparison (not the product's): signed-rank p and
    Hodges-Lehmann interval of the paired log ratios, per cell."""
    out = {}
    for key, p in cells.items():
        d = [math.log(c / r) for c, r in zip(p.candidate, p.reference)]
        pv = S.signed_rank_p(d, "less")
        hi = S.signed_rank_interval(d, q)[1]
        if S.hodges_lehmann(d) < -math.log1p(thresholds.effect_for(p.metric.name, min_effect, key)):
            kind = "regression" if pv <= q and hi < 0 else ("unresolved" if p.final else "suspect")
        else:
            kind = "unchanged"
        out[key] = Verdict(kind, "median pair ratio (comparison)", metric=p.metric.name, unit=p.metric.unit)
    return out


def _passed(kinds):
    return (kinds["unchanged"] + kinds["improvement"]) / SESSIONS


def test_the_recorded_pairs_are_two_regimes(corpus):
    seconds, w = _pool(corpus)
    pool = [w.total_batch / s for s in seconds]
    fast = [v for v in pool if v > 120]
    slow = [v for v in pool if v <= 120]
    assert len(fast) >= 8 and len(slow) >= 8
    assert max(slow) / min(fast) < 0.7  # the regimes do not overlap: not ordinary noise


def test_the_replayed_figures_are_the_recorded_ones(corpus):
    (pool,) = corpus.pools
    c, r = pool.pairs[0]
    run = replay_lib.make_run(pool.workload, c, pool.meta_common, 0.9)
    assert run.value("throughput") == pytest.approx(0.9 * pool.workload.total_batch / c["round_seconds"][0])
    assert "duet" not in run.meta and not pool.duet   # judged as process pairs


@pytest.mark.xfail(strict=True, raises=E.ClaimNotMet, reason=(
    "today's rules: 4 of 124 one-cell A/A sessions fail (3.2%, all unresolved; the rule allows 2 in 124); "
    "42 of 1000 (4.2%: 26 regression, 16 unresolved; at most 5.4% at 95%), and 8 of 124 sessions of 6 cells "
    "(6.5%), benchmarks/results/false-failures-2026-11-26.txt"))
def test_equal_installs_rarely_fail_on_regime_switching_data(corpus):
    kinds, failed, failing = _sessions(corpus, 1.00, sessions=AA_SESSIONS)
    print(f"\nA/A on recorded regimes, fast end, one cell: {dict(kinds)}, sessions failed {failed}/{AA_SESSIONS} "
          f"({dict(failing)})")
    E.hold(failed, AA_SESSIONS, f"equal installs, sessions failed (by kind: {dict(failing)})")


@pytest.mark.parametrize("effect, max_passed", [(0.76, 0.02), (0.90, 0.15)])
def test_a_slower_candidate_rarely_passes_on_regime_switching_data(corpus, effect, max_passed):
    """A 24% slowdown is a confirmed regression; a 10% one rarely passes, but with the pairs
    kept as recorded it is not always confirmed (seen 87 regressions, 19 "unresolved", which
    fails asking for a re-run, and 14 passed of 120): the fast ends of the pairs drawn from 12
    are not always significant where the pairs are."""
    kinds, _, _ = _sessions(corpus, effect)
    print(f"\nx{effect} on recorded regimes, fast end: {dict(kinds)}")
    assert _passed(kinds) <= max_passed
    if effect <= 0.76:
        assert kinds["regression"] == SESSIONS


def test_the_fast_end_beats_the_median_pair_ratio_on_this_data(corpus):
    """The reason the A/B verdict looks at the fast end: on the same sessions the median of
    the pair ratios lets more of a 24% slowdown pass (seen 11 of 120, the fast end none), and
    fails no fewer equal sessions (seen 22 of 120: 14 unresolved, 8 regressions; the fast end
    4, unresolved). (Drawn with the two sides independent, as this test once did, the median
    rule failed 12% of equal sessions against 3%.)"""
    fast_aa, fast_76 = _sessions(corpus, 1.00)[0], _sessions(corpus, 0.76)[0]
    with mock.patch.object(ab_judging.ab_pairs, "judge_ab", _median_ratio_rule):
        med_aa, med_76 = _sessions(corpus, 1.00, cache=False)[0], _sessions(corpus, 0.76, cache=False)[0]
    print(f"\nmedian pair ratio: A/A {dict(med_aa)}, x0.76 {dict(med_76)}; fast end: A/A {dict(fast_aa)}, "
          f"x0.76 {dict(fast_76)}")
    assert 1 - _passed(fast_aa) <= 1 - _passed(med_aa)
    assert _passed(fast_76) < _passed(med_76)


def test_fast_end_test_and_interval_agree(corpus):
    """The verdict is decided from the interval it shows: the upper end is below 0 exactly
    when the one-sided test rejects at that level (checked over random cases)."""
    rng = random.Random(7)
    seconds, w = _pool(corpus)
    pool = [w.total_batch / s for s in seconds]
    for _ in range(60):
        n = rng.randint(3, 10)
        effect = rng.uniform(0.7, 1.1)
        x = [math.log(rng.choice(pool) * effect) for _ in range(n)]
        y = [math.log(rng.choice(pool)) for _ in range(n)]
        alpha = rng.choice([0.05, 0.025, 0.01])
        p = S.fast_end_paired_p(y, x)
        hi = S.fast_end_paired_bound(x, y, alpha, "upper")
        assert (hi < 0) == (p <= alpha), (x, y, alpha, p, hi)
        lo = S.fast_end_paired_bound(x, y, alpha, "lower")
        assert lo <= max(x) - max(y) <= hi


def test_fast_end_p_has_the_signed_rank_floor():
    # n pairs can never give p below 2^-n (all candidates below all references)
    for n in (3, 6, 9):
        x = [math.log(50 + i) for i in range(n)]
        y = [math.log(100 + i) for i in range(n)]
        assert S.fast_end_paired_p(y, x) == pytest.approx(2.0 ** -n)
        assert S.fast_end_paired_p(x, y) == pytest.approx(1.0)
