"""Pure statistics: no decisions, no I/O, no MXNet. Every function takes plain numbers.

The decisions built on these (what is a regression) live in ``verdict.py``; here are the
tools: quantiles, a robust spread, the one-sided Mann-Whitney U test on per-process
figures (baseline mode), the exact Wilcoxon signed-rank test and its Hodges-Lehmann
interval on paired log ratios (A/B mode), and Benjamini-Hochberg across a session's cells.
"""

from __future__ import annotations

import functools
import math
import statistics
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

MAD_TO_SD = 1.4826       # MAD x this = SD for normal data
MEDIAN_SE = 1.2533       # SE of a median of n normal values = this x SD / sqrt(n)


def _finite_positive_number(v: object) -> bool:
    """Whether ``v`` is one finite positive number (a bool is not): ``finite_positive`` of one."""
    if isinstance(v, bool):
        return False
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return math.isfinite(f) and f > 0


def finite_positive(values: Iterable[object]) -> List[float]:
    """The values that are finite positive numbers, as floats (the rest dropped)."""
    out = []
    for v in values or ():
        if type(v) is float:  # most of them: what float() and isfinite would say, at once (NaN fails)
            if 0.0 < v < math.inf:
                out.append(v)
            continue
        if isinstance(v, bool):
            continue
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f) and f > 0:
            out.append(f)
    return out


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default), without numpy."""
    xs = sorted(values)
    if not xs:
        raise ValueError("quantile of no values")
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def iqr_spread(values: Sequence[float]) -> dict:
    """{"n", "q1", "q3", "rel"}: rel = (q3 - q1) / median, shown as +-rel/2."""
    q1, q3 = quantile(values, 0.25), quantile(values, 0.75)
    med = statistics.median(values)
    return {"n": len(values), "q1": q1, "q3": q3, "rel": (q3 - q1) / med if med else None}


def robust_rel_sd(values: Sequence[float]) -> Optional[float]:
    """1.4826 x MAD / median (None with fewer than 3 values or a non-positive median)."""
    if len(values) < 3:
        return None
    med = statistics.median(values)
    if med <= 0:
        return None
    mad = statistics.median(abs(v - med) for v in values)
    return MAD_TO_SD * mad / med


def noise_allowance(baseline: Sequence[float], n_current: int, z: float) -> Optional[float]:
    """How far (fraction) a median of ``n_current`` processes may move by chance, given the
    baseline's between-process spread: z x 1.2533 x s x sqrt(1/n_base + 1/n_cur)."""
    s = robust_rel_sd(baseline)
    if s is None or n_current < 1:
        return None
    return z * MEDIAN_SE * s * math.sqrt(1.0 / len(baseline) + 1.0 / n_current)


def mannwhitney_p(current: Sequence[float], baseline: Sequence[float], alternative: str) -> Optional[float]:
    """One-sided Mann-Whitney U p-value that ``current`` is stochastically less/greater."""
    if not current or not baseline:
        return None
    current, baseline = tuple(map(float, current)), tuple(map(float, baseline))
    u = _u_without_ties(current, baseline)
    if u is None:
        return _mannwhitney_p(current, baseline, alternative)
    # without ties scipy's p (exact or normal) is a function of the sizes and U alone: asked
    # once per (n1, n2, U, alternative), with these values as the first that gave it
    key = (len(current), len(baseline), u, alternative)
    p = _P_BY_U.get(key)
    if p is None:
        if len(_P_BY_U) >= 1 << 16:
            _P_BY_U.clear()
        p = _P_BY_U[key] = _mannwhitney_p(current, baseline, alternative)
    return p


#: Mann-Whitney p-values of samples without ties, by (n1, n2, U of the first, alternative)
_P_BY_U: Dict[Tuple[int, int, float, str], float] = {}


