"""Duet A/B verdicts: candidate against reference install, judged over process pairs.

A duet pair is two resident workers, one per install, whose short timed rounds the parent
alternates (A, B, B, A, A, B, ...: round j of each side back to back, one running at a
time), after Bulej et al., "Duet Benchmarking" (ICPE 2020). A slow spell of the shared
machine longer than a round slows both sides of that round alike, so each round's ratio
cancels it; ``stats.duet_pair_log_ratio`` (the median of the round log ratios) is the
pair's estimate. What rounds cannot cancel is what differs between the two processes for
their whole life (memory placement, a worker started in a slow state), so the *pair* is
the unit of replication: a cell gets at least ``STAGE1_PAIRS`` pairs and is judged on
the per-pair log ratios ``DuetPairing.pair_log_ratios`` (log candidate / reference figure).

The rule, per cell (log ratios signed so that > 0 is better, whatever the metric's
direction; estimate m = their mean; one-sided one-sample t-test over the pairs, n - 1 df;
Benjamini-Hochberg across the session's cells):

1. **stage 1** (``STAGE1_PAIRS`` = 3 pairs, not final) never fails: a cell whose estimate
   is worse than ``min_effect`` is **suspect**, significant or not (3 pairs with a spread
   that is small by chance make a t-test significant too often to fail on), and so is a
   cell too imprecise to pass (its one-sided 1 - q bound worse than ``min_effect``: 3 pairs
   with a 4% spread cannot tell 0% from -10%). Other cells are unchanged (or an
   **improvement** when better than ``min_effect`` and significant: it never fails).
2. **stage 2**: a suspect gets more pairs, as many as ``pairs_needed(n_cells, its stage-1
   ratios, spread=session_spread(...))`` says: at the stage-1 spread (the cell's, or the
   session's pooled over all cells when larger), the interval at the Bonferroni level q / n_cells
   (the strictest BH level) becomes narrower than ``PRECISION_MARGIN`` x ``min_effect``, so
   an estimate worse than ``min_effect`` is significant on its own.
3. the **final** verdict, on all the cell's pairs: **regression** when worse than
   ``min_effect`` AND significant after BH (the interval at the BH cutoff level lies below
   1: the interval shown); worse than ``min_effect`` and not significant: **unresolved**
   (fails: a slowdown never passes silently), except for a cell that got every pair its
   second stage asked for (``complete``: none cut by the deadline), where a figure within
   ``NOISE_LIMIT_Z`` standard errors of its pairs' mean is **below-resolution** (its spread
   grew past what its first stage showed, and is the machine's; fails only when
   ``--perf-fail-on`` names it); else unchanged / improvement. (Judging the
   second stage's pairs alone avoids the first stage's selection bias, but in the
   simulation it failed equal sessions no less often and flagged fewer slowdowns.)
4. fewer than 3 finite pair ratios: suspect / unresolved.

So an unchanged session fails only through a false significant regression of a final
cell (at most q for the whole session by BH, whatever its number of cells, and rarer since
the estimate must also be worse than ``min_effect``) or an unresolved cell whose spread
grew after stage 1 (rare by the precision rule).

Evidence: ``benchmarks/duet_false_alarms.py`` (sessions of 1 to 50 equal cells simulated on
the recorded regime traces, results in ``benchmarks/results/duet-false-alarms-*.txt``) and
``tests/test_duet_stats.py``.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.judge.thresholds import FDR_Q, MIN_EFFECT, NOISE_LIMIT_Z, effect_for
from pytest_mxperf.judge.verdict_record import Verdict
from pytest_mxperf.model import options, stats
from pytest_mxperf.model.measurement import Metric

STAGE1_PAIRS = options.DUET_PAIRS  # process pairs per cell in the first stage (the fewest a t-test can use)
MAX_PAIRS = 40              # stage 2 never asks for more pairs per cell than this in all
PRECISION_MARGIN = 0.75     # stage 2 aims the half-width at this x min_effect (the spread may grow)
MIN_SD = 0.005              # floor of the stage-1 spread (log units) used to size stage 2
EFFECT_SHARE = 0.5          # stage 2 may aim the half-width at this x a large first-stage effect


@dataclasses.dataclass
class DuetPairing:
    """One cell's duet pairs: log(candidate figure / reference figure) of each process pair
    (in the metric's unit: higher_is_better tells which sign is better)."""

    metric: Metric
    pair_log_ratios: Sequence[float]
    final: bool = False                    # the second stage already ran
    complete: bool = False                 # ... with every pair it asked for (none cut by the deadline)
    rounds: Optional[int] = None           # rounds per side in each pair (shown in the reason)

    def signed(self) -> List[float]:
        """The finite log ratios, signed so that > 0 means the candidate is better."""
        sign = 1.0 if self.metric.higher_is_better else -1.0
        return [sign * x for x in _finite(self.pair_log_ratios)]


def _finite(xs: Sequence[float]) -> List[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(float(x))]


def session_spread(first_stage_ratios: Iterable[Sequence[float]]) -> Optional[float]:
    """The pooled spread between pairs of a session's cells (log units): the square root of
    the within-cell sums of squares over their degrees of freedom, from every cell with at
    least 2 finite first-stage ratios (None if none). Most of the spread is the machine's,
    so it is known far better from all cells (2 df each) than from one cell's 3 pairs."""
    ss, df = 0.0, 0
    for ratios in first_stage_ratios:
        d = _finite(ratios)
        if len(d) >= 2:
            mean = statistics.fmean(d)
            ss += sum((x - mean) ** 2 for x in d)
            df += len(d) - 1
    return math.sqrt(ss / df) if df else None


def pairs_needed(n_cells: int, pair_log_ratios: Sequence[float] = (), *, spread: Optional[float] = None,
                 min_effect: float = MIN_EFFECT, q: float = FDR_Q, max_pairs: int = MAX_PAIRS) -> int:
    """Pairs a cell should have in all (the session measures the difference).

    Without ratios: the first stage, ``STAGE1_PAIRS``. With a suspect's first-stage ratios:
    those plus the second stage's pairs, the fewest n2 (at least STAGE1_PAIRS, at most ``max_pairs``
    in all) with t_{1 - q/n_cells, n2 - 1} x s / sqrt(n2) <= the larger of PRECISION_MARGIN x
    min_effect and EFFECT_SHARE x the first stage's mean |log ratio|: the second stage's own
    interval at the strictest BH level of ``n_cells`` cells is then narrower than the minimum
    effect, or, for an effect far beyond it, narrow enough to show it (seen in CI: MXNet 1.6.0
    against 1.9.1 at x0.36, pair spread 13.5% on a busy machine, asked for 37 more pairs,
    about 17 minutes, to pin an interval to +-3.75% around a 64% slowdown). s is the larger
    of the cell's first-stage spread and ``spread`` (the session's, ``session_spread``: 3
    pairs can show a spread far below their own by chance), at least ``MIN_SD``.
    ``n_cells``: the figures judged together."""
    d = _finite(pair_log_ratios)
    if not d:
        return STAGE1_PAIRS
    sd = max(stats.sample_sd(d) if len(d) >= 2 else 0.0, spread or 0.0, MIN_SD)
    alpha = q / max(1, int(n_cells))
    n2_max = max(STAGE1_PAIRS, max_pairs - len(d))
    halfwidth = max(PRECISION_MARGIN * min_effect, EFFECT_SHARE * abs(statistics.fmean(d)))
    n2 = stats.t_pairs_for_halfwidth(sd, halfwidth, alpha, STAGE1_PAIRS, n2_max)
    return len(d) + n2


def noise_reach(log_ratios: Sequence[float]) -> float:
    """``NOISE_LIMIT_Z`` standard errors of the mean of a cell's pair log ratios (log units):
    the slowdown its pairs can tell from the machine's noise."""
    return NOISE_LIMIT_Z * stats.sample_sd(log_ratios) / math.sqrt(len(log_ratios))


def within_noise(log_ratios: Sequence[float]) -> str:
    """How a figure below its pairs' resolution says so."""
    return (f"within {100 * math.expm1(noise_reach(log_ratios)):.1f}%, what {len(log_ratios)} pairs resolve at "
            f"this spread ({NOISE_LIMIT_Z:g} standard errors): noise of the machine, not passed as unchanged")


def _ratio_interval(lo: float, hi: float, sign: float) -> Tuple[float, float]:
    a, b = math.exp(sign * lo), math.exp(sign * hi)
    return (min(a, b), max(a, b))


@dataclasses.dataclass
class _Tests:
    """One cell's one-sided t-tests, their BH q-values and the session's BH cutoff levels."""

    p_worse: Optional[float]
    q_worse: Optional[float]
    level_worse: float
    p_better: Optional[float]
    q_better: Optional[float]
    level_better: float


def judge_duet(cells: Mapping[str, DuetPairing], *, min_effect: float = MIN_EFFECT,
               q: float = FDR_Q) -> Dict[str, Verdict]:
    """Duet verdicts for a session's cells (the rule: the module doc). ``change`` is
    candidate / reference - 1 in the metric's unit (the mean of the pairs' log
    ratios, exponentiated), ``interval`` that ratio's interval at the BH level that decides
    (the worse side's for a slowdown), p and q the one-sided t-test over the pairs
    and its BH adjustment across the cells, in the direction of the estimate; n_current =
    n_baseline = the pairs. Worse and better are separate BH families."""
    good = {k: p.signed() for k, p in cells.items()}
    p_w = {k: stats.mean_t_p(g, "less") if len(g) >= STAGE1_PAIRS else None for k, g in good.items()}
    p_b = {k: stats.mean_t_p(g, "greater") if len(g) >= STAGE1_PAIRS else None for k, g in good.items()}
    level_w = stats.bh_rejection_level(list(p_w.values()), q)
    level_b = stats.bh_rejection_level(list(p_b.values()), q)
    q_w = dict(zip(p_w, stats.benjamini_hochberg(list(p_w.values()))))
    q_b = dict(zip(p_b, stats.benjamini_hochberg(list(p_b.values()))))
    return {k: _judge_cell(p, good[k], _Tests(p_w[k], q_w[k], level_w, p_b[k], q_b[k], level_b),
                          effect_for(p.metric.name, min_effect, k), q)
            for k, p in cells.items()}


def _describe(p: DuetPairing, g: List[float], ratio: float, interval: Tuple[float, float]) -> str:
    extra = [f"pair spread {100 * stats.sample_sd(g):.1f}%"]
    if p.rounds:
        extra.append(f"{p.rounds} rounds each")
    if p.final:
        extra.append("two stages")
    return (f"candidate/reference {ratio:.3f} [{interval[0]:.3f}, {interval[1]:.3f}] over {len(g)} duet pairs "
            f"({', '.join(extra)})")


def _judge_cell(p: DuetPairing, g: List[float], t: _Tests, min_effect: float, q: float) -> Verdict:
    """One cell's verdict from its log ratios ``g`` (signed: > 0 better) and the
    session's tests; the order of the checks is the rule of the module doc."""
    m, n = p.metric, len(g)
    base = dict(metric=m.name, unit=m.unit, n_current=n, n_baseline=n, threshold=min_effect)
    if n < STAGE1_PAIRS:
        kind = "unresolved" if p.final else "suspect"
        return Verdict(kind, f"only {n} duet pair(s), fewer than {STAGE1_PAIRS}: "
                       + ("could not judge: re-run" if p.final else "adding pairs"), **base)
    sign = 1.0 if m.higher_is_better else -1.0
    est = statistics.fmean(g)
    slower = est < 0
    lo, hi = stats.mean_t_interval(g, t.level_worse if slower else t.level_better)
    ratio = math.exp(sign * est)
    interval = _ratio_interval(lo, hi, sign)
    change = ratio - 1.0
    w = m.oriented(change)                                 # negative: worse
    txt = _describe(p, g, ratio, interval)
    pv, qv = (t.p_worse, t.q_worse) if slower else (t.p_better, t.q_better)
    common = dict(change=change, interval=interval, p_value=pv, q_value=qv, **base)
    eff = f"{100 * min_effect:.0f}%"
    significant = (hi < 0) if slower else (lo > 0)
    sig_txt = f"p={pv:.3g}, q={qv:.3g}"
    if w > min_effect and significant:
        return Verdict("improvement", f"{txt}: better by more than {eff} and significant ({sig_txt})", **common)
    if w < -min_effect and not p.final:
        why = (f"significant ({sig_txt}) but with only the first stage's pairs: confirming with more pairs"
               if significant else f"not significant yet ({sig_txt}): adding pairs")
        return Verdict("suspect", f"{txt}: worse than -{eff}, {why}", **common)
    if w < -min_effect and significant:
        return Verdict("regression", f"{txt}: worse than -{eff} and significant ({sig_txt})", **common)
    if w < -min_effect and p.final and p.complete:
        # every pair the rule asked for and still not significant: the spread grew past what
        # the first stage showed, and it is the machine's (the module doc). Unresolved only
        # beyond NOISE_LIMIT_Z standard errors
        if -est <= noise_reach(g):
            return Verdict("below-resolution", f"{txt}: worse than -{eff} but not significant ({sig_txt}), "
                           + within_noise(g), **common)
    if w < -min_effect:
        return Verdict("unresolved", f"{txt}: worse than -{eff} but not significant ({sig_txt}); could not "
                       "confirm: re-run", **common)
    worst = stats.mean_t_interval(g, q)[0]                # the cell's own one-sided (1 - q) worse end
    worst_change = m.oriented(math.exp(sign * worst) - 1.0)
    bound = f"its {100 * (1 - q):.0f}% bound reaches {100 * worst_change:+.1f}%"
    if worst_change < -min_effect and not p.final:
        return Verdict("suspect", f"{txt}: too imprecise to pass ({bound}, beyond -{eff}); adding pairs", **common)
    if w > min_effect:
        txt += f": better by more than {eff} but not significant ({sig_txt}): not called an improvement"
    elif worst_change < -min_effect:
        txt += f": within -{eff}, though {bound}"
    return Verdict("unchanged", txt, **common)
