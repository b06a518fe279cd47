"""Decisions: did a figure get worse than its baseline, or than the reference install?

Every judged figure is a ``Comparison``: per-process values of one metric (samples.Metric:
unit, direction, rule) now and in the baseline, each process labelled with the state of
the machine while it ran (``machine_state``: "quiet", "slowed" or unknown). The statistics
are in ``stats.py``; this module only decides.

Baseline mode, rule ``processes`` (throughput, latency, kvstore seconds, cluster
samples/s, seconds to accuracy). Each figure has a **resolution** (``Resolution``): the
smallest change of it this machine can tell from its own drift between sessions, stated by
the baseline (``Baseline.resolution``). When the baseline pools k >= 2 recorded
sessions (``--perf-update-baselines=add``) it comes from the spread of the figure's session
medians (sample SD s of their logs, k - 1 degrees of freedom): a new session's median falls
below the baseline by more than ``t(k-1, 0.975) x s x sqrt(1 + 1/k)`` (in logs) by drift
alone in 2.5% of unchanged sessions (``RESOLUTION_LEVEL``, the drift test's level). With one recorded session it is *provisional*: the same formula with
the between-process spread standing in for the unknown between-session drift (a short
recording does not see a slow spell of a shared VM; record again later with =add). A
figure is a **regression** when all hold:

1. *beyond the resolution*: the median of per-process values is worse than the baseline's
   by more than ``threshold = max(min_effect, resolution)`` (``MIN_EFFECT``, 5 %,
   ``--perf-min-effect``);
2. *significant across the session*: two tests must both reject after Benjamini-Hochberg
   across the session's figures: the one-sided Mann-Whitney U on per-process values at
   ``FDR_Q`` (0.05), and the drift test (Student t of the log change against the
   resolution's scale: how far the session medians spread) at ``DRIFT_SHARE`` x ``FDR_Q``
   (0.025). Session drift moves every process of a session, so the U test alone rejects
   under drift; the drift test does not. Under no change, BH at level q makes a session of
   any number of figures fail with probability at most q (Simes), and that bound is reached
   when the normal drift model holds exactly (simulated: 3.6% of 1500 sessions of 10
   figures with the drift test at 0.05); the drift test is held to half the level because it
   rests on a model fitted to a few sessions, and a shared VM's drift is burstier than that
   model, while the rank test is exact;
3. *the fast end moved too*: the ``FAST_END`` quantile of the per-process figures (the
   fast processes) is also worse by more than ``min_effect``. Interference from the machine
   only ever slows processes down (the noise model behind Chen and Revels' minimum-time
   estimator); a slower release slows them all. A significant slowdown of the median with
   an unmoved fast end is "unresolved" (fails, "re-run"), not a regression.

A slowdown never passes silently. Beyond ``min_effect`` but within the resolution it is
**below-resolution** ("below this machine's resolution of X%: use A/B"); beyond the
resolution but not significant across the session it is **unclear**. Both are named at the
top of the session's messages and fail only when the failure policy asks
(``--perf-fail-on +below-resolution`` / ``+unclear``): the baseline cannot decide them, an
A/B run against the recorded install can (``--perf-reference baseline``). Only a slowdown
that is significant across the session can be unresolved, so unresolved, like regression,
is controlled per session, not per figure (tests/test_resolution.py simulates it).

**Busy machine vs slower MXNet.** Processes that ran while other processes took the CPUs
("slowed": the load of other processes and steal, measured while the worker ran, see
``machine/state.py``) are left out on both sides before the statistics: a neighbour cannot
make a regression. Processes whose MXNet-independent calibration probes (before and after)
ran slow ("slow-spell": the shared VM itself was slow) stay in, since a spell often begins
or ends inside a process; but a slowdown whose current processes ran mostly in a slow spell,
more than the baseline's did, is not called a regression: it is re-measured (suspect) and
then unresolved, unless it is deeper than the spell itself: the probe slowed to x0.63 of
the machine's quiet speed cannot explain a cell at x0.17 (the probe moves further than MXNet
with the regimes, so this bound errs towards excusing). A workload that became less parallel
on a quiet machine is judged like any other slowdown (neither the load nor the probe sees
MXNet's threads), and so is one whose setup gave it fewer CPUs (threading variables and
``taskset`` do not reach the probe; a process whose probe ran under another cgroup quota
than the reference's is "unknown", not a slow spell: ``machine_states``). GPU cells are not
screened (their CPU use says nothing about the GPU).

**suspect**: worse past the threshold but not (yet) significant, or significant with
fewer than ``CONFIRM_PROCESSES`` processes (a few processes can be significant by the luck
of the draw), or within the resolution by fewer processes than can tell, or too few quiet
processes: the gate re-measures it with up to ``CONFIRM_PROCESSES`` processes at the end of
the session and judges again. **unresolved**: after confirmation, significant but with an
unmoved fast end or measured in a slow spell, or too few quiet processes to test at all (a
busy machine); it fails the session by default with its own message.
**improvement** mirrors regression. **not-gated**: the baseline has fewer than
``MIN_BASELINE_PROCESSES`` processes (shown, not judged). **no-baseline**: nothing recorded.

Rule ``growth`` (peak host / GPU memory) is ``judge/growth.py``'s; A/B modes are
``judge/ab_pairs.py``'s (process pairs) and ``judge/verdict_duet.py``'s (duet pairs). Rule
``discrete`` (epochs to a target accuracy over seeds): worse when the median over seeds
grows by more than ``max(EPOCHS_STEP, EPOCHS_GROWTH x baseline)`` epochs.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.judge.growth import judge_growth
from pytest_mxperf.judge.resolution import Resolution, percent_text, resolution_for
from pytest_mxperf.judge.thresholds import (
    CONFIRM_PROCESSES,
    DRIFT_SHARE,
    EPOCHS_GROWTH,
    EPOCHS_STEP,
    FAST_END,
    FDR_Q,
    MIN_BASELINE_PROCESSES,
    MIN_EFFECT,
    MIN_QUIET,
    NOISE_Z,
    SPELL_MARGIN,
    SPELL_SHARE,
    effect_for,
)
from pytest_mxperf.judge.verdict_record import Verdict, describe_change
from pytest_mxperf.model import stats
from pytest_mxperf.model.measurement import METRICS, Metric

#: how the reason of a figure that has a baseline recording but is not judged against it
#: starts: the recording's processes were had another way (``outcome/judging.unlike_sharing``)
NOT_COMPARED_UNLIKE = "not compared: the baseline measured this cell"


@dataclasses.dataclass
class Comparison:
    """One judged figure: per-process values now and in the baseline, with their labels."""

    metric: Metric
    current: Sequence[float]
    baseline: Sequence[float]
    current_states: Optional[Sequence[Optional[str]]] = None
    baseline_states: Optional[Sequence[Optional[str]]] = None
    session_medians: Sequence[float] = ()     # the baseline's earlier sessions (drift)
    screened: bool = True                     # False for GPU cells
    confirmed: bool = False                   # the current side was already re-measured
    state_reasons: Sequence[str] = ()         # why processes were labelled slowed
    spell_depth: Optional[float] = None       # lowest probe / quiet reference of the spell processes
    min_effect: float = MIN_EFFECT            # set by judge_session
    resolution: Optional[Resolution] = None   # as the baseline states it (None: from the values here)


# ----------------------------------------------------------------------------- helpers

def _quiet(values, states, screened) -> Tuple[List[float], int]:
    values = list(values or [])
    if not screened or not states or len(states) != len(values):
        return stats.finite_positive(values), 0
    kept = [v for v, s in zip(values, states) if s != "slowed"]
    return stats.finite_positive(kept), len(values) - len(kept)


def _spell_share(values, states, screened) -> Optional[float]:
    """The share of the kept (not slowed) processes that ran in a slow spell, or None."""
    values = list(values or [])
    if not screened or not states or len(states) != len(values):
        return None
    kept = [s for v, s in zip(values, states) if s != "slowed" and stats.finite_positive([v])]
    return sum(s == "slow-spell" for s in kept) / len(kept) if kept else None


@dataclasses.dataclass
class _Prepared:
    c: Comparison
    cur: List[float]
    base: List[float]
    change: float
    threshold: float
    allowance: Optional[float]
    drift: Optional[float]
    p_worse: Optional[float]
    p_better: Optional[float]
    excluded: Tuple[int, int]
    fast_change: float
    spell: Tuple[Optional[float], Optional[float]] = (None, None)
    res: Optional[Resolution] = None
    p_test: Tuple[Optional[float], Optional[float]] = (None, None)   # Mann-Whitney, drift (worse side)
    p_test_better: Tuple[Optional[float], Optional[float]] = (None, None)


def _early(c: Comparison, min_effect: float) -> Tuple[Optional[_Prepared], Optional[Verdict]]:
    m = c.metric
    cur_all = stats.finite_positive(c.current)
    base_all = stats.finite_positive(c.baseline)
    base_fields = dict(metric=m.name, unit=m.unit, n_current=len(cur_all), n_baseline=len(base_all),
                       current_median=statistics.median(cur_all) if cur_all else None,
                       baseline_median=statistics.median(base_all) if base_all else None)
    if not base_all:
        return None, Verdict("no-baseline", "no baseline figure for this cell on this machine "
                             "(record one with --perf-update-baselines)", **base_fields)
    if not cur_all:
        return None, Verdict("unchanged", "no successful process to compare", **base_fields)
    change_all = base_fields["current_median"] / base_fields["baseline_median"] - 1.0
    if m.rule == "growth":
        return None, judge_growth(m, cur_all, base_all)
    if m.rule == "discrete":
        bm, cm = base_fields["baseline_median"], base_fields["current_median"]
        step = max(EPOCHS_STEP, EPOCHS_GROWTH * bm)
        worse_by = (cm - bm) if not m.higher_is_better else (bm - cm)
        kind = "regression" if worse_by > step else ("improvement" if worse_by < -step else "unchanged")
        return None, Verdict(kind, f"median {cm:g} vs {bm:g} {m.unit}; rule: a change of more than "
                             f"{step:g} {m.unit} (max({EPOCHS_STEP}, {100 * EPOCHS_GROWTH:.0f}% of the "
                             f"baseline)) is called", change=change_all, **base_fields)
    if len(base_all) < MIN_BASELINE_PROCESSES:
        return None, Verdict("not-gated", f"{describe_change(change_all, m)}, not judged: the baseline has "
                             f"{len(base_all)} process(es), fewer than {MIN_BASELINE_PROCESSES}; re-record "
                             "with --perf-update-baselines", change=change_all, **base_fields)
    cur, ex_c = _quiet(c.current, c.current_states, c.screened)
    base, ex_b = _quiet(c.baseline, c.baseline_states, c.screened)
    res = c.resolution if c.resolution is not None else resolution_for(c, base or base_all)
    if len(cur) < MIN_QUIET or len(base) < MIN_QUIET or (
            (ex_c or ex_b) and stats.min_mannwhitney_p(len(cur), len(base)) > FDR_Q):
        # too few quiet processes left for any test to decide: the machine was busy
        why = (f"{describe_change(change_all, m)} but only {len(cur)} current and {len(base)} baseline process(es) "
               f"ran on a quiet machine, too few to decide ({ex_c}+{ex_b} left out as slowed"
               + (f": {c.state_reasons[0]}" if c.state_reasons else "") + ")"
               + ("; the baseline itself was recorded on a busy machine: re-record it" if ex_b * 2 > len(base_all)
                  else ""))
        if m.oriented(change_all) >= -min_effect:
            # no slowdown beyond the minimum effect to confirm; a better figure from a busy
            # machine is not evidence of an improvement either
            return None, Verdict("unchanged", why, change=change_all, excluded=(ex_c, ex_b), busy=True,
                                 **base_fields)
        r_frac = res.fraction(m.higher_is_better) if res is not None else 0.0
        if m.oriented(change_all) >= -max(min_effect, r_frac):
            # a slowdown this machine could not tell from its drift even when quiet
            return None, Verdict("below-resolution", why + f"; {_below_txt(res, m)}", change=change_all,
                                 threshold=max(min_effect, r_frac), excluded=(ex_c, ex_b), busy=True,
                                 resolution=res.to_dict(m.higher_is_better) if res else None, **base_fields)
        kind = "unresolved" if c.confirmed else "suspect"
        tail = ("; could not confirm on a busy machine: re-run when it is quiet" if c.confirmed
                else "; re-measuring")
        return None, Verdict(kind, why + tail, change=change_all, excluded=(ex_c, ex_b), busy=True,
                             **base_fields)
    cm, bm = statistics.median(cur), statistics.median(base)
    change = cm / bm - 1.0
    # the noise of the current median of n processes (within a session): says whether a
    # first stage can tell a slowdown inside the resolution from one beyond it (not part of
    # the threshold)
    if res is not None and res.process_sd is not None:
        allowance = NOISE_Z * stats.MEDIAN_SE * res.process_sd / math.sqrt(len(cur))
    else:
        allowance = stats.noise_allowance(base, len(cur), NOISE_Z)
    r_frac = res.fraction(m.higher_is_better) if res is not None else None
    drift = r_frac if res is not None and not res.provisional else None
    threshold = max(min_effect, r_frac or 0.0)
    less, greater = stats.mannwhitney_p(cur, base, "less"), stats.mannwhitney_p(cur, base, "greater")
    mw_worse, mw_better = (less, greater) if m.higher_is_better else (greater, less)
    d = math.log(cm) - res.center if res is not None and res.center is not None else math.log(cm / bm)
    d_worse = d * (1.0 if m.higher_is_better else -1.0)   # negative: worse
    drift_worse = res.p_worse(d_worse, len(cur)) if res is not None else None
    drift_better = res.p_worse(-d_worse, len(cur)) if res is not None else None
    # both tests must reject: the processes differ, and by more than the session drift explains
    p_worse = _both([mw_worse], [drift_worse])[0]
    p_better = _both([mw_better], [drift_better])[0]
    qf = FAST_END if m.higher_is_better else 1.0 - FAST_END
    fast_change = stats.quantile(cur, qf) / stats.quantile(base, qf) - 1.0
    spell = (_spell_share(c.current, c.current_states, c.screened),
             _spell_share(c.baseline, c.baseline_states, c.screened))
    return _Prepared(c, cur, base, change, threshold, allowance, drift, p_worse, p_better, (ex_c, ex_b),
                     fast_change, spell, res, (mw_worse, drift_worse), (mw_better, drift_better)), None


def _both(rank: Sequence[Optional[float]], drift: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Per figure, the p (or BH q) at which both tests reject, on the rank test's scale:
    max(rank, drift / DRIFT_SHARE), capped at 1; the rank test alone without a drift test."""
    out = []
    for r, d in zip(rank, drift):
        if r is None or d is None:
            out.append(r)
        else:
            out.append(min(1.0, max(r, d / DRIFT_SHARE)))
    return out


