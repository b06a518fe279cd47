"""A cell judged pair by pair: a group-sequential rule with its error spent across looks.

A cell's duet pairs give log ratios (signed: > 0 better); the spread between pairs is mostly
the machine's, so it is known far better from every pair of the same kind of figure (this
session's and this machine's earlier sessions') than from one cell's few pairs: ``Spread``.
With that spread ``s`` the rule looks after every pair, from the first, at the mean ``m`` of
the cell's ``n`` pairs and its standard error ``s / sqrt(n)``:

* **regression**: ``m`` worse than the minimum effect and ``m + c_R x se < 0``;
* **improvement**: ``m`` better than the minimum effect and ``m - c_R x se > 0``;
* **unchanged**: ``m - c_U x se > -min_effect`` (its bound clears the minimum effect);
* else one more pair, up to ``max_pairs``; a cell that reaches it without a call is judged as
  it stands (``decide(..., last=True)``: unresolved where worse than the minimum effect).

``c_R`` and ``c_U`` are Pocock's constant boundaries (``pocock``): the one value that, looked
at after each of ``max_pairs`` pairs, is crossed with probability ``alpha`` in all when the
null holds (a Gaussian random walk, computed by the recursion of Armitage, McPherson and Rowe,
1969), so the error rates are those of the sequential rule, not of a fixed design. ``c_R`` is
spent at ``alpha_regression`` (the session's false-alarm budget shared among its cells); ``c_U``
at ``alpha_pass`` (the chance that a cell truly at the minimum effect is passed). With fewer
degrees of freedom behind the spread than ``Z_DF`` the boundary is widened by Student's t
against the normal at the same level. Pure.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Iterable, Optional, Sequence, Tuple

#: degrees of freedom of a pooled spread from which the boundaries are the normal's
Z_DF = 200
#: the grid step (in standard deviations of one pair) of the boundary recursion
GRID_STEP = 0.01


@functools.lru_cache(maxsize=256)
def crossing_probability(c: float, looks: int) -> float:
    """P(a standard Gaussian random walk S_k, looked at k = 1..``looks``, ever has
    S_k < -c sqrt(k)): one side of Pocock's boundary, by recursion on a grid."""
    import numpy as np
    from scipy.signal import fftconvolve
    from scipy.stats import norm

    h = GRID_STEP
    grid = np.arange(-c * math.sqrt(looks) - 8.0, 8.0 * math.sqrt(looks) + 8.0 + h, h)
    kernel = norm.pdf(np.arange(-8.0, 8.0 + h / 2, h)) * h
    crossed = float(norm.cdf(-c))  # the first look, exactly: S_1 ~ N(0, 1)
    density = np.where(grid < -c, 0.0, norm.pdf(grid))
    for k in range(2, looks + 1):
        density = np.clip(fftconvolve(density, kernel, mode="same"), 0.0, None)
        below = grid < -c * math.sqrt(k)
        crossed += float(density[below].sum() * h)
        density = np.where(below, 0.0, density)
    return min(1.0, crossed)


@functools.lru_cache(maxsize=256)
def pocock(alpha: float, looks: int) -> float:
    """The constant ``c`` whose one-sided boundary, looked at after each of ``looks`` pairs, is
    crossed with probability ``alpha`` under the null (bisection on ``crossing_probability``)."""
    from scipy.stats import norm
    if looks <= 1:
        return float(norm.isf(alpha))
    lo, hi = float(norm.isf(alpha)), float(norm.isf(alpha / looks))  # Pocock lies between these
    for _ in range(40):
        mid = (lo + hi) / 2
        if crossing_probability(round(mid, 6), looks) > alpha:
            lo = mid
        else:
            hi = mid
    return hi


@functools.lru_cache(maxsize=4096)
def widened(c: float, df: Optional[float]) -> float:
    """``c`` for a spread estimated with ``df`` degrees of freedom: scaled by Student's t
    against the normal at the one-sided level ``c`` has."""
    if df is None or df >= Z_DF:
        return c
    from scipy.stats import norm, t
    return float(c * t.isf(norm.sf(c), max(1.0, df)) / c)


