"""The rule by which a count of replayed sessions supports a claim "at most 5% of sessions".

A claim that an event (an unchanged session fails; a changed cell is missed) happens in at
most ``rate`` of sessions is supported by ``k`` events in ``n`` sessions when ``n``
sessions at the rate ``rate`` would show ``k`` or fewer events with probability at most
``1 - confidence``: the one-sided Clopper-Pearson upper bound of the rate is at most
``rate``. For 5% at 95% confidence:

    0 events in at least 59 sessions, at most 1 in 93, at most 2 in 124, 3 in 153, 4 in 181

(0.95^59 = 0.0485; 0.95^58 = 0.0510). Fewer sessions than 59 support no such claim
whatever they show. The tests that hold the requirement (tests/test_error_rates.py,
test_regimes.py, test_replay.py) and benchmarks/false_failures.py use this rule.
"""

from __future__ import annotations

import math

RATE = 0.05
CONFIDENCE = 0.95


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(math.comb(n, i) * p ** i * (1.0 - p) ** (n - i) for i in range(k + 1))


def allowed(sessions: int, rate: float = RATE, confidence: float = CONFIDENCE) -> int:
    """The most events ``sessions`` sessions may show and still support "at most ``rate``";
    -1 when they are too few to support it at all."""
    k = -1
    while k + 1 <= sessions and binom_cdf(k + 1, sessions, rate) <= 1.0 - confidence:
        k += 1
    return k


def sessions_needed(events: int, rate: float = RATE, confidence: float = CONFIDENCE) -> int:
    """The fewest sessions in which ``events`` events support "at most ``rate``"."""
    n = events + 1
    while binom_cdf(events, n, rate) > 1.0 - confidence:
        n += 1
    return n


def supports(events: int, sessions: int, rate: float = RATE, confidence: float = CONFIDENCE) -> bool:
    return events <= allowed(sessions, rate, confidence)


def upper_bound(events: int, sessions: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided Clopper-Pearson upper bound of the rate (bisection on binom_cdf)."""
    if events >= sessions:
        return 1.0
    lo, hi = events / sessions, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if binom_cdf(events, sessions, mid) > 1.0 - confidence:
            lo = mid
        else:
            hi = mid
    return hi


class ClaimNotMet(AssertionError):
    """A count that does not support its claim: what a test marked
    ``xfail(strict=True, raises=ClaimNotMet)`` expects, and nothing else (any other failed
    assertion of such a test is a failure)."""


def hold(events: int, sessions: int, what: str) -> None:
    """Raise ClaimNotMet unless ``events`` in ``sessions`` support "at most 5%"."""
    if not supports(events, sessions):
        raise ClaimNotMet(f"{what}: {claim(events, sessions)}; the rule allows "
                          + (f"at most {allowed(sessions)} in {sessions}" if sessions >= sessions_needed(0)
                             else f"no claim on fewer than {sessions_needed(0)}"))


def claim(events: int, sessions: int) -> str:
    """'3 of 124 (2.4%; at most 6.1% at 95%)': what a count says, for a row or a reason."""
    return (f"{events} of {sessions} ({100 * events / sessions:.1f}%; at most "
            f"{100 * upper_bound(events, sessions):.1f}% at {100 * CONFIDENCE:.0f}% confidence)")
