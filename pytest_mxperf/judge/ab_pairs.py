"""A/B mode with process pairs (for worker kinds that cannot be resident; duet pairs are
judge/verdict_duet.py's): each pair's ratio candidate / reference, a sign-flip test on the
fast end of the pairs, Benjamini-Hochberg across a session's figures.

``judge_ab``: pairs of back-to-back processes (candidate and reference install,
order alternated); pairs with a process slowed by other processes are left out. The
estimate is the ratio of the two sides' *fast ends* (the fastest process of each side),
tested by the exact sign-flip permutation test of that statistic within pairs
(``stats.fast_end_paired_p``), BH across the session's cells, and decided from the interval
that inverts the test at the BH cutoff level: a **regression** when the interval's better
end is still worse than no change and the estimate is worse than the minimum effect. The
interval shown is the one decided on. Why the fast end and not the median of the pair
ratios: a shared VM switches between speed regimes within seconds and at random between
processes (recorded: AlexNet b8 at 146-173 or 93-98 img/s, the paired log-ratio SD 0.39,
larger than unpaired), so a pair often straddles two regimes and pairing cancels nothing;
that noise only ever slows a process down, so the fastest processes are the ones a slower
release moves and the machine does not. The fast end needs the processes of a side to be
alike: where they are not (a time-to-accuracy cell: process i trains with seed i, 1 to 4
epochs to the target here, and both sides of a pair have the same seed), the fast end is the
one seed that needs the fewest epochs, a run of 0.4-0.6 s, the noisiest of all; such a
figure (``Pairing.exchangeable`` False) is judged on its pairs instead: the Hodges-Lehmann
estimate of the pair log ratios, the exact signed-rank test and its interval. In 120 sessions resampled from those recordings
through the two-stage rule (tests/test_regimes.py), the median-ratio (signed-rank) rule
failed 12% of equal sessions and let a 24% slowdown pass in 5%; the fast-end rule failed 3%
and let none pass, and let a 10% slowdown pass in 9%. The median pair ratio is shown beside
it. After every pair its second stage asked for (``Pairing.complete``), a fast end worse than
the minimum effect but not significant is **unresolved** (fails) when the pairs' median shows
the slowdown too, and **below-resolution** when it does not (the fast end's own noise: a
distributed launch's interval was 32% wide after 24 A/A pairs on a 2-vCPU VM; fails only when
``--perf-fail-on`` names it).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.judge.thresholds import FDR_Q, MIN_EFFECT, effect_for
from pytest_mxperf.judge.verdict_duet import noise_reach, within_noise
from pytest_mxperf.judge.verdict_record import Verdict
from pytest_mxperf.model import stats
from pytest_mxperf.model.measurement import Metric


@dataclasses.dataclass
class Pairing:
    """One cell in A/B mode: the figure of each back-to-back (candidate, reference) pair."""

    metric: Metric
    candidate: Sequence[float]
    reference: Sequence[float]
    states: Optional[Sequence[Optional[str]]] = None   # "slowed" if either process of the pair was
    screened: bool = True
    final: bool = False                                  # the second stage already ran
    exchangeable: bool = True                            # False: the pairs differ (a seed each), not the processes of a side
    #: measured by a duet's two workers after their rounds, one side after the other
    #: (``ab_judging.AFTER_ROUNDS``): at the end, a slowdown within the pairs' noise
    #: (``noise_reach``) is below the resolution, whatever their median
    after_rounds: bool = False
    complete: bool = False                               # final with every pair it asked for (none cut)


def judge_ab(cells: Mapping[str, Pairing], *, min_effect: float = MIN_EFFECT, q: float = FDR_Q
             ) -> Dict[str, Verdict]:
    """A/B verdicts on paired log ratios (see the module doc); ``interval`` is the ratio
    candidate / reference at the BH level that decides."""
    sides: Dict[str, Tuple[List[float], List[float]]] = {}
    out: Dict[str, Verdict] = {}
    excluded: Dict[str, int] = {}
    for key, p in cells.items():
        pairs = list(zip(p.candidate, p.reference))
        states = list(p.states) if p.states and len(p.states) == len(pairs) else [None] * len(pairs)
        keep = [(c, r) for (c, r), s in zip(pairs, states)
                if not (p.screened and s == "slowed") and c and r and c > 0 and r > 0]
        excluded[key] = len(pairs) - len(keep)
        sign = 1.0 if p.metric.higher_is_better else -1.0
        # log figures signed so that larger is better, candidate and reference of each pair
        sides[key] = ([sign * math.log(c) for c, _ in keep], [sign * math.log(r) for _, r in keep])
    seeded = {k for k, p in cells.items() if not p.exchangeable}

    def p_of(k: str, x: Sequence[float], y: Sequence[float], worse: bool) -> Optional[float]:
        if len(x) < 3:
            return None
        if k in seeded:
            return stats.signed_rank_p([a - b for a, b in zip(x, y)], "less" if worse else "greater")
        return stats.fast_end_paired_p(y, x) if worse else stats.fast_end_paired_p(x, y)
    p_worse = {k: p_of(k, x, y, True) for k, (x, y) in sides.items()}
    p_better = {k: p_of(k, x, y, False) for k, (x, y) in sides.items()}
    level_w = stats.bh_rejection_level(list(p_worse.values()), q)
    level_b = stats.bh_rejection_level(list(p_better.values()), q)
    q_w = dict(zip(p_worse, stats.benjamini_hochberg(list(p_worse.values()))))
    q_b = dict(zip(p_better, stats.benjamini_hochberg(list(p_better.values()))))
    # the pairs' own slowdown test (``_pairs_slower_p``), one BH family over the session's
    # figures like the others: an A/A session's chance of failing on it does not grow with N
    p_pairs = {k: _pairs_slower_p(x, y) if len(x) >= 3 and k not in seeded else None
               for k, (x, y) in sides.items()}
    q_pairs = dict(zip(p_pairs, stats.benjamini_hochberg(list(p_pairs.values()))))
    for key, p in cells.items():
        (x, y), m = sides[key], p.metric
        effect = effect_for(m.name, min_effect, key)  # a tail's is wider (thresholds.TAILS)
        sign = 1.0 if m.higher_is_better else -1.0
        base = dict(metric=m.name, unit=m.unit, n_current=len(x), n_baseline=len(x),
                    excluded=(excluded[key], excluded[key]))
        if len(x) < 3:
            kind = "unresolved" if p.final else "suspect"
            out[key] = Verdict(kind, f"only {len(x)} clean pair(s) ({excluded[key]} left out as slowed); "
                               + ("could not confirm on a busy machine: re-run" if p.final else "adding pairs"),
                               busy=excluded[key] > 0, **base)
            continue
        diffs = [a - b for a, b in zip(x, y)]
        median = stats.hodges_lehmann(diffs)     # the pairs' own estimate, whatever the figure's
        pairs_beyond = median < -math.log1p(effect)  # ... a slowdown beyond the minimum effect
        est = median if key in seeded else max(x) - max(y)
        # the interval shown is the one whose end decided: the worse side's for a slowdown
        level = level_w if est < 0 else level_b
        if key in seeded:
            lo, hi = stats.signed_rank_interval(diffs, level)
        else:
            lo = stats.fast_end_paired_bound(x, y, level, "lower")
            hi = stats.fast_end_paired_bound(x, y, level, "upper")
        worse_sig = est < 0 and hi < 0
        better_sig = est > 0 and lo > 0
        ratio = math.exp(sign * est)
        interval = tuple(sorted((math.exp(sign * lo), math.exp(sign * hi))))
        change = ratio - 1.0
        paired = math.exp(sign * median)
        txt = (f"candidate/reference {ratio:.3f} [{interval[0]:.3f}, {interval[1]:.3f}] "
               + (f"over {len(x)} pairs of one seed each (signed rank)" if key in seeded else
                  f"at the fast end of {len(x)} pairs (median pair ratio {paired:.3f})")
               + (f" ({excluded[key]} slowed left out)" if excluded[key] else ""))
        common = dict(change=change, threshold=effect, interval=interval, **base)
        w = m.oriented(change)                   # the change signed so that negative is worse
        if w < -effect and worse_sig:
            out[key] = Verdict("regression", f"{txt}: worse than -{100 * effect:.0f}% and significant "
                               f"(p={p_worse[key]:.3g}, q={q_w[key]:.3g})", p_value=p_worse[key],
                               q_value=q_w[key], **common)
        elif w > effect and better_sig:
            out[key] = Verdict("improvement", f"{txt}: better by more than {100 * effect:.0f}% and "
                               f"significant (p={p_better[key]:.3g})", p_value=p_better[key],
                               q_value=q_b[key], **common)
        elif (w < -effect and p.final and p.complete
              and (-est <= noise_reach(diffs) if key in seeded else
                   (not pairs_beyond or (p.after_rounds and -median <= noise_reach(diffs))))):
            # every pair it asked for and still not significant: the machine's noise. Seeded
            # pairs: within NOISE_LIMIT_Z standard errors (a time to accuracy of 0.4-2.4 s, pairs
            # spread 22% here). At the fast end: where the pairs' median is within the minimum
            # effect (an unchanged session's distributed cells, their fast ends 30% wide after 24
            # A/A pairs: docs/upgrade-gate.md, "Gating an MXNet upgrade", process pairs); a slowdown
            # the pairs show stays unresolved (fails), except for figures a duet's workers measure
            # after their rounds, one side after the other (``after_rounds``): their pairs spread
            # as the machine does (a loader alone 28% apart in an A/A), and a median within
            # NOISE_LIMIT_Z standard errors is that spread (docs/baselines.md, "Real unchanged
            # sessions that failed": LeNet b64's input pipeline on an Intel model 207)
            sig = f"not significant (p={p_worse[key]:.3g})"
            why = (f"but {sig}, " + within_noise(diffs) if key in seeded else
                   f"at the fast end but {sig}, and the pairs' median (x{paired:.3f}) "
                   + within_noise(diffs) + " (measured one side after the other, after the rounds)"
                   if pairs_beyond else
                   f"at the fast end but {sig}, and the pairs' median within -{100 * effect:.0f}%: "
                   "the fast end's noise, not passed as unchanged")
            out[key] = Verdict("below-resolution", f"{txt}: worse than -{100 * effect:.0f}% {why}",
                               p_value=p_worse[key], q_value=q_w[key], **common)
        elif w < -effect:
            kind = "unresolved" if p.final else "suspect"
            out[key] = Verdict(kind, f"{txt}: worse than -{100 * effect:.0f}% but not significant "
                               f"(p={p_worse[key]:.3g}); " + ("could not confirm: re-run" if p.final
                                                               else "adding pairs"),
                               p_value=p_worse[key], q_value=q_w[key], **common)
        elif q_pairs[key] is not None and q_pairs[key] <= q and pairs_beyond:
            # The fast ends do not show the slowdown the pairs do: one lucky process (seen on a
            # machine loaded by other work: a fast end of x1.091 over pairs at x0.902) must not
            # pass a slowdown the pairs show significantly. Not a regression either: unclear.
            kind = "unresolved" if p.final else "suspect"
            out[key] = Verdict(kind, f"{txt}: the fast ends are not worse, but the pairs are, by more than "
                               f"{100 * effect:.0f}% and significantly (signed-rank p={p_pairs[key]:.3g}, "
                               f"q={q_pairs[key]:.3g}); "
                               + ("could not confirm either way: re-run on a quieter machine" if p.final
                                  else "adding pairs"),
                               p_value=p_worse[key] if est < 0 else p_better[key],
                               q_value=q_w[key] if est < 0 else q_b[key], **common)
        else:
            if w > effect:
                txt += (f": better by more than {100 * effect:.0f}% but not significant "
                        f"(p={p_better[key]:.3g}): not called an improvement")
            out[key] = Verdict("unchanged", f"{txt}", p_value=p_worse[key] if est < 0 else p_better[key],
                               q_value=q_w[key] if est < 0 else q_b[key], **common)
    return out


def _pairs_slower_p(x: Sequence[float], y: Sequence[float]) -> Optional[float]:
    """The exact one-sided signed-rank p that the paired differences (log figures signed
    larger-is-better, candidate ``x`` against reference ``y``) show a slowdown, whatever the
    fast ends say. ``judge_ab`` adjusts these p across every figure of the session (BH; a
    figure counts whatever its estimate) and acts on one only when its Hodges-Lehmann
    estimate is also a slowdown beyond the minimum effect (``pairs_beyond`` there): a raw p <= q
    per figure made an unchanged session of N figures fail more often the larger N was."""
    return stats.signed_rank_p([a - b for a, b in zip(x, y)], "less")
