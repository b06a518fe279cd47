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
#: against a LeNet b1 batch of 0.3 ms), the same for any setup, so a p99's pairs spread
#: several times their rounds' (docs/how-it-measures.md, "What is measured, and how each figure
#: is judged", the tail); the setup's speed shows in the p50 and the rounds, judged at the
#: minimum effect.
TAIL_MIN_EFFECT = 0.20
#: the tail figures: those ``model/kinds.py`` declares ``tail`` (a live view)
TAILS = kinds.TAILS


#: the least minimum effect a threshold may set for a cell: below it unchanged sessions failed
#: beyond the 5% budget in the replays (docs/options.md, "Thresholds per cell")
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


# ----------------------------------------------------------------------------- the end of a session
# (outcome/: judging.py, ab_judging.py, comparators.py read these here, when they run)

#: the software facts a duet against the recorded setup rebuilds on its reference side (the
#: MXNet build and numpy; the interpreter's own version is the session's on both sides)
SETUP_FACTS = ("mxnet_version", "features", "numpy_version")

#: the baseline's verdicts that a duet against the recorded setup settles: what the baseline
#: alone cannot (a suspect, a slowdown within its resolution, one beyond it but not significant,
#: one the machine's state left unresolved), and a regression, which the baseline alone cannot
#: tell from a slower host or another build of the system (issue 75: the same MXNet 1.9.1 read
#: 25-60% slower on another host of one machine type), of figures judged between processes
SETTLED_BY_SETUP = ("suspect", "below-resolution", "unclear", "unresolved", "regression")

#: an unchanged figure worse than the baseline by more than this share of the minimum effect
#: is a suspect too: the machine's drift between sessions can hide a real slowdown under a
#: change the baseline calls unchanged
SETUP_TRIGGER = 0.5

#: an unchanged figure is a suspect too unless the baseline clears it of a slowdown of the
#: minimum effect: its log reading, less the session's common gain, must be above -min_effect
#: by this many times the scale of the resolution the baseline states for it (the drift
#: between sessions the baseline knows of; 1.645: one-sided 95%, or Student's t for the
#: resolution's degrees of freedom where larger: ``_cleared``). The baseline alone settles a
#: cell only when it can exclude the change the gate exists to catch (docs/baselines.md,
#: "Suspects settled against the recorded setup": what a hidden -10% cell costs without it).
#: None: off (the replays' earlier rule)
SETUP_CLEARANCE: Optional[float] = 1.645

#: whether a provisional resolution (a one-session baseline: the spread of that session's
#: processes standing in for the drift between sessions, which it does not know) can clear a
#: cell. It cannot: a cell whose processes agree within one session still drifts between
#: sessions, and the replays missed a hidden -10% cell so (docs/baselines.md, "Suspects settled
#: against the recorded setup"). A baseline of two or more sessions knows its drift and clears
#: at the one-sided 95% quantile of Student's t with its degrees of freedom
PROVISIONAL_CLEARS = False

#: the parts of the trigger beside it, each a rule of its own that the replays can turn off:
#: an improvement is a suspect; an unchanged figure the baseline's own slowed processes left
#: undecided is a suspect (why: docs/baselines.md, "Suspects settled against the recorded setup")
SUSPECT_IMPROVEMENTS = True

SUSPECT_BUSY_BASELINES = True

#: the fewest figures whose median says how much faster than the baseline's the session ran
SHIFT_FIGURES = 5

#: the fewest degrees of freedom of a figure's own spread (its pairs in this session and in this
#: machine's history) for it to count against its kind's pooled one
OWN_DF = 2

#: from this many degrees of freedom a figure is judged at its own spread, below its kind's too
#: (the boundary widened by Student's t at its degrees of freedom): one noisy cell of a kind
#: (AlexNet b8's training, its pairs at 8.4% on the Zen 4, where the other training cells' read
#: 1.8-2.8%) no longer holds the others to its spread once they have pairs enough of their own
OWN_ALONE_DF = 10

#: a kind's spread in this machine's history is pooled with this session's unless the session
#: has ``SESSION_ALONE_DF`` degrees of freedom of the kind and the F test of the two variances
#: rejects their equality at ``HISTORY_AGREES_P``: a VM's noise changes between sessions (on the
#: Zen 4 an unchanged session's score pairs read about 2.7% where its history, from a slow spell,
#: said 4.2%: paired-session-zen4-2026-12-03c.txt), and a history that disagrees would hold a
#: quiet session to a slow spell's pairs, or a noisy one to a quiet spell's boundary
SESSION_ALONE_DF = 10

HISTORY_AGREES_P = 0.05

#: the most rounds of looks the end of a session takes: a duet cell's pairs after its first
#: stage grow look by look (``ab_judging.next_looks``: at most as many again each time) to
#: ``verdict_duet.SEQUENTIAL_MAX_PAIRS``; with the first stage's 3, four looks reach 12 and
#: the rest is room for the cells a regression sends to the recorded setup
LOOKS = 8