def _u_without_ties(current: Tuple[float, ...], baseline: Tuple[float, ...]) -> Optional[float]:
    """The Mann-Whitney U of ``current`` (its rank sum less n1(n1+1)/2), or None when the values
    are not all distinct (ties: scipy's tie correction depends on more than U)."""
    both = current + baseline
    if not all(map(math.isfinite, both)):
        return None
    rank = {v: i for i, v in enumerate(sorted(both), 1)}
    if len(rank) != len(both):
        return None
    n1 = len(current)
    return float(sum(rank[v] for v in current) - n1 * (n1 + 1) // 2)


@functools.lru_cache(maxsize=1 << 16)
def _mannwhitney_p(current: Tuple[float, ...], baseline: Tuple[float, ...], alternative: str) -> float:
    """``mannwhitney_p`` of values as tuples, kept: a session judges the same processes again
    after each cell and after each confirmation (a replayed error-rate study asked 24952 times
    for 6770 distinct inputs)."""
    if len(set(current) | set(baseline)) == 1:
        return 1.0
    from scipy.stats import mannwhitneyu
    try:
        # scipy's own test without its nan-policy wrapper (``_no_deco``; these values are
        # finite): the same p-value in a third of the time, which matters to the replayed
        # error-rate studies (tens of thousands of calls); a scipy without it: the wrapper
        return float(mannwhitneyu(list(current), list(baseline), alternative=alternative, _no_deco=True).pvalue)
    except TypeError:
        return float(mannwhitneyu(list(current), list(baseline), alternative=alternative).pvalue)


def min_mannwhitney_p(n1: int, n2: int) -> float:
    """Smallest one-sided exact Mann-Whitney p with n1 and n2 values: 1 / C(n1 + n2, n1)."""
    if n1 < 1 or n2 < 1:
        return 1.0
    return 1.0 / math.comb(n1 + n2, n1)


def benjamini_hochberg(pvalues: Sequence[Optional[float]]) -> List[Optional[float]]:
    """BH-adjusted p-values (q-values), same order; None stays None (not counted in m)."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(idx)
    out: List[Optional[float]] = [None] * len(pvalues)
    if not m:
        return out
    order = sorted(idx, key=lambda i: pvalues[i])
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, pvalues[i] * m / rank)
        out[i] = min(1.0, running)
    return out


def bh_rejection_level(pvalues: Sequence[Optional[float]], q: float) -> float:
    """The BH step-up cutoff: the largest (k/m) q with p_(k) <= (k/m) q, or q/m if none.

    A cell is significant at FDR q iff its raw p is <= this level; an interval at
    confidence 1 - level (one-sided) therefore agrees with the BH decision."""
    ps = sorted(p for p in pvalues if p is not None)
    m = len(ps)
    if not m:
        return q
    level = q / m
    for k, p in enumerate(ps, start=1):
        if p <= k * q / m:
            level = k * q / m
    return level


# ----------------------------------------------------------------------------- paired (A/B)

def _signed_rank_null(n: int) -> List[int]:
    """counts[w] = number of sign patterns of ranks 1..n whose positive-rank sum is w."""
    counts = [1]
    for r in range(1, n + 1):
        new = counts + [0] * r
        for w, c in enumerate(counts):
            new[w + r] += c
        counts = new
    return counts


def signed_rank_p(diffs: Sequence[float], alternative: str) -> Optional[float]:
    """Exact one-sided Wilcoxon signed-rank p-value for ``diffs`` (zeros dropped, ties get
    mid-ranks and the exact null of untied ranks, which is conservative enough here).

    ``alternative="less"``: the differences are shifted below 0. The smallest p over n
    non-zero differences is 2^-n: n pairs can never give a smaller one."""
    d = [x for x in diffs if x != 0 and math.isfinite(x)]
    n = len(d)
    if n == 0:
        return None
    order = sorted(range(n), key=lambda i: abs(d[i]))
    ranks = [0.0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and abs(d[order[j + 1]]) == abs(d[order[i]]):
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    w_plus = sum(r for r, x in zip(ranks, d) if x > 0)
    counts = _signed_rank_null(n)
    total = 2 ** n
    if alternative == "less":
        tail = sum(c for w, c in enumerate(counts) if w <= w_plus + 1e-9)
    elif alternative == "greater":
        tail = sum(c for w, c in enumerate(counts) if w >= w_plus - 1e-9)
    else:
        raise ValueError(f"alternative must be 'less' or 'greater', got {alternative!r}")
    return tail / total


def min_signed_rank_p(n: int) -> float:
    return 2.0 ** -n if n > 0 else 1.0


#: pairs beyond the fewest that could reach significance at all, so that a few pairs measured
#: across a change of the machine's speed regime do not block a call: with one extra pair a 10%
#: slower candidate passed unflagged twice as often as with three (docs/upgrade-gate.md,
#: "Gating an MXNet upgrade", the process pairs' count).
AB_EXTRA_PAIRS = 3


def pairs_needed(cells: int, q: float, extra: int = AB_EXTRA_PAIRS) -> int:
    """Pairs per cell so that one cell among ``cells`` can pass BH at rate q on its own:
    2^-n <= q / cells (the smallest p of n pairs, for the signed-rank test and for the
    fast-end sign-flip test alike), plus ``extra`` so that a few pairs measured across a
    change of the machine's speed regime do not block it."""
    cells = max(1, cells)
    return max(3, math.ceil(math.log2(cells / q)) + extra)


def hodges_lehmann(diffs: Sequence[float]) -> Optional[float]:
    """The median of the Walsh averages (x_i + x_j) / 2, i <= j: the signed-rank estimate."""
    d = [x for x in diffs if math.isfinite(x)]
    if not d:
        return None
    walsh = [(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))]
    return statistics.median(walsh)


