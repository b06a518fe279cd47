"""Duet A/B verdicts: candidate against reference install, judged over process pairs.

A duet pair is two resident workers, one per install, whose short timed rounds the parent
alternates (A, B, B, A, A, B, ...: round j of each side back to back, one running at a
time), after Bulej et al., "Duet Benchmarking" (ICPE 2020). A slow spell of the shared
machine longer than a round slows both sides of that round alike, so each round's ratio
cancels it; ``stats.duet_pair_log_ratio`` (the mean of the even and the odd rounds' median log
ratios) is the pair's estimate. What rounds cannot cancel is what differs between the two processes for
their whole life (memory placement, a worker started in a slow state), so the *pair* is
the unit of replication: a cell gets at least ``STAGE1_PAIRS`` pairs and is judged on
the per-pair log ratios ``DuetPairing.pair_log_ratios`` (log candidate / reference figure).

The rule, per figure (log ratios signed so that > 0 is better, whatever the metric's
direction), pair by pair (``judge_duet_sequential``; the boundaries are
``judge/sequential.py``'s): from its first look (after ``STAGE1_PAIRS`` pairs) a figure is judged
on its pairs' mean at a spread known far better than from its own few pairs (``ab_judging.
pooled_spreads``: its kind of figure's in this session and this machine's history, or its
own where larger) and is a **regression** (worse than ``min_effect`` beyond Pocock's
boundary at q / figures), an **improvement**, **unchanged** (its bound clears
``min_effect``), or a **suspect** that gets more pairs before its next look (``next_look``).
A figure that reaches ``SEQUENTIAL_MAX_PAIRS`` (``final``) without a call is judged as it
stands: **unresolved** when worse than ``min_effect`` (a slowdown never passes silently),
**below-resolution** when every pair it was planned came (``complete``) and it is within
``NOISE_LIMIT_Z`` standard errors, else unchanged with its bound said.

Evidence: ``tests/test_sequential.py`` (the rule's rates, simulated), ``tests/test_duet_stats.py``
and ``tests/test_error_rates.py`` (sessions simulated and replayed through the product's end of a
session), described in docs/upgrade-gate.md, "Gating an MXNet upgrade", *The verdict*.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.judge.thresholds import FDR_Q, MIN_EFFECT, NOISE_LIMIT_Z, effect_for
from pytest_mxperf.judge.sequential import Spread
from pytest_mxperf.judge.verdict_record import Verdict
from pytest_mxperf.model import kinds
from pytest_mxperf.model.measurement import METRICS, PRIMARY, cell_of, split_metric_key
from pytest_mxperf.model import options, stats
from pytest_mxperf.model.measurement import Metric

STAGE1_PAIRS = options.DUET_PAIRS  # duet pairs per cell before its first look
MAX_PAIRS = 40              # the most pairs a cell gets in all
MIN_SD = 0.005              # floor of the spread (log units) a figure is judged at


@dataclasses.dataclass
class DuetPairing:
    """One cell's duet pairs: log(candidate figure / reference figure) of each process pair
    (in the metric's unit: higher_is_better tells which sign is better)."""

    metric: Metric
    pair_log_ratios: Sequence[float]
    final: bool = False                    # no more pairs will come (its last look, or the deadline)
    complete: bool = False                 # ... with every pair it was planned (none cut by the deadline)
    rounds: Optional[int] = None           # rounds per side in each pair (shown in the reason)
    pair_seconds: Optional[float] = None   # what its first stage's pairs took: its kind's cap, if any

    def signed(self) -> List[float]:
        """The finite log ratios, signed so that > 0 means the candidate is better."""
        sign = 1.0 if self.metric.higher_is_better else -1.0
        return [sign * x for x in _finite(self.pair_log_ratios)]


def _finite(xs: Sequence[float]) -> List[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(float(x))]


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


# ---------------------------------------------------------------- pair by pair (sequential)

#: the most duet pairs a cell gets in all under the pair-by-pair rule: its planned looks
#: (``sequential.pocock`` spends the error across this many; looking less often only lowers it)
SEQUENTIAL_MAX_PAIRS = MAX_PAIRS
#: the chance that a cell truly at the minimum effect is passed as unchanged
ALPHA_PASS = 0.05


def max_pairs_for(key: str, most: int = SEQUENTIAL_MAX_PAIRS, pair_seconds: Optional[float] = None) -> int:
    """The most duet pairs the cell or figure ``key`` gets, whose pair takes ``pair_seconds``:
    ``most``, or its kind's cap where it has a pair budget (``Kind.pair_budget``: a kind whose
    pairs are long gets as many as the budget holds, at least its least)."""
    budget = _budget_of(key)
    return most if budget is None else budget.cap(pair_seconds, most)


def _budget_of(key: str) -> Optional[kinds.PairBudget]:
    """The pair budget of the kind of the cell or figure ``key``, if it has one."""
    return kinds.PAIR_BUDGETS.get(split_metric_key(key)[0].split("/", 1)[0])


def judge_duet_sequential(cells: Mapping[str, DuetPairing], spreads: Mapping[str, Spread], *,
                          min_effect: float = MIN_EFFECT, q: float = FDR_Q,
                          max_pairs: int = SEQUENTIAL_MAX_PAIRS) -> Dict[str, Verdict]:
    """Duet verdicts by the pair-by-pair rule (``judge/sequential.py``): each figure judged on
    its pairs' mean at the spread pooled over its kind of figure (``spreads[key]``: this
    session's pairs and this machine's history, ``ab_judging.pooled_spreads``), from its first
    pair; a regression's budget is ``q`` shared equally by the session's figures (Bonferroni:
    each cell's false-alarm chance is spent across its looks, so the session's is at most
    ``q``). A figure not called yet is a **suspect** (one more look), or, when no more pairs
    will come (``final``), **unresolved** if worse than its minimum effect (**below-resolution**
    when every pair it was planned came and the mean is within ``NOISE_LIMIT_Z`` standard errors)
    and unchanged otherwise, with its bound said. ``interval``: the ratio's interval at the
    boundary that decided (the pass boundary for an unchanged figure)."""
    from pytest_mxperf.judge import sequential
    alpha_r = q / max(1, len(cells))
    out: Dict[str, Verdict] = {}
    for key, p in cells.items():
        g = p.signed()
        m = p.metric
        effect = effect_for(m.name, min_effect, key)
        base = dict(metric=m.name, unit=m.unit, n_current=len(g), n_baseline=len(g), threshold=effect)
        spread = spreads.get(key) or sequential.Spread()
        if not g or spread.sd is None:
            kind = "unresolved" if p.final else "suspect"
            out[key] = Verdict(kind, f"{len(g)} duet pair(s) and no spread of pairs to judge them at: "
                               + ("could not judge: re-run" if p.final else "adding pairs"), **base)
            continue
        sd = max(spread.sd, MIN_SD)
        most = max_pairs_for(key, max_pairs, p.pair_seconds)
        call = sequential.decide(g, sd, spread.df, min_effect=log_effect(m, effect), alpha_regression=alpha_r,
                                 alpha_pass=ALPHA_PASS, max_pairs=most, last=p.final)
        out[key] = _sequential_verdict(p, g, call, sd, spread.df, effect, len(cells), most, base,
                                       _cap_said(key, p.pair_seconds) if most < max_pairs else "")
    return out


def log_effect(metric: Metric, effect: float) -> float:
    """The minimum effect as a signed log ratio's size: a figure worse than it is worse than
    ``effect`` in the figure's own unit (x(1 - effect) of a rate, x(1 + effect) of a time)."""
    return -math.log1p(-effect) if metric.higher_is_better else math.log1p(effect)


def _cap_said(key: str, pair_seconds: Optional[float]) -> str:
    """Why a cell's pairs are capped below the rule's most: its kind's pair budget at its pairs' cost."""
    budget = _budget_of(key)
    if budget is None:
        return ""
    if not pair_seconds:
        return ": its kind's least, its pairs' cost not known"
    return f": what {budget.seconds / 60:.0f} min holds of {pair_seconds:.0f}-s pairs, at least {budget.least}"


def _sequential_verdict(p: DuetPairing, g: List[float], call, sd: float, df: int, effect: float,
                        n_figures: int, max_pairs: int, base: Dict, cap_said: str = "") -> Verdict:
    from scipy.stats import t as student_t
    sign = 1.0 if p.metric.higher_is_better else -1.0
    est, se = call.mean, call.se
    ratio = math.exp(sign * est)
    c = call.c_pass if call.kind in ("unchanged", "unchanged-imprecise", None) else call.c_regression
    interval = _ratio_interval(est - c * se, est + c * se, sign)
    z = est / se
    p_one = float(student_t.sf(abs(z), max(1, df)))      # one-sided, in the estimate's direction, at one look
    common = dict(change=ratio - 1.0, interval=interval, p_value=p_one, q_value=min(1.0, p_one * n_figures), **base)
    eff = f"{100 * effect:.0f}%"
    extra = [f"pooled pair spread {100 * sd:.1f}% ({df} df)"]
    if p.rounds:
        extra.append(f"{p.rounds} rounds each")
    txt = (f"candidate/reference {ratio:.3f} [{interval[0]:.3f}, {interval[1]:.3f}] over {len(g)} duet pair(s) "
           f"({', '.join(extra)})")
    bound = (f"|z| {abs(z):.2f} against the boundary {call.c_regression:.2f} after {len(g)} of at most "
             f"{max_pairs} pairs{cap_said}")
    worst = math.exp(sign * (est - call.c_pass * se)) - 1.0
    worst_txt = f"its bound reaches {100 * p.metric.oriented(worst):+.1f}%"
    if call.kind == "regression":
        return Verdict("regression", f"{txt}: worse than -{eff} and significant, pair by pair ({bound})", **common)
    if call.kind == "improvement":
        return Verdict("improvement", f"{txt}: better by more than {eff} and significant, pair by pair ({bound})",
                       **common)
    if call.kind == "unchanged":
        return Verdict("unchanged", f"{txt}: within -{eff} ({worst_txt}, beyond which a cell is passed at most "
                       f"{100 * ALPHA_PASS:.0f}% of the time)", **common)
    if call.kind == "unchanged-imprecise":
        return Verdict("unchanged", f"{txt}: within -{eff}, though {worst_txt} after every pair it was planned",
                       **common)
    if call.kind == "unresolved":
        if p.complete and -est <= NOISE_LIMIT_Z * se:
            return Verdict("below-resolution", f"{txt}: worse than -{eff} but not significant after every pair it "
                           f"was planned, within {100 * math.expm1(NOISE_LIMIT_Z * se):.1f}% ({NOISE_LIMIT_Z:g} "
                           "standard errors): noise of the machine, not passed as unchanged", **common)
        return Verdict("unresolved", f"{txt}: worse than -{eff} but not significant ({bound}); could not confirm: "
                       "re-run", **common)
    return Verdict("suspect", f"{txt}: not called yet ({bound}; {worst_txt}): adding pairs", **common)


def pairs_to_call(signed: Sequence[float], sd: Optional[float], df: Optional[int], *, min_effect: float, q: float,
                  n_figures: int, max_pairs: int = SEQUENTIAL_MAX_PAIRS) -> int:
    """The pairs in all a figure's mean so far, were it the truth, needs to be called
    (unchanged when within the minimum effect, a regression when worse), at least those it
    has and at most ``max_pairs``: what ``next_look`` steps towards, and what the rest of a
    session's looks are expected to take (``ab_judging.next_looks(...).after``). ``min_effect``: as a
    log ratio's size (``log_effect``)."""
    from pytest_mxperf.judge import sequential
    n = len(signed)
    if n == 0 or sd is None:
        return min(max_pairs, max(n, STAGE1_PAIRS))
    eff = min_effect
    c_r, c_u = sequential.boundaries(q / max(1, n_figures), ALPHA_PASS, max_pairs, df)
    m = statistics.fmean(signed)
    sd = max(sd, MIN_SD)
    wanted = []
    if m > -eff:
        wanted.append((c_u * sd / (m + eff)) ** 2)
    if m < 0:
        wanted.append((c_r * sd / -m) ** 2)
    need = math.ceil(min(wanted)) if wanted else max_pairs
    return int(min(max_pairs, max(n, need)))


#: the paths of pairs ``expected_pairs`` follows a figure's looks along (drawn from a fixed
#: seed: the same pairs give the same expectation)
EXPECTED_PATHS = 256


def expected_pairs(signed: Sequence[float], sd: Optional[float], df: Optional[int], *, min_effect: float, q: float,
                   n_figures: int, max_pairs: int = SEQUENTIAL_MAX_PAIRS, truth: float = 0.0) -> float:
    """The pairs in all a figure not called yet is expected to have once it is called: its
    looks followed forward from the pairs it has, each step as ``next_look`` takes it and each
    call as ``sequential.decide`` makes it (``_steps``, ``_called``: the two for many paths at
    once), along ``EXPECTED_PATHS`` paths of pairs drawn at its
    spread around ``truth`` (a log ratio, > 0 better), the number of pairs averaged. Each pair a
    path adds adds a degree of freedom to the spread it is judged at (its own pairs join its
    kind's pool), so a figure judged at a spread of few degrees, whose boundaries are wide, is
    not taken to keep them. Where ``pairs_to_call`` takes the mean so far for the truth and its
    crossing for certain, this counts the looks a path's noise keeps undecided.
    ``min_effect``: as a log ratio's size (``log_effect``). Pure (a fixed seed)."""
    import numpy as np
    from pytest_mxperf.judge import sequential
    n0 = len(signed)
    if n0 == 0 or sd is None:
        return float(min(max_pairs, max(n0, STAGE1_PAIRS)))
    if n0 >= max_pairs:
        return float(n0)
    sd, eff, alpha = max(sd, MIN_SD), min_effect, q / max(1, n_figures)
    # (c_R, c_U) at k pairs, k = n0..max_pairs: the spread's degrees grown by the pairs added
    table = np.array([(math.inf, math.inf)] * n0 + [
        sequential.boundaries(alpha, ALPHA_PASS, max_pairs, None if df is None else df + k - n0)
        for k in range(n0, max_pairs + 1)])
    rng = np.random.default_rng(20261203)
    s = np.full(EXPECTED_PATHS, float(sum(signed)))  # the open paths' sums and pairs
    n = np.full(EXPECTED_PATHS, n0)
    ended = []                                 # the pairs of the paths called
    while n.size:
        step = _steps(s, n, sd, eff, table[n, 0], table[n, 1], max_pairs)
        s = s + truth * step + sd * np.sqrt(step) * rng.standard_normal(n.size)
        n = n + step
        called = _called(s, n, sd, eff, table[n, 0], table[n, 1], max_pairs)
        ended.append(n[called])
        s, n = s[~called], n[~called]
    return float(np.concatenate(ended).mean())


def _steps(s, n, sd: float, eff: float, c_r, c_u, max_pairs: int):
    """``next_look`` of many paths at once (their sums ``s`` of ``n`` pairs, each path's
    boundaries ``c_r``, ``c_u``): the pairs each gets before its next look. Held to
    ``next_look`` by tests/test_pair_by_pair.py."""
    import numpy as np
    m = s / n
    with np.errstate(divide="ignore", invalid="ignore"):
        wanted = np.where(m > -eff, (c_u * sd / (m + eff)) ** 2, np.inf)
        wanted = np.where(m < 0, np.minimum(wanted, (c_r * sd / -m) ** 2), wanted)
    need = np.clip(np.ceil(np.where(np.isfinite(wanted), wanted, max_pairs)), n, max_pairs) - n
    return np.minimum(max_pairs - n, np.maximum(1, np.minimum(need, np.maximum(n, STAGE1_PAIRS - n)))).astype(int)


def _called(s, n, sd: float, eff: float, c_r, c_u, max_pairs: int):
    """``sequential.decide(...).decided`` of many paths at once (as ``_steps``): called a
    regression, an improvement or unchanged, or at ``max_pairs``. Held to ``decide`` by
    tests/test_pair_by_pair.py."""
    import numpy as np
    m = s / n
    se = sd / np.sqrt(n)
    return (((m < -eff) & (m + c_r * se < 0)) | ((m > eff) & (m - c_r * se > 0))
            | (m - c_u * se > -eff) | (n >= max_pairs))


def next_look(signed: Sequence[float], sd: Optional[float], df: Optional[int], *, min_effect: float, q: float,
              n_figures: int, max_pairs: int = SEQUENTIAL_MAX_PAIRS) -> int:
    """How many more pairs a figure not called yet gets before its next look: as many as its
    mean so far, were it the truth, needs to be called (``pairs_to_call``), at least one, at
    most as many again as it has or up to ``STAGE1_PAIRS`` in all, whichever is more, and never
    past ``max_pairs`` in all; with no spread to judge at (``sd`` None: a kind this machine's
    history has not seen, after a first stage of one pair, ``planning.first_pairs``), up to
    ``STAGE1_PAIRS`` in all. Looking after several pairs instead of each one only lowers the
    rule's error rates (its boundary is crossed less often). ``min_effect``: as a log ratio's
    size (``log_effect``)."""
    n = len(signed)
    left = max_pairs - n
    if left <= 0:
        return 0
    need = pairs_to_call(signed, sd, df, min_effect=min_effect, q=q, n_figures=n_figures, max_pairs=max_pairs) - n
    return int(min(left, max(1, min(need, max(n, STAGE1_PAIRS - n)))))


# ----------------------------------------------------------------------------- which spreads pool

def spread_family(metric, key: str) -> str:
    """Which figures share a pooled spread: the figures the rounds time (``kinds.ROUND_FIGURES``: the
    ratio of two sides' rounds run back to back) of one kind of cell (the first part of the
    figure's ``key``: score, train, io, kvstore, ...) are one family, ``rounds/<kind>``; any
    other figure (a latency percentile: the ratio of the two sides' slowest batches, which a
    neighbour's timeslice sets) is its own."""
    if metric.name in kinds.ROUND_FIGURES:
        return f"rounds/{cell_of(key).split('/', 1)[0]}"
    return metric.name


def family_of_key(key: str) -> Optional[str]:
    """``spread_family`` of a figure known by its key alone (a history row); None for a key
    that names no figure of a kind of cell (a family's own row, which the history also keeps)."""
    cell, metric = split_metric_key(key)
    if "/" not in cell:
        return None
    name = metric or PRIMARY.get(cell.split("/", 1)[0])
    return spread_family(METRICS[name], key) if name in METRICS else None


def history_by_kind(known: Mapping[str, Spread]) -> Dict[str, Spread]:
    """This machine's history of duet pair spreads (figure key or kind -> Spread,
    ``HistoryStore.pair_spreads``) summed per kind of figure (``family_of_key``) from its
    figures' rows; the kinds' own rows, which the history also keeps, are not counted again."""
    out: Dict[str, Spread] = {}
    for k, s in known.items():
        f = family_of_key(k)
        if f is not None:
            out[f] = out.get(f, Spread()) + s
    return out