@functools.lru_cache(maxsize=4096)
def boundaries(alpha_regression: float, alpha_pass: float, max_pairs: int, df: Optional[float]
               ) -> Tuple[float, float]:
    """(``c_R``, ``c_U``): the rule's boundaries for ``max_pairs`` looks at a spread of ``df``
    degrees of freedom (the module doc)."""
    return widened(pocock(alpha_regression, max_pairs), df), widened(pocock(alpha_pass, max_pairs), df)


@dataclasses.dataclass(frozen=True)
class Spread:
    """A pooled spread of pair log ratios: the within-cell sum of squares and its degrees of
    freedom, added up over cells (and sessions)."""

    ss: float = 0.0
    df: int = 0

    @property
    def sd(self) -> Optional[float]:
        return math.sqrt(self.ss / self.df) if self.df else None

    def __add__(self, other: "Spread") -> "Spread":
        return Spread(self.ss + other.ss, self.df + other.df)

    def agrees_with(self, other: "Spread", p: float, min_df: int) -> bool:
        """Whether ``other`` (this machine's history of the same kind) may be pooled with this
        spread (a session's): yes unless both have at least ``min_df`` degrees of freedom and the
        two-sided F test of their variances rejects their equality at level ``p``."""
        if self.df < min_df or other.df < min_df or not self.ss or not other.ss:
            return True
        from scipy.stats import f
        ratio = (self.ss / self.df) / (other.ss / other.df)
        tail = f.sf(ratio, self.df, other.df) if ratio > 1 else f.cdf(ratio, self.df, other.df)
        return 2 * tail >= p

    @classmethod
    def of(cls, cells: Iterable[Sequence[float]]) -> "Spread":
        """The pooled spread of cells' log ratios (a cell with fewer than two adds nothing)."""
        ss, df = 0.0, 0
        for xs in cells:
            d = [float(x) for x in xs if x is not None and math.isfinite(float(x))]
            if len(d) >= 2:
                m = sum(d) / len(d)
                ss += sum((x - m) ** 2 for x in d)
                df += len(d) - 1
        return cls(ss, df)


@dataclasses.dataclass(frozen=True)
class Call:
    """What the rule says of a cell after its pairs: ``kind`` "regression", "improvement",
    "unchanged", or None (one more pair), "unresolved" (the last look, worse than the minimum
    effect, not significant); at ``look`` (its pairs), with the mean, its standard error and the
    bounds used."""

    kind: Optional[str]
    look: int
    mean: float
    se: float
    c_regression: float
    c_pass: float

    @property
    def decided(self) -> bool:
        return self.kind is not None


def decide(signed: Sequence[float], sd: float, df: Optional[float], *, min_effect: float, alpha_regression: float,
           alpha_pass: float, max_pairs: int, last: bool = False) -> Call:
    """The rule (module doc) after the pairs ``signed`` (log ratios, > 0 better, in the order
    measured), at spread ``sd`` with ``df`` degrees of freedom; ``last``: no more pair will be
    measured (the cell reached ``max_pairs`` or the deadline). Only the newest look decides:
    ``first_call`` finds the look a sequence was called at."""
    d = [float(x) for x in signed]
    n = len(d)
    if n == 0:
        return Call(None, 0, 0.0, math.inf, math.inf, math.inf)
    c_r, c_u = boundaries(alpha_regression, alpha_pass, max_pairs, df)
    m = sum(d) / n
    se = max(sd, 1e-9) / math.sqrt(n)
    kind: Optional[str] = None
    if m < -min_effect and m + c_r * se < 0:
        kind = "regression"
    elif m > min_effect and m - c_r * se > 0:
        kind = "improvement"
    elif m - c_u * se > -min_effect:
        kind = "unchanged"
    elif last or n >= max_pairs:
        kind = "unresolved" if m < -min_effect else "unchanged-imprecise"
    return Call(kind, n, m, se, c_r, c_u)


def first_call(signed: Sequence[float], sd: float, df: Optional[float], **rule) -> Tuple[Call, int]:
    """The rule applied look by look to ``signed`` (in the order measured): the first look that
    calls it, or the newest look's (undecided) state; with the pairs after that call (which a
    cell measured in the same round as the deciding pair may have)."""
    call = decide([], sd, df, **rule)
    for k in range(1, len(signed) + 1):
        call = decide(signed[:k], sd, df, **rule)
        if call.decided:
            return call, len(signed) - k
    return call, 0