def _below_txt(res: Optional[Resolution], m: Metric) -> str:
    if res is None:
        return "below this machine's resolution"
    return (f"below this machine's resolution of {percent_text(res.fraction(m.higher_is_better))} for this figure "
            f"({res.describe(m.higher_is_better)}): the baseline cannot tell a change this small from the "
            "machine's drift between sessions; use A/B (--perf-reference baseline)")


def _decide(pr: _Prepared, q_worse: Optional[float], q_better: Optional[float], q: float) -> Verdict:
    c, m = pr.c, pr.c.metric
    n_c, n_b = len(pr.cur), len(pr.base)
    common = dict(metric=m.name, unit=m.unit, change=pr.change, threshold=pr.threshold, n_current=n_c,
                  n_baseline=n_b, current_median=statistics.median(pr.cur),
                  baseline_median=statistics.median(pr.base), noise_allowance=pr.allowance,
                  drift_allowance=pr.drift, excluded=pr.excluded,
                  resolution=pr.res.to_dict(m.higher_is_better) if pr.res is not None else None)
    w = m.oriented(pr.change)
    thr = percent_text(pr.threshold)
    if pr.res is not None and pr.threshold > c.min_effect:
        thr += " (the resolution)"
    size = f"{describe_change(pr.change, m)}"
    n_txt = f"n={n_c} vs {n_b} processes"
    if any(pr.excluded):
        n_txt += f", {pr.excluded[0]}+{pr.excluded[1]} slowed left out"
    sig = q_worse is not None and q_worse <= q
    p_txt = "p=-" if pr.p_worse is None else f"p={pr.p_worse:.3g}"
    if w < -c.min_effect:
        beyond = w < -pr.threshold
        if not c.confirmed:
            if beyond and sig and n_c < CONFIRM_PROCESSES:
                # a few processes can be significant by luck of the draw: confirm before failing
                return Verdict("suspect", f"{size} > {thr}, {p_txt} with only {n_c} processes; "
                               "re-measuring to confirm", p_value=pr.p_worse, q_value=q_worse, **common)
            if beyond and not sig:
                return Verdict("suspect", f"{size} > {thr} but not significant yet ({n_txt}, {p_txt}); "
                               "re-measuring with more processes", p_value=pr.p_worse, q_value=q_worse, **common)
            if not beyond and n_c < CONFIRM_PROCESSES and w < -(pr.threshold - (pr.allowance or 0.0)):
                # inside the resolution, but the median of so few processes could be beyond it
                return Verdict("suspect", f"{size}, within {thr} but {n_c} processes cannot tell it from more; "
                               "re-measuring with more processes", p_value=pr.p_worse, q_value=q_worse, **common)
        if not beyond:
            return Verdict("below-resolution", f"{size} ({n_txt}): {_below_txt(pr.res, m)}",
                           p_value=pr.p_worse, q_value=q_worse, **common)
        if sig and m.oriented(pr.fast_change) >= -c.min_effect:
            # Interference only ever slows processes down; a slower release slows them all.
            # When the fastest processes kept their speed, this is not evidence enough.
            return Verdict("unresolved", f"{size} > {thr} ({p_txt}, {n_txt}) but the fastest "
                           f"processes did not slow down ({100 * pr.fast_change:+.1f}% at the fast end): "
                           "interference the probe did not see, or a slowdown of only some processes; re-run",
                           p_value=pr.p_worse, q_value=q_worse, **common)
        cur_spell, base_spell = pr.spell
        factor = (1.0 + pr.change) if m.higher_is_better else 1.0 / (1.0 + pr.change)  # < 1: slower
        beyond_spell = c.spell_depth is not None and factor < c.spell_depth * (1.0 - c.min_effect)
        if sig and cur_spell is not None and cur_spell > SPELL_SHARE \
                and cur_spell - (base_spell or 0.0) > SPELL_MARGIN and not beyond_spell:
            kind = "unresolved" if c.confirmed else "suspect"
            return Verdict(kind, f"{size} > {thr} ({p_txt}, {n_txt}) but {100 * cur_spell:.0f}% of the "
                           f"current processes ran in a slow spell of the machine (against "
                           f"{100 * (base_spell or 0.0):.0f}% of the baseline's)"
                           + (f": {c.state_reasons[0]}" if c.state_reasons else "")
                           + ("; could not confirm on a busy machine: re-run when it is quiet" if c.confirmed
                              else "; re-measuring"),
                           p_value=pr.p_worse, q_value=q_worse, busy=True, **common)
        if sig:
            why = f"{size} > {thr}, {p_txt}, q={q_worse:.3g} <= {q:g} ({n_txt})"
            if beyond_spell and cur_spell is not None and cur_spell > SPELL_SHARE:
                why += (f"; {100 * cur_spell:.0f}% of the processes ran in a slow spell, but the spell slowed the "
                        f"machine's probe to x{c.spell_depth:.2f} at worst and this is x{factor:.2f}: more than "
                        "the spell explains")
            return Verdict("regression", why, p_value=pr.p_worse, q_value=q_worse, **common)
        mw, dr = pr.p_test
        tests = ", ".join(x for x in ((f"processes p={mw:.3g}" if mw is not None else ""),
                                      (f"drift p={dr:.3g}" if dr is not None else "")) if x)
        return Verdict("unclear", f"{size} > {thr} but not significant across the session's figures "
                       f"({n_txt}; {tests}; q={'-' if q_worse is None else f'{q_worse:.3g}'} > {q:g}): could be "
                       "this machine's drift between sessions; not failing (--perf-fail-on +unclear fails on it); "
                       "re-run, or use A/B (--perf-reference baseline)",
                       p_value=pr.p_worse, q_value=q_worse, **common)
    if w > pr.threshold and q_better is not None and q_better <= q:
        return Verdict("improvement", f"{size} > {thr}, p={pr.p_better:.3g}, q={q_better:.3g} ({n_txt}); "
                       "consider updating the baseline (--perf-update-baselines)",
                       p_value=pr.p_better, q_value=q_better, **common)
    return Verdict("unchanged", f"{size}, within the {thr} threshold or not significant ({n_txt})",
                   p_value=pr.p_worse if w < 0 else pr.p_better, q_value=q_worse if w < 0 else q_better, **common)


