"""Change points of a cell's history: where its level stepped, and what changed there.

A history is one figure per session and machine, oldest first (the figures of two machines
are no level: each machine's sessions are segmented on their own): the *fast end* of the
session's processes (``judge/thresholds.FAST_END``), because on these shared VMs noise only slows a process
down and a whole session can land in a slow spell. The method is binary segmentation in the
spirit of E-Divisive means as Hunter / Apache Otava use it (Daly et al., ICPE 2020): in a
segment, the split that maximises Welch's t statistic between the log figures on its two
sides is a candidate; it is a step when

* the p-value of Welch's t test on the two sides' log figures, times the number of splits
  tried (Bonferroni, because the split was
  chosen as the most extreme), is below ``ALPHA``;
* the medians of the two sides differ by more than ``MIN_EFFECT`` (the suite's minimum
  effect): the median, so that one session in a slow spell moves nothing;
* each side holds at least ``MIN_SIZE`` sessions: a level must persist to be one.

A split whose two sides lie apart (every session of one side beyond every session of the
other) by more than ``APART_RATIO`` is a step without the t test: no speed regime of these
machines makes such a gap, and with three sessions on one side Welch's test has about two
degrees of freedom: a threefold step (MXNet 1.6.0 without MKLDNN, three sessions, then
1.8.0) was found while the history held 6 to 9 sessions and lost at 10, its p times the
splits tried 0.0017 against 0.001.

Accepted splits are searched again on both sides. Before that, a session far on the slow side
of the sessions around it (``spell_sessions``) is left out: it fell whole into a slow spell of
the machine, which slows and passes. The slow side is the figure's direction: *below* its
neighbours where higher is better (throughput), *above* them where lower is better (latency,
seconds, memory); a session on the fast side is kept, whatever its distance. Every function
here that decides on a figure takes ``higher_is_better`` (the cell's ``Metric``, as the store
keeps it in its ``cells`` table); a step says whether it made the figure ``worse``. A step is
attributed to the first session after it, with what changed there against the machine's
session before (``what_changed``):
the MXNet version, build features, Python, the environment. A step where nothing
changed is said to be so: the machine's own speed, or a cause the store does not see.

Pure (numpy, scipy); no database.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from pytest_mxperf.model import options

MIN_EFFECT = options.MIN_EFFECT
ALPHA = 0.001
MIN_SIZE = 3
#: a session whose figure is below SPELL_DEPTH x the median of the SPELL_WINDOW sessions
#: around it (above that median / SPELL_DEPTH for a figure where lower is better) fell whole
#: into a slow spell of the machine: it is shown, and left out of the segmentation (a spell
#: slows; it never speeds up, and it does not last)
SPELL_DEPTH = 0.85
SPELL_WINDOW = 5
#: the gap between two sides that are apart, beyond which a split is a step whatever its p:
#: the recorded regime traces (tests/data/vm-regimes-amd-epyc-2vcpu.json) span x1.85
#: (AlexNet b8, 93.4 to 173.1 img/s) and x1.66 (ResNet-50 v2 b8) from slowest to fastest process
APART_RATIO = 2.5


@dataclasses.dataclass(frozen=True)
class Step:
    index: int        # the first session of the new level (an index into the history)
    before: float     # the median of the level before, in the figure's unit
    after: float      # ... and after
    p_value: float    # Bonferroni-adjusted
    apart: bool = False  # a step because its sides lie apart by more than APART_RATIO
    higher_is_better: bool = True  # the figure's direction (its Metric's)

    @property
    def ratio(self) -> float:
        return self.after / self.before

    @property
    def worse(self) -> bool:
        """Whether the new level is worse: lower where higher is better, higher where lower is."""
        return (self.after < self.before) == self.higher_is_better


def spell_sessions(values: Sequence[float], window: int = SPELL_WINDOW, depth: float = SPELL_DEPTH, *,
                   higher_is_better: bool = True) -> List[bool]:
    """For each session, whether it fell whole into a slow spell (see SPELL_DEPTH): its figure
    below ``depth`` x the median around it where higher is better, above that median / ``depth``
    where lower is better (a slow spell raises a latency, a time, a memory figure). A session
    on the fast side of its neighbours is never one."""
    v = np.asarray(values, dtype=float)
    half = window // 2

    def slow(x: float, m: float) -> bool:
        return bool(x < depth * m) if higher_is_better else bool(x * depth > m)
    if len(v) <= window:
        m = float(np.median(v))
        return [slow(x, m) for x in v]
    inner = np.median(np.lib.stride_tricks.sliding_window_view(v, window), axis=1)  # centred, full windows
    medians = np.concatenate([[np.median(v[:i + half + 1]) for i in range(half)], inner,
                              [np.median(v[i - half:]) for i in range(len(v) - half, len(v))]])
    return [slow(x, m) for x, m in zip(v, medians)]


def _welch(a: np.ndarray, b: np.ndarray) -> tuple:
    """(|t|, p) of Welch's t test; two sides without spread (log figures equal to 1e-9)
    differ for certain when their levels do."""
    if np.ptp(a) < 1e-9 and np.ptp(b) < 1e-9:
        return (math.inf, 0.0) if abs(a.mean() - b.mean()) > 1e-9 else (0.0, 1.0)
    from scipy import stats as sps  # here, not at the top: a session's end imports this module
    with np.errstate(all="ignore"), warnings.catch_warnings():
        # nearly equal figures: scipy warns of precision loss, and the t statistic is
        # still the right one to rank by (a spread of 1e-9 was handled above)
        warnings.simplefilter("ignore", RuntimeWarning)
        t, p = sps.ttest_ind(a, b, equal_var=False)
    return (abs(float(t)), float(p)) if math.isfinite(t) and math.isfinite(p) else (0.0, 1.0)


def _best_split(x: np.ndarray, lo: int, hi: int, min_size: int) -> tuple:
    """(split, its Welch p-value, splits tried): the split of x[lo:hi] with the largest
    Welch t statistic, computed for every split at once from cumulative sums."""
    seg = x[lo:hi]
    n = len(seg)
    k = np.arange(min_size, n - min_size + 1)
    c1, c2 = np.cumsum(seg), np.cumsum(seg * seg)
    s1, q1 = c1[k - 1], c2[k - 1]
    s2, q2 = c1[-1] - s1, c2[-1] - q1
    n1, n2 = k.astype(float), (n - k).astype(float)
    m1, m2 = s1 / n1, s2 / n2
    v1 = np.maximum(q1 - n1 * m1 * m1, 0.0) / np.maximum(n1 - 1, 1)
    v2 = np.maximum(q2 - n2 * m2 * m2, 0.0) / np.maximum(n2 - 1, 1)
    se = np.sqrt(v1 / n1 + v2 / n2)
    diff = np.abs(m1 - m2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 1e-12, diff / se, np.where(diff > 1e-9, np.inf, 0.0))
    i = int(np.argmax(t))
    split = lo + int(k[i])
    _, p = _welch(x[lo:split], x[split:hi])
    return split, p, len(k)


def _split(x: np.ndarray, lo: int, hi: int, min_effect: float, alpha: float, min_size: int, out: List[Step],
           values: np.ndarray, higher_is_better: bool) -> None:
    if hi - lo < 2 * min_size:
        return
    t, p, tried = _best_split(x, lo, hi, min_size)
    p_adj = min(1.0, p * tried)
    before, after = float(np.median(values[lo:t])), float(np.median(values[t:hi]))
    left, right = x[lo:t], x[t:hi]
    gap = max(right.min() - left.max(), left.min() - right.max())  # > 0: the sides are apart, in log units
    apart = gap > math.log(APART_RATIO)
    if (p_adj < alpha or apart) and abs(math.log(after / before)) > math.log1p(min_effect):
        out.append(Step(t, before, after, p_adj, apart=apart and not p_adj < alpha,
                        higher_is_better=higher_is_better))
        _split(x, lo, t, min_effect, alpha, min_size, out, values, higher_is_better)
        _split(x, t, hi, min_effect, alpha, min_size, out, values, higher_is_better)


def find_steps(values: Sequence[Optional[float]], *, min_effect: float = MIN_EFFECT, alpha: float = ALPHA,
               min_size: int = MIN_SIZE, higher_is_better: bool = True) -> List[Step]:
    """The steps of a history (indices into ``values``; sessions without a figure are left
    out first, so give only the measured ones to keep indices aligned). ``higher_is_better``
    is the figure's direction: which sessions are slow spells (``spell_sessions``) and
    which steps are ``worse``."""
    v = np.asarray([float(a) for a in values], dtype=float)
    if len(v) == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0):
        raise ValueError("a history is positive finite figures")
    kept = [i for i, spell in enumerate(spell_sessions(v, higher_is_better=higher_is_better)) if not spell]
    kv = v[kept]
    out: List[Step] = []
    _split(np.log(kv), 0, len(kv), min_effect, alpha, min_size, out, kv, higher_is_better)
    return sorted((dataclasses.replace(s, index=kept[s.index]) for s in out), key=lambda s: s.index)


def _fmt_features(f: Any) -> str:
    return ",".join(f) if isinstance(f, (list, tuple)) else str(f)


def what_changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> List[str]:
    """What differs between two sessions of a history (``HistoryStore.history`` rows)."""
    out = []
    for key, name in (("mxnet_version", "MXNet"), ("python", "Python"), ("machine_id", "machine")):
        if before.get(key) != after.get(key):
            out.append(f"{name} {before.get(key)} -> {after.get(key)}")
    fb, fa = before.get("features"), after.get("features")
    if fb != fa and fb is not None and fa is not None:
        added, gone = sorted(set(fa) - set(fb)), sorted(set(fb) - set(fa))
        out.append("build features" + (f" +{','.join(added)}" if added else "") + (f" -{','.join(gone)}" if gone else ""))
    eb, ea = before.get("environment") or {}, after.get("environment") or {}
    for k in sorted(set(eb) | set(ea)):
        if eb.get(k) != ea.get(k):
            out.append(f"{k}={eb.get(k, '(unset)')} -> {ea.get(k, '(unset)')}")
    return out


def cell_changes(history: Sequence[Mapping[str, Any]], *, higher_is_better: bool = True,
                 **kw) -> List[Dict[str, Any]]:
    """The steps of one cell's history (``HistoryStore.history``), each with its machine,
    session, date, levels, ratio, whether it is ``worse`` and what changed, oldest first.
    ``higher_is_better`` is the cell's direction (``HistoryStore.cells()``: its Metric's);
    the default, True, is right for throughput cells only. The history is segmented per
    machine: two machines' figures are no level (a fleet's runners of several kinds take turns
    in time), and a step on one machine is found among that machine's sessions alone.
    Sessions without a figure are skipped."""
    by_machine: Dict[Any, List[Mapping[str, Any]]] = {}
    for h in history:
        if h.get("fast_end") and h["fast_end"] > 0:
            by_machine.setdefault(h.get("machine_id"), []).append(h)
    out = []
    for machine_id, measured in by_machine.items():
        if len(measured) < 2:
            continue
        for s in find_steps([h["fast_end"] for h in measured], higher_is_better=higher_is_better, **kw):
            first, prev = measured[s.index], measured[s.index - 1]
            changed = what_changed(prev, first)
            out.append({"machine_id": machine_id, "session": first["session"], "started": first["started"],
                        "index": s.index, "before": s.before, "after": s.after, "ratio": s.ratio,
                        "p_value": s.p_value, "apart": s.apart, "worse": s.worse,
                        # what reproduces it: the install before the step, the test that measured it
                        "mxnet_before": prev.get("mxnet_version"),
                        "environment_after": dict(first.get("environment") or {}),
                        "environment_before": dict(prev.get("environment") or {}),
                        "nodeid": first.get("nodeid") or prev.get("nodeid"),
                        "changed": changed or ["nothing the store records (the machine's speed, or an unrecorded "
                                               "cause)"]})
    return sorted(out, key=lambda c: (c["started"], str(c["machine_id"])))


def standing(changes: Sequence[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
    """The regressions standing among a cell's steps (``cell_changes``, oldest first): per
    machine, its latest step when that step made the figure worse. Pure."""
    latest: Dict[Any, Mapping[str, Any]] = {}
    for ch in changes:
        latest[ch["machine_id"]] = ch
    return [ch for ch in latest.values() if ch["worse"]]
