"""The numbers the rules judge by, defined once (see judge/verdict.py's module doc for what each
one does and why it has this value). The minimum effect is the option's default
(model/options.py)."""

from __future__ import annotations

import dataclasses
import fnmatch
from typing import Mapping, Optional, Tuple

from pytest_mxperf.model import kinds, options

MIN_EFFECT = options.MIN_EFFECT  # smallest change (fraction) ever called a regression or improvement
FDR_Q = 0.05                # Benjamini-Hochberg false discovery rate across a session's figures
DRIFT_SHARE = 0.5           # baseline mode: the drift test's BH level is this share of FDR_Q (see above)
NOISE_Z = 2.0               # noise allowance in standard errors of the median difference
RESOLUTION_LEVEL = DRIFT_SHARE * FDR_Q  # the resolution: the change the drift test calls for one figure alone
MIN_BASELINE_PROCESSES = 5  # a baseline figure with fewer processes is shown, not gated
CONFIRM_PROCESSES = 10      # a suspect is re-measured until the current side has this many
MIN_QUIET = 2               # quiet processes a side needs before it can be judged
MEMORY_GROWTH = 0.05        # rule "growth": every process worse than every baseline process by more than
MEMORY_FLOOR_MIB = 24.0     # ... max(MEMORY_GROWTH x the baseline median, this many MiB,
MEMORY_SPREAD_K = 3.0       # ... this x the larger range between the processes of one side)
EPOCHS_STEP = 1             # rule "discrete": worse by more than max(this, ...
EPOCHS_GROWTH = 0.25        # ... this x the baseline's median epochs)
STARTUP_CHANGE_NOTE = 0.50  # bind + first-batch time change that becomes a note
FAST_END = 0.75             # the quantile of per-process figures that is the "fast end"

KINDS = ("regression", "improvement", "unchanged", "suspect", "unresolved", "not-gated", "no-baseline",
         "below-resolution", "unclear", "unexplained", "machine-differs", "system-differs")
FAILING = ("regression", "unresolved")
#: a tail figure (the latency p99: the slowest 1% of a cell's batches) is called changed
#: only beyond TAIL_MIN_EFFECT (or the session's minimum effect, when larger). On a shared VM
#: the tail is set by the machine's interruptions (a neighbour's timeslice of 16-100 ms
#: against a LeNet b1 batch of 0.3 ms), the same for any setup: the latency cells' duet
#: pairs spread 6.8-8.0% in p99 A/A on a quiet machine and 12.9-31.4% in a daily-gate
#: session, 1.5-6.4x their rounds' (benchmarks/results/duet-spread-2026-11-26.txt); the setup's speed shows in the p50 and
#: the rounds, judged at the minimum effect.
TAIL_MIN_EFFECT = 0.20
#: the tail figures: those ``model/kinds.py`` declares ``tail`` (a live view)
TAILS = kinds.TAILS


#: the least minimum effect a threshold may set for a cell: unchanged A/B sessions of 24 cells
#: with every figure at 1% or 2% failed in 6.8% of replays (the default selection's corpus),
#: above the 5% budget; at 3% in 3.4%, as at the default 5%
#: (benchmarks/results/threshold-floor-2026-11-27.txt)
MIN_THRESHOLD = 0.03