def signed_rank_interval(diffs: Sequence[float], alpha_one_sided: float) -> Tuple[Optional[float], Optional[float]]:
    """The interval of shifts not rejected by the exact one-sided signed-rank test at level
    ``alpha_one_sided`` on either side (a 1 - 2 alpha two-sided interval): the k-th smallest
    and k-th largest Walsh averages, k - 1 the largest w with P(W+ <= w) <= alpha. Since W+
    at shift t is the number of Walsh averages above t, the upper end is below 0 exactly
    when the one-sided test rejects "no slowdown" at that level (test and interval agree).

    When n is too small for any k, the interval is the whole range of Walsh averages
    widened to infinity on both ends (returned as (-inf, inf))."""
    d = [x for x in diffs if math.isfinite(x)]
    n = len(d)
    if n == 0:
        return None, None
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    counts = _signed_rank_null(n)
    total = 2 ** n
    cum, k = 0, 0
    for w, c in enumerate(counts):
        if (cum + c) / total > alpha_one_sided:
            break
        cum += c
        k = w + 1  # P(W+ <= w) <= alpha  ->  exclude the w + 1 smallest Walsh averages
    if k == 0:
        return -math.inf, math.inf
    return walsh[k - 1], walsh[len(walsh) - k]


# ----------------------------------------------------------------------------- paired, fast end

#: up to this many pairs the sign-flip distribution is enumerated exactly (2^n patterns);
#: beyond it, FLIP_DRAWS patterns are drawn with a fixed seed (plus the observed one)
EXACT_FLIPS_UP_TO = 12
FLIP_DRAWS = 1 << 13
_FLIPS: dict = {}


def _flip_patterns(n: int):
    """Boolean matrix, one row per swap pattern of n pairs (row 0: nothing swapped)."""
    import numpy as np

    if n not in _FLIPS:
        if n <= EXACT_FLIPS_UP_TO:
            bits = np.arange(1 << n, dtype=np.int64)[:, None] >> np.arange(n)[None, :]
            _FLIPS[n] = (bits & 1).astype(bool)
        else:
            rng = np.random.default_rng(20261123 + n)
            draws = rng.random((FLIP_DRAWS, n)) < 0.5
            _FLIPS[n] = np.vstack([np.zeros((1, n), dtype=bool), draws])
    return _FLIPS[n]


def fast_end_paired_p(better: Sequence[float], worse: Sequence[float], shift: float = 0.0) -> Optional[float]:
    """One-sided paired permutation p-value that the fast end of ``better`` is above the
    fast end of ``worse``, shifted: H0 is that ``better[i] - shift`` and ``worse[i]`` are
    exchangeable within each pair i (values in log space, larger is faster).

    The statistic is the difference of the two sides' maxima: the fastest process of each
    side, the process-level form of Chen and Revels' minimum-time estimator. Interference
    (a neighbour, a slow spell of a shared VM) only ever slows a process down, so it moves
    the maxima least; a slower release moves every process, the fastest too. The null
    distribution swaps the two members of each pair (the order inside a pair was alternated,
    so under H0 either member could have been either side). With n pairs the smallest p is
    2^-n, as for the signed-rank test."""
    ends = _FastEnds.of(better, worse)
    return None if ends is None else ends.p(shift)


