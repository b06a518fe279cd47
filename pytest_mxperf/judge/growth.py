"""Rule ``growth``: peak host memory (worker RSS) and peak GPU memory, the same in baseline
and A/B mode.

A process's peak is near-deterministic (one install gives Inception-BN b2 384.4-386.3
MiB in most processes here), but about one process in ten peaks some 17 MiB lower (367.5 to
369.2, on either side, with either install; never higher: the VM's kdamond pages out cold
pages, and MXNet's threads may touch their memory in another order), so each side's *worst*
(highest) process is its clean value, and a low process must neither hide a growth nor fake
one. A **regression** when the current side's upper median process (its middle one; of two,
the higher) is above the baseline's (reference's) worst process by more than ``allowance =
max(MEMORY_GROWTH (5 %) x that worst process, MEMORY_FLOOR_MIB (24 MiB), MEMORY_SPREAD_K
(3) x spread)``, spread being the larger over the two sides of worst minus upper median: at
least half the current processes are beyond every baseline process. An **improvement**
mirrors it; anything else is unchanged. The floor covers what two venvs of the same
packages differ by (0.5-4 MiB here) and a lone low process (one process a side: smoke
runs). Measured here (whole worker process, MXNet 1.9.1 with scipy, 2 cores): Inception-BN
b2 386 MiB, b8 427 (+41 MiB, a growth), b4 about +14 MiB (not); ResNet-50 v2 b16 649, b32
859 (without scipy). Two installs of one MXNet differ when they load different packages:
MXNet imports scipy when it is installed (+63 MiB here, 385 vs 322), so reference venvs
copy the candidate's (``installs.companion_requirements``).
"""

from __future__ import annotations

import statistics
from typing import Sequence, Tuple

from pytest_mxperf.judge.thresholds import MEMORY_FLOOR_MIB, MEMORY_GROWTH, MEMORY_SPREAD_K
from pytest_mxperf.judge.verdict_record import Verdict, describe_change
from pytest_mxperf.model import stats
from pytest_mxperf.model.measurement import Metric


def _upper_median(values: Sequence[float]) -> float:
    """The higher middle value (of two, the higher one)."""
    return sorted(values)[len(values) // 2]


def growth_allowance(current: Sequence[float], baseline: Sequence[float], unit: str = "MiB",
                     higher_is_better: bool = False) -> Tuple[float, str]:
    """The rule ``growth``'s allowance in the figure's unit, and how it was reached:
    ``max(MEMORY_GROWTH x the baseline's worst process, MEMORY_FLOOR_MIB (MiB figures),
    MEMORY_SPREAD_K x spread)``; spread is the larger, over the two sides, of the distance
    from a side's upper median process to its worst one (a process the machine took pages
    from, lower, does not widen it)."""
    sign = -1.0 if higher_is_better else 1.0            # sign * value: larger is worse
    worst = max(sign * v for v in baseline)
    spread = max(max(sign * v for v in side) - _upper_median([sign * v for v in side])
                 for side in (current, baseline))
    parts = [(MEMORY_GROWTH * worst, f"{100 * MEMORY_GROWTH:.0f}% of {worst:.1f}")]
    if unit == "MiB":
        parts.append((MEMORY_FLOOR_MIB, f"{MEMORY_FLOOR_MIB:g} MiB"))
    parts.append((MEMORY_SPREAD_K * spread, f"{MEMORY_SPREAD_K:g} x {spread:.1f} {unit} spread between processes"))
    allowance = max(v for v, _ in parts)
    return allowance, f"{allowance:.1f} {unit} = max({', '.join(t for _, t in parts)})"


def judge_growth(m: Metric, current: Sequence[float], baseline: Sequence[float]) -> Verdict:
    """Rule ``growth`` (see the module doc): a regression when the current side's upper median
    process is worse than the baseline's (reference's) worst process by more than
    ``growth_allowance``, i.e. at least half of the current processes are; an improvement
    mirrors it; else unchanged, whatever the medians say."""
    cur, base = stats.finite_positive(current), stats.finite_positive(baseline)
    cm, bm = statistics.median(cur), statistics.median(base)
    change = _upper_median(cur) / _upper_median(base) - 1.0     # what the rule compares: the upper medians
    allowance, how = growth_allowance(cur, base, m.unit, m.higher_is_better)
    sign = -1.0 if m.higher_is_better else 1.0          # sign * value: larger is worse
    worst_c, worst_b = max(sign * v for v in cur), max(sign * v for v in base)
    grown = _upper_median([sign * v for v in cur]) - worst_b       # > 0: worse than every baseline process
    shrunk = _upper_median([sign * v for v in base]) - worst_c
    fields = dict(metric=m.name, unit=m.unit, change=change, threshold=allowance / worst_b, n_current=len(cur),
                  n_baseline=len(base), current_median=cm, baseline_median=bm)
    n_txt = f"{len(cur)} vs {len(base)} processes"
    word = "above" if sign > 0 else "below"
    if grown > allowance:
        n = sum(sign * v - worst_b > allowance for v in cur)
        why = (f"{describe_change(change, m)}: {n} of {len(cur)} current processes are {word} the worst baseline/"
               f"reference process ({sign * worst_b:.1f} {m.unit}) by more than the allowance of {how} "
               f"({n_txt})")
        if m.name in ("peak_rss_mib", "gpu_memory_mib"):
            why += "; memory growth turns batch sizes that fit today into out-of-memory failures"
        if m.name == "peak_rss_mib":
            why += (" (the whole worker process: a package MXNet's import loads on one side only, e.g. scipy, "
                    "counts too; meta loaded_companions says which)")
        return Verdict("regression", why, **fields)
    if shrunk > allowance:
        n = sum(sign * v - worst_c > allowance for v in base)
        return Verdict("improvement", f"{describe_change(change, m)}: {n} of {len(base)} baseline/reference processes "
                       f"are {word} the worst current process ({sign * worst_c:.1f} {m.unit}) by more than the "
                       f"allowance of {how} ({n_txt})", **fields)
    return Verdict("unchanged", f"{describe_change(change, m)}: the worst processes {sign * worst_c:.1f} now vs "
                   f"{sign * worst_b:.1f} {m.unit}, within the allowance of {how} ({n_txt}); rule: a change is "
                   "called when at least half of one side's processes are beyond the other side's worst by more "
                   "than the allowance", **fields)