def judge_session(comparisons: Mapping[str, Comparison], *, min_effect: float = MIN_EFFECT,
                  q: float = FDR_Q) -> Dict[str, Verdict]:
    """Verdicts for all figures of a session, Benjamini-Hochberg at rate ``q`` across them
    (worse and better are separate families over the figures judged by a test)."""
    out: Dict[str, Verdict] = {}
    prepared: Dict[str, _Prepared] = {}
    for key, c in comparisons.items():
        c.min_effect = effect_for(c.metric.name, min_effect, key)  # a tail's is wider (thresholds.TAILS)
        pr, early = _early(c, c.min_effect)
        if early is not None:
            out[key] = early
        else:
            prepared[key] = pr
    keys = list(prepared)
    # BH of each test over the session's figures; a figure is significant when both reject,
    # the drift test at DRIFT_SHARE of the level: q = max(q_rank, q_drift / DRIFT_SHARE)
    q_worse = _both(*(stats.benjamini_hochberg([prepared[k].p_test[i] for k in keys]) for i in (0, 1)))
    q_better = _both(*(stats.benjamini_hochberg([prepared[k].p_test_better[i] for k in keys]) for i in (0, 1)))
    for k, qw, qb in zip(keys, q_worse, q_better):
        out[k] = _decide(prepared[k], qw, qb, q)
    return {k: out[k] for k in comparisons}


def judge(current: Sequence[float], baseline: Optional[Sequence[float]], *, metric: str = "throughput",
          min_effect: float = MIN_EFFECT, q: float = FDR_Q, confirmed: bool = False,
          current_states=None, baseline_states=None, session_medians: Sequence[float] = (),
          resolution: Optional[Resolution] = None) -> Verdict:
    """Verdict for ONE figure (no multiple-testing adjustment beyond itself). Without a
    ``resolution``, it comes from ``session_medians`` (two or more) or, provisional, from the
    baseline's processes."""
    c = Comparison(METRICS[metric], current, baseline or [], current_states, baseline_states,
                   session_medians, confirmed=confirmed, resolution=resolution)
    return judge_session({"cell": c}, min_effect=min_effect, q=q)["cell"]


# ----------------------------------------------------------------------------- A/B mode


# ----------------------------------------------------------------------------- context