class _FastEnds:
    """The maxima ``fast_end_paired_p`` takes of each swap pattern, split by side and by
    swapped or not, so that the statistic at any shift is a few vector operations: with F the
    swapped pairs, max(where(F, w, b - s)) is max(max of w over F, max of b off F - s), the
    same floating-point value (subtracting s keeps the order); a bound's bisection asks ~19
    shifts of the same pairs."""

    @classmethod
    def of(cls, better: Sequence[float], worse: Sequence[float]) -> Optional["_FastEnds"]:
        """Those of the pairs ``better[i]``, ``worse[i]``; None when there are none (no values,
        or two sides of different lengths)."""
        import numpy as np
        if len(better) == 0 or len(better) != len(worse):
            return None
        return cls(np.asarray(better, dtype=float), np.asarray(worse, dtype=float))

    def __init__(self, b, w):
        import numpy as np
        flips = _flip_patterns(len(b))
        self.w_on = np.where(flips, w, -np.inf).max(axis=1)
        self.b_off = np.where(flips, -np.inf, b).max(axis=1)
        self.b_on = np.where(flips, b, -np.inf).max(axis=1)
        self.w_off = np.where(flips, -np.inf, w).max(axis=1)
        self.b_max, self.w_max = float(b.max()), float(w.max())

    def p(self, shift: float) -> float:
        import numpy as np
        t = np.maximum(self.w_on, self.b_off - shift) - np.maximum(self.b_on - shift, self.w_off)
        t0 = (self.b_max - shift) - self.w_max
        return float(np.count_nonzero(t >= t0 - 1e-12) / len(t))


def fast_end_paired_bound(better: Sequence[float], worse: Sequence[float], alpha: float,
                          side: str) -> float:
    """``_fast_end_paired_bound`` of the pairs as tuples: a cell judged again at each look with
    the same pairs is worked out once."""
    return _fast_end_paired_bound(tuple(float(x) for x in better), tuple(float(x) for x in worse), float(alpha), side)


@functools.lru_cache(maxsize=4096)
def _fast_end_paired_bound(better: Tuple[float, ...], worse: Tuple[float, ...], alpha: float,
                           side: str) -> float:
    """Confidence bound for the shift of ``better`` over ``worse`` at the fast end, found by
    inverting ``fast_end_paired_p`` (bisection on the shift, in log units).

    side="lower": the smallest shift s still not rejected ("better - s is faster" has
    p > alpha), so a lower bound above 0 is the test's rejection of "no faster" at level
    alpha. side="upper": the same with the roles swapped. Returns -inf / inf when no shift
    within +-2 (a factor e^2) is rejected (too few pairs for this alpha)."""
    sign = 1.0 if side == "lower" else -1.0
    b, w = (better, worse) if side == "lower" else (worse, better)
    ends = _FastEnds.of(b, w)
    if ends is None:
        return -math.inf * sign  # no pairs: no shift is rejected

    def rejected(s: float) -> bool:
        return ends.p(s) <= alpha

    lo, hi = -2.0, 2.0                     # shift: rejected below the bound, kept above it
    if not rejected(lo):
        return -math.inf * sign
    if rejected(hi):
        return hi * sign
    for _ in range(17):                    # 4 / 2^17: 0.003% in the ratio
        mid = (lo + hi) / 2
        if rejected(mid):
            lo = mid
        else:
            hi = mid
    return lo * sign


# ----------------------------------------------------------------------------- duet (rounds inside process pairs)