def check_threshold(value, where: str) -> float:
    """A threshold's value as a fraction in [MIN_THRESHOLD, 1), else one line naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise options.OptionError(f"{where}: the minimum effect must be a number (a fraction, e.g. 0.10), "
                                  f"got {value!r}")
    if not MIN_THRESHOLD <= float(value) < 1.0:
        raise options.OptionError(f"{where}: the minimum effect must be in [{MIN_THRESHOLD:g}, 1), got {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class Threshold:
    """A minimum effect set for some figures: ``value``, where it was set (``source``, said
    in the verdict) and what it names: the cells a test measured (``nodeid``, with
    ``figure`` the one figure of them, None: all) or a glob ``pattern`` on the printed figure
    key (``score/resnet50_v2/*``, ``latency/*#latency_p99_ms``)."""

    value: float
    source: str
    nodeid: Optional[str] = None
    figure: Optional[str] = None
    pattern: Optional[str] = None

    def names(self, key: str, metric: str, nodeids: Tuple[str, ...]) -> bool:
        if self.pattern is not None:
            return fnmatch.fnmatchcase(key, self.pattern)
        figure = key.partition("#")[2] or metric
        return self.nodeid in nodeids and self.figure in (None, figure)


@dataclasses.dataclass(frozen=True)
class MinEffects:
    """The minimum effect of every figure of a session: a test's marker
    (``@pytest.mark.mxperf_threshold``) first, then the first pattern of ``[tool.pytest-mxperf]
    thresholds`` (pyproject.toml, in its order) that matches the figure's key, then the
    session's ``--perf-min-effect`` (``default``; a tail's wider, ``TAILS``). ``nodeids``: the
    tests that measured each cell. Pure."""

    default: float = MIN_EFFECT
    markers: Tuple[Threshold, ...] = ()
    patterns: Tuple[Threshold, ...] = ()
    nodeids: Mapping[str, Tuple[str, ...]] = dataclasses.field(default_factory=dict)

    def chosen(self, key: str, metric: str) -> Optional[Threshold]:
        tests = self.nodeids.get(key.partition("#")[0], ())
        for t in self.markers:
            if t.names(key, metric, tests):
                return t
        return next((t for t in self.patterns if t.names(key, metric, tests)), None)

    def of(self, key: str, metric: str) -> float:
        t = self.chosen(key, metric)
        return t.value if t is not None else effect_for(metric, self.default)

    def said(self, key: str, metric: str) -> str:
        """"minimum effect 15% (where it was set)", for the verdict's notes."""
        t = self.chosen(key, metric)
        if t is not None:
            return f"minimum effect {100 * t.value:g}% ({t.source})"
        value = effect_for(metric, self.default)
        where = "a tail's own minimum" if value != self.default else "--perf-min-effect"
        return f"minimum effect {100 * value:g}% ({where})"

    def unmatched(self, keys: Mapping[str, str]) -> Tuple[Threshold, ...]:
        """The patterns that name none of the figures ``keys`` (key -> metric)."""
        return tuple(t for t in self.patterns
                     if not any(t.names(k, m, ()) for k, m in keys.items()))


def effect_for(metric: str, min_effect: "float | MinEffects", key: Optional[str] = None) -> float:
    """The minimum effect figure ``key`` (of ``metric``) is judged at, in a session whose
    minimum effect is ``min_effect``: its threshold when one is set for it (``MinEffects``),
    else the session's, ``TAIL_MIN_EFFECT`` for a tail (``TAILS``) when larger."""
    if isinstance(min_effect, MinEffects):
        return min_effect.of(key or "", metric)
    return max(min_effect, TAIL_MIN_EFFECT) if metric in TAILS else min_effect


#: a figure of pairs still not significant after every pair its second stage asked for (none
#: cut by the deadline: verdict_duet.noise_reach, ab_pairs for seeded process pairs) is
#: unresolved (fails) only when worse than this many standard errors of its pairs' mean;
#: nearer, it is below its resolution (fails only when --perf-fail-on names it). Such a
#: figure's spread is the machine's: an input pipeline's ndarray loader rate ran 3.7k-13.7k
#: samples/s in fresh processes of one setup and its duet pairs spread 19-30%, so 40 pairs
#: leave a standard error of 3-5%, and "worse than -5%, not significant" failed an unchanged
#: session in 5 of 40 replays (one figure, 1-sided 2.33 SE: 1% of unchanged sessions)
NOISE_LIMIT_Z = 2.326

#: kinds that name a slowdown the baseline cannot decide; they fail only when the failure
#: policy (options.fail_on) names them
UNDECIDED = ("below-resolution", "unclear")
#: baseline mode: a change beyond the resolution that a duet against the recorded setup does
#: not show, so something both its sides share (outcome/judging.against_recorded_setup): the
#: machine, where its probes moved with the change against the baseline's recorded probes;
#: the system (kernel, libraries, preloads), where they did not; unexplained, where nothing
#: tells (no probes on one side, or another measuring method recorded the baseline). Each
#: fails as the failure policy names it (model/options.DEFAULT_FAIL_ON)
UNEXPLAINED = "unexplained"
MACHINE_DIFFERS = "machine-differs"
SYSTEM_DIFFERS = "system-differs"
#: a slowdown is not called a regression when more than SPELL_SHARE of its current processes
#: ran in a slow spell of the machine, and SPELL_MARGIN more of them than of the baseline's
#: (when both sides ran mostly in spells, they compare like with like: seen here, Inception-BN
#: b2 with oneDNN fusion off, -9.4% with 90% of the current and 80% of the baseline in spells)
SPELL_SHARE = 0.5
SPELL_MARGIN = 0.25