def duet_pair_log_ratio(candidate_seconds: Sequence[float], reference_seconds: Sequence[float]) -> float:
    """One duet pair's estimate of the log speed ratio candidate / reference (> 0: the
    candidate is faster), from the rounds' log(reference_seconds[j] / candidate_seconds[j]):
    the mean of two medians, one over the even rounds j and one over the odd ones. Round j of
    each side ran back to back, so a slow spell of the machine longer than a round slows both
    alike and cancels in the ratio, and a median ignores the few rounds a regime switch fell
    between. The rounds alternate which side runs first (A,B | B,A | A,B ...), so the side
    that runs first in a round is the one that ran last, twice in a row; where that side runs
    faster, the even and the odd rounds' ratios form two clusters (about 10% apart in a Zen 4
    A/A corpus), and one median over all rounds lands anywhere between them, a pair's
    estimate twice as spread as each cluster's; the two clusters' medians, averaged, cancel
    it (docs/upgrade-gate.md, "The verdict"). Rounds whose time on either side is
    not a finite positive number are dropped (a round keeps its parity); ValueError for
    unequal lengths or no round left."""
    if len(candidate_seconds) != len(reference_seconds):
        raise ValueError(f"unequal rounds: {len(candidate_seconds)} candidate, "
                         f"{len(reference_seconds)} reference")
    try:  # rounds are floats: compared as they are (a NaN or an infinity fails 0 < x < inf)
        logs = [math.log(r / c) if 0 < c < math.inf and 0 < r < math.inf and c is not True and r is not True
                else None for c, r in zip(candidate_seconds, reference_seconds)]
    except TypeError:  # something that is not a number: each value read as finite_positive reads it
        logs = [math.log(float(r) / float(c)) if _finite_positive_number(c) and _finite_positive_number(r)
                else None for c, r in zip(candidate_seconds, reference_seconds)]
    medians = [_median_sorted(sorted(v for v in logs[parity::2] if v is not None)) for parity in (0, 1)]
    medians = [m for m in medians if m is not None]
    if not medians:
        raise ValueError("no round with finite positive times on both sides")
    return sum(medians) / len(medians)


def _median_sorted(values: Sequence[float]) -> Optional[float]:
    """The median of already sorted ``values``; None when there are none."""
    n = len(values)
    if not n:
        return None
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


#: how far (log units) a round pair's ratio of a run to the end may stand from the pair's
#: median round ratio before it counts as a burst on one side (``duet_run_log_ratio``): log 1.5.
#: A process computing beside a LeNet training duet on 2 vCPUs stretched the one round it fell
#: in from 0.15 s to 2.6-2.7 s (x17; its partner's rounds 0.10-0.16 s); round pairs of an
#: undisturbed A/A pair stand within about x1.3 of each other
RUN_ROUND_CLIP = math.log(1.5)


def duet_run_log_ratio(candidate_seconds: Sequence[float], reference_seconds: Sequence[float]) -> float:
    """One duet pair's log(candidate total / reference total) for a run to its own end (time to
    accuracy: each side's rounds, round j of each side back to back, the same work while both
    run). The totals are the sums of the rounds, except that a round pair whose log ratio
    stands more than ``RUN_ROUND_CLIP`` from the median of the pairs' log ratios counts at that
    bound (the longer side's round as its partner's times the bound): a burst of another
    process stretches the one round it falls in (a slow spell longer than a round slows both
    sides alike, and cancels as in ``duet_pair_log_ratio``), while a
    change of the setup that slows some rounds only (the evaluation at an epoch's end, the
    first round) still counts, up to x1.5 a round. Rounds one side ran beyond the other's end
    (more epochs to the target) count as they are. Rounds whose time is not a finite positive
    number are dropped; ValueError when no round pair is left."""
    ok = _finite_positive_number
    n = min(len(candidate_seconds), len(reference_seconds))
    common = [(float(c), float(r)) for c, r in zip(candidate_seconds[:n], reference_seconds[:n]) if ok(c) and ok(r)]
    if not common:
        raise ValueError("no round with finite positive times on both sides")
    logs = [math.log(c / r) for c, r in common]
    mid = statistics.median(logs)
    lo, hi = mid - RUN_ROUND_CLIP, mid + RUN_ROUND_CLIP
    cand = ref = 0.0
    for (c, r), x in zip(common, logs):
        if x > hi:    # the candidate's round stretched: it counts as its partner's x the bound
            c = r * math.exp(hi)
        elif x < lo:  # the reference's
            r = c * math.exp(-lo)
        cand += c
        ref += r
    cand += sum(float(c) for c in candidate_seconds[n:] if ok(c))
    ref += sum(float(r) for r in reference_seconds[n:] if ok(r))
    return math.log(cand / ref)


def sample_sd(values: Sequence[float]) -> float:
    """The sample standard deviation (n - 1 in the denominator) of the finite values, in
    floats (statistics.stdev is exact and slow); nan with fewer than 2."""
    d = [float(x) for x in values if math.isfinite(x)]
    if len(d) < 2:
        return math.nan
    mean = math.fsum(d) / len(d)
    return math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (len(d) - 1))


def _mean_se(values: Sequence[float]) -> Tuple[int, float, float]:
    d = [float(x) for x in values if math.isfinite(x)]
    n = len(d)
    mean = math.fsum(d) / n if n else math.nan
    se = sample_sd(d) / math.sqrt(n) if n >= 2 else math.nan
    if n >= 2 and se <= 1e-12 * max(abs(x) for x in d):
        se = 0.0                           # equal values up to rounding: no spread
    return n, mean, se


def mean_t_p(values: Sequence[float], alternative: str) -> Optional[float]:
    """One-sided one-sample t-test p-value on the mean of ``values`` (per-pair log ratios),
    t = mean / (s / sqrt(n)) with n - 1 degrees of freedom. ``alternative="less"``: the mean
    is below 0; "greater": above. None with fewer than 2 finite values. All values equal
    (s = 0): 0.0 when the mean lies strictly on the alternative's side, else 1.0."""
    if alternative not in ("less", "greater"):
        raise ValueError(f"alternative must be 'less' or 'greater', got {alternative!r}")
    n, mean, se = _mean_se(values)
    if n < 2:
        return None
    if se == 0:
        side = mean < 0 if alternative == "less" else mean > 0
        return 0.0 if side else 1.0
    from scipy.special import (
        stdtr,  # the Student t CDF (scipy.stats.t.cdf without its overhead)
    )
    tstat = mean / se
    return float(stdtr(n - 1, tstat) if alternative == "less" else stdtr(n - 1, -tstat))


def mean_t_interval(values: Sequence[float], alpha_one_sided: float) -> Tuple[float, float]:
    """The shifts not rejected by ``mean_t_p`` at level ``alpha_one_sided`` on either side:
    mean -+ t_{1 - alpha, n - 1} x s / sqrt(n) (a 1 - 2 alpha two-sided interval). The upper
    end is below 0 exactly when the one-sided test rejects "mean >= 0" at that level, the
    lower end above 0 exactly when it rejects "mean <= 0" (test and interval agree).
    (-inf, inf) with fewer than 2 finite values; (mean, mean) when they are all equal."""
    n, mean, se = _mean_se(values)
    if n < 2:
        return -math.inf, math.inf
    if se == 0:
        return mean, mean
    from scipy.special import stdtrit  # the Student t quantile (scipy.stats.t.ppf)
    half = float(stdtrit(n - 1, 1.0 - alpha_one_sided)) * se
    return mean - half, mean + half


def t_pairs_for_halfwidth(sd: float, halfwidth: float, alpha_one_sided: float, n_min: int,
                          n_max: int) -> int:
    """The fewest values n in [n_min, n_max] whose one-sided t bound at ``alpha_one_sided``
    lies within ``halfwidth`` of the mean, t_{1 - alpha, n - 1} x sd / sqrt(n) <= halfwidth,
    for a spread ``sd`` between values; ``n_max`` when none does (n_min >= 2)."""
    import numpy as np
    from scipy.special import stdtrit

    n_min = max(2, int(n_min))
    if n_max <= n_min:
        return n_min
    if sd <= 0:
        return n_min
    n = np.arange(n_min, n_max + 1)
    ok = stdtrit(n - 1, 1.0 - alpha_one_sided) * sd / np.sqrt(n) <= halfwidth
    return int(n[ok][0]) if ok.any() else int(n_max)
