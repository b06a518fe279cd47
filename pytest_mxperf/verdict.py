"""Noise-aware regression verdicts: did a cell get slower than its baseline?

Higher is better (images/s). The unit of replication is the worker *process*: rounds inside
one process share its memory layout, thread placement and neighbours and are not
independent (four identical ResNet-50 processes here had medians 15.6, 16.6, 16.6 and 20.0
img/s, and a Mann-Whitney test on their rounds called 5 of 6 pairs "different" at
p < 0.01). So every statistic below is computed on per-process medians only.

A cell is a **regression** when both hold:

1. *Practical size*: its median (median of per-process medians) is below the baseline
   median by more than ``threshold = max(min_effect, noise_allowance)``, where
   ``min_effect`` defaults to ``MIN_EFFECT`` (5 %) and ``noise_allowance`` is what the
   baseline's own between-process spread allows a median of processes to move by chance::

       s     = 1.4826 * MAD(baseline process medians) / median   (robust relative SD)
       allow = NOISE_Z * 1.2533 * s * sqrt(1/n_baseline + 1/n_current)

   (1.2533 * s / sqrt(n) is the standard error of a median of n values; NOISE_Z = 2.)
   With fewer than 3 baseline processes s is unknown and only ``min_effect`` applies.
2. *Significance*: a one-sided Mann-Whitney U test on per-process medians
   (``scipy.stats.mannwhitneyu(current, baseline, alternative="less")``, exact when there
   are no ties) gives a p-value whose Benjamini-Hochberg adjusted value (q-value) across
   all cells judged in the session is at most ``FDR_Q`` = 0.05. With 5 vs 5 processes the
   smallest possible p is 1/252 = 0.004; with fewer than 5 on a side the test often cannot
   reach 0.05 at all.

**improvement** is the mirror image (``alternative="greater"``, same thresholds, its own
BH family); the report suggests updating the baseline. **suspect** means the change is
past the threshold but not significant while the current side has fewer than
``CONFIRM_PROCESSES`` processes (or the baseline has too few to ever be significant):
the plugin re-measures suspects with more processes at session end and judges again.
**unchanged** is everything else, **no-baseline** when the baseline has no figure.

**CPU-starved processes.** On a shared machine a worker can get a fraction of the CPUs it
asked for (measured here: with neighbours running, ResNet-50 processes that got 0.5 of 2
CPUs ran at 8-12 img/s instead of 35, LeNet training at 59 instead of 5000). When the
per-process CPU share (``cpu_utilization / OpenMP threads``, see ``cpu_share``) is known, a
process whose share is below ``STARVED_RATIO`` (0.75) x the best share *on its own side*
is excluded before the statistics, and the reason says how many were. The screen is
side-relative, so a change that lowers every process's utilisation alike (fewer threads,
a less parallel kernel) is still judged. A comparison is *unreliable* when one side's best
share is below ``STARVED_RATIO`` x the other side's best, or below ``BUSY_SHARE`` (0.6) in
absolute terms (no process got 60% of the CPUs it ran threads for). An unreliable cell whose
change exceeds ``min_effect`` either way is **suspect** ("machine busy ...; cannot judge,
re-measure"), never a regression or improvement: on a busy machine the gate says so instead
of failing or passing silently.

Besides throughput, ``resource_notes`` compares peak memory and bind + first-batch time
(memory growth above ``MEMORY_GROWTH_NOTE`` = 20 % becomes a note, so does a bind +
first-batch change beyond ``STARTUP_CHANGE_NOTE`` = 50 %), and ``env_diff`` /
``version_diff`` list what changed in the recorded environment and software.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

MIN_EFFECT = 0.05          # smallest change (fraction of the baseline median) ever flagged
FDR_Q = 0.05               # Benjamini-Hochberg false discovery rate across a session's cells
NOISE_Z = 2.0              # noise allowance in standard errors of the median difference
MIN_PROCESSES = 5          # per side, for the one-sided U test to be able to reach p < 0.05
CONFIRM_PROCESSES = 10     # a suspect is re-measured until the current side has this many
MEMORY_GROWTH_NOTE = 0.20  # peak memory growth that becomes a note
STARVED_RATIO = 0.75       # a process with CPU share < this x its side's best share is excluded
STARTUP_CHANGE_NOTE = 0.50  # bind + first-batch time change that becomes a note
BUSY_SHARE = 0.6           # a side whose best process got less than this share of its CPUs was busy

KINDS = ("regression", "improvement", "unchanged", "suspect", "no-baseline")


@dataclasses.dataclass
class Verdict:
    kind: str
    reason: str
    change: Optional[float] = None            # current median / baseline median - 1
    threshold: Optional[float] = None         # fraction, max(min_effect, noise allowance)
    p_value: Optional[float] = None           # raw one-sided p in the direction of the change
    q_value: Optional[float] = None           # BH-adjusted p (equals p for a single cell)
    n_current: int = 0
    n_baseline: int = 0
    current_median: Optional[float] = None
    baseline_median: Optional[float] = None
    noise_allowance: Optional[float] = None
    notes: List[str] = dataclasses.field(default_factory=list)
    env_diff: List[str] = dataclasses.field(default_factory=list)

    @property
    def change_pct(self) -> Optional[float]:
        return None if self.change is None else 100.0 * self.change

    @property
    def failed(self) -> bool:
        return self.kind == "regression"

    def to_dict(self) -> Dict[str, Any]:
        d = dataclasses.asdict(self)
        d["change_pct"] = self.change_pct
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


# ----------------------------------------------------------------------------- statistics

def _clean(values: Iterable[Any]) -> List[float]:
    out = []
    for v in values or ():
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f) and f > 0:
            out.append(f)
    return out


def robust_rel_sd(values: Sequence[float]) -> Optional[float]:
    """1.4826 * MAD / median of ``values`` (None with fewer than 3 values)."""
    if len(values) < 3:
        return None
    med = statistics.median(values)
    if med <= 0:
        return None
    mad = statistics.median(abs(v - med) for v in values)
    return 1.4826 * mad / med


def noise_allowance(baseline: Sequence[float], n_current: int, z: float = NOISE_Z) -> Optional[float]:
    """How far (fraction) a median of ``n_current`` processes may move by chance, from the
    baseline's between-process spread; None when the baseline has < 3 processes."""
    s = robust_rel_sd(baseline)
    if s is None or n_current < 1:
        return None
    return z * 1.2533 * s * math.sqrt(1.0 / len(baseline) + 1.0 / n_current)


def one_sided_p(current: Sequence[float], baseline: Sequence[float], alternative: str) -> Optional[float]:
    """Mann-Whitney U p-value that ``current`` is stochastically less/greater than ``baseline``."""
    if not current or not baseline:
        return None
    from scipy.stats import mannwhitneyu
    if len(set(current) | set(baseline)) == 1:
        return 1.0  # all identical: no evidence either way
    return float(mannwhitneyu(list(current), list(baseline), alternative=alternative).pvalue)


def min_achievable_p(n1: int, n2: int) -> float:
    """Smallest one-sided exact Mann-Whitney p-value with n1 and n2 values: 1 / C(n1+n2, n1)."""
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


def cpu_share(meta: Optional[Mapping[str, Any]]) -> Optional[float]:
    """CPU share a worker process got: ``cpu_utilization`` / the OpenMP threads it ran with
    (``meta["threads"]["openmp"]``, else ``OMP_NUM_THREADS`` from its env), capped to the
    CPUs available. None when unknown."""
    if not meta:
        return None
    util = meta.get("cpu_utilization")
    if not isinstance(util, (int, float)) or isinstance(util, bool) or not math.isfinite(util) or util <= 0:
        return None
    threads = (meta.get("threads") or {}).get("openmp") if isinstance(meta.get("threads"), Mapping) else None
    if not threads:
        env = meta.get("env") or {}
        applied = meta.get("env_defaults_applied") or {}
        threads = env.get("OMP_NUM_THREADS") or applied.get("OMP_NUM_THREADS")
    try:
        threads = int(threads)
    except (TypeError, ValueError):
        return None
    if threads < 1:
        return None
    try:
        import os
        threads = min(threads, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover
        pass
    return float(util) / threads


def screen_starved(values: Sequence[Any], shares: Optional[Sequence[Optional[float]]],
                   ratio: float = STARVED_RATIO) -> Tuple[List[Any], int, Optional[float]]:
    """Drop processes whose CPU share is below ``ratio`` x the best share among ``values``.

    Returns (kept values, number excluded, best share or None). Processes with an unknown
    share are kept; without shares nothing is excluded.
    """
    values = list(values or [])
    if not shares or len(shares) != len(values):
        return values, 0, None
    known = [s for s in shares if isinstance(s, (int, float)) and s > 0]
    if not known:
        return values, 0, None
    best = max(known)
    kept = [v for v, s in zip(values, shares) if not (isinstance(s, (int, float)) and s < ratio * best)]
    return kept, len(values) - len(kept), best


# ----------------------------------------------------------------------------- verdicts

@dataclasses.dataclass
class _Stats:
    cur: List[float]
    base: List[float]
    change: float
    threshold: float
    allowance: Optional[float]
    p_less: Optional[float]
    p_greater: Optional[float]
    excluded: Tuple[int, int] = (0, 0)
    starved_side: Optional[str] = None
    min_effect: float = MIN_EFFECT


def _pairs(values, shares):
    """Clean values, keeping each value's share aligned (None when unknown)."""
    values = list(values or [])
    shares = list(shares) if shares is not None and len(shares) == len(values) else [None] * len(values)
    out_v, out_s = [], []
    for v, sh in zip(values, shares):
        c = _clean([v])
        if c:
            out_v.append(c[0])
            out_s.append(sh)
    return out_v, out_s


def _stats(current, baseline, min_effect, current_cpu=None, baseline_cpu=None
           ) -> Tuple[Optional[_Stats], Optional[Verdict]]:
    cur, cur_sh = _pairs(current, current_cpu)
    base, base_sh = _pairs(baseline, baseline_cpu)
    cur, ex_c, best_c = screen_starved(cur, cur_sh)
    base, ex_b, best_b = screen_starved(base, base_sh)
    starved = None
    if best_c is not None and best_b is not None and best_c < STARVED_RATIO * best_b:
        starved = (f"current processes got at most {100 * best_c:.0f}% of their CPUs vs {100 * best_b:.0f}% "
                   "in the baseline (machine busy, or the workload became less parallel)")
    elif best_c is not None and best_b is not None and best_b < STARVED_RATIO * best_c:
        starved = (f"the baseline's processes got at most {100 * best_b:.0f}% of their CPUs vs {100 * best_c:.0f}% "
                   "now (recorded on a busy machine: re-record it)")
    elif best_c is not None and best_c < BUSY_SHARE:
        starved = f"no current process got more than {100 * best_c:.0f}% of its CPUs (machine busy)"
    elif best_b is not None and best_b < BUSY_SHARE:
        starved = f"no baseline process got more than {100 * best_b:.0f}% of its CPUs (recorded on a busy machine)"
    if not base:
        return None, Verdict("no-baseline", "no baseline figure for this cell on this machine "
                             "(record one with --perf-update-baselines)", n_current=len(cur),
                             current_median=statistics.median(cur) if cur else None)
    if not cur:
        return None, Verdict("unchanged", "no successful process to compare", n_baseline=len(base),
                             baseline_median=statistics.median(base))
    cm, bm = statistics.median(cur), statistics.median(base)
    change = cm / bm - 1.0
    allowance = noise_allowance(base, len(cur))
    threshold = max(min_effect, allowance or 0.0)
    return _Stats(cur, base, change, threshold, allowance,
                  one_sided_p(cur, base, "less"), one_sided_p(cur, base, "greater"), (ex_c, ex_b), starved, min_effect), None


def _decide(st: _Stats, q_less: Optional[float], q_greater: Optional[float], q: float) -> Verdict:
    n_c, n_b = len(st.cur), len(st.base)
    common = dict(change=st.change, threshold=st.threshold, n_current=n_c, n_baseline=n_b,
                  current_median=statistics.median(st.cur), baseline_median=statistics.median(st.base),
                  noise_allowance=st.allowance)
    v = _decide_core(st, q_less, q_greater, q, common, n_c, n_b)
    if any(st.excluded):
        note = (f"excluded CPU-starved processes (share < {100 * STARVED_RATIO:.0f}% of the best): "
                f"{st.excluded[0]} current, {st.excluded[1]} baseline")
        v.notes.append(note)
        v.reason += f"; {st.excluded[0]}+{st.excluded[1]} CPU-starved process(es) excluded"
    return v


def _decide_core(st: _Stats, q_less, q_greater, q: float, common: Dict[str, Any], n_c: int, n_b: int) -> Verdict:
    pct = f"{100 * st.change:+.1f}%"
    thr = f"{100 * st.threshold:.1f}%"
    slower = st.change < -st.threshold
    faster = st.change > st.threshold
    if st.starved_side and abs(st.change) > st.min_effect:
        p, qv = (st.p_less, q_less) if st.change < 0 else (st.p_greater, q_greater)
        return Verdict("suspect", f"{'slower' if st.change < 0 else 'faster'} by {abs(100 * st.change):.1f}% "
                       f"(p={p:.3g}, n={n_c} vs {n_b} processes), but {st.starved_side}; cannot judge, "
                       "re-measure on a quiet machine", p_value=p, q_value=qv, **common)
    if not (slower or faster):
        return Verdict("unchanged", f"{pct} is within the {thr} threshold (n={n_c} vs {n_b} processes)",
                       p_value=st.p_less if st.change < 0 else st.p_greater,
                       q_value=q_less if st.change < 0 else q_greater, **common)
    p, qv = (st.p_less, q_less) if slower else (st.p_greater, q_greater)
    word = "slower" if slower else "faster"
    if qv is not None and qv <= q:
        kind = "regression" if slower else "improvement"
        tail = "" if slower else "; consider updating the baseline (--perf-update-baselines)"
        return Verdict(kind, f"{word} by {abs(100 * st.change):.1f}% (> {thr}), p={p:.3g}, "
                       f"q={qv:.3g} <= {q:g} (n={n_c} vs {n_b} processes){tail}", p_value=p, q_value=qv, **common)
    if not slower:
        return Verdict("unchanged", f"{word} by {abs(100 * st.change):.1f}% but not significant "
                       f"(p={p:.3g}, n={n_c} vs {n_b} processes)", p_value=p, q_value=qv, **common)
    if min_achievable_p(n_c, n_b) > q and n_c >= CONFIRM_PROCESSES:
        return Verdict("suspect", f"{word} by {abs(100 * st.change):.1f}% (> {thr}) but the baseline has only "
                       f"{n_b} process(es), too few to be significant; re-record it with --perf-update-baselines",
                       p_value=p, q_value=qv, **common)
    if n_c < CONFIRM_PROCESSES or min_achievable_p(n_c, n_b) > q:
        return Verdict("suspect", f"{word} by {abs(100 * st.change):.1f}% (> {thr}) but not significant with "
                       f"n={n_c} vs {n_b} processes (p={p:.3g}); re-measure with more processes to confirm",
                       p_value=p, q_value=qv, **common)
    return Verdict("unchanged", f"{word} by {abs(100 * st.change):.1f}% but not significant with "
                   f"n={n_c} vs {n_b} processes (p={p:.3g}, q={qv:.3g})", p_value=p, q_value=qv, **common)


def judge(current: Sequence[float], baseline: Optional[Sequence[float]], *,
          min_effect: float = MIN_EFFECT, q: float = FDR_Q,
          current_cpu: Optional[Sequence[Optional[float]]] = None,
          baseline_cpu: Optional[Sequence[Optional[float]]] = None) -> Verdict:
    """Verdict for ONE cell from per-process medians (no multiple-testing adjustment).

    ``current``/``baseline``: per-process medians in images/s (higher is better).
    ``current_cpu``/``baseline_cpu``: optional per-process CPU shares (``cpu_share``), aligned
    with the values, for the CPU-starvation screen.
    """
    st, early = _stats(current, baseline or [], min_effect, current_cpu, baseline_cpu)
    if early:
        return early
    return _decide(st, st.p_less, st.p_greater, q)


def judge_session(cells: Mapping[str, Sequence[Any]], *,
                  min_effect: float = MIN_EFFECT, q: float = FDR_Q) -> Dict[str, Verdict]:
    """Verdicts for all cells of a session, Benjamini-Hochberg at rate ``q`` across them.

    ``cells``: key -> (current per-process medians, baseline per-process medians or None
    [, current CPU shares, baseline CPU shares]).
    Regressions and improvements are separate BH families over the cells that have both
    sides; a cell's q-value is its adjusted p in the direction of its change.
    """
    out: Dict[str, Verdict] = {}
    stats: Dict[str, _Stats] = {}
    for key, item in cells.items():
        cur, base = item[0], item[1]
        cur_cpu = item[2] if len(item) > 2 else None
        base_cpu = item[3] if len(item) > 3 else None
        st, early = _stats(cur, base or [], min_effect, cur_cpu, base_cpu)
        if early:
            out[key] = early
        else:
            stats[key] = st
    keys = list(stats)
    q_less = benjamini_hochberg([stats[k].p_less for k in keys])
    q_greater = benjamini_hochberg([stats[k].p_greater for k in keys])
    for k, ql, qg in zip(keys, q_less, q_greater):
        out[k] = _decide(stats[k], ql, qg, q)
    return {k: out[k] for k in cells}


# ----------------------------------------------------------------------------- context

def _fmt_val(v: Any) -> str:
    if v is None:
        return "unset"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    return str(v)


def env_diff(current_env: Optional[Mapping[str, Any]], baseline_env: Optional[Mapping[str, Any]]) -> List[str]:
    """Lines ``NAME: baseline -> current`` for every variable that differs, e.g.
    ``MXNET_SUBGRAPH_BACKEND: unset -> NONE`` (sorted by name)."""
    cur, base = dict(current_env or {}), dict(baseline_env or {})
    lines = []
    for k in sorted(set(cur) | set(base)):
        a, b = base.get(k), cur.get(k)
        if a != b:
            lines.append(f"{k}: {_fmt_val(a)} -> {_fmt_val(b)}")
    return lines


def version_diff(current: Optional[Mapping[str, Any]], baseline: Optional[Mapping[str, Any]]) -> List[str]:
    """Same as env_diff for software facts, with ``mxnet_version`` shown as ``mxnet``:
    ``mxnet: 1.8.0 -> 1.9.1``; feature lists show only what was added/removed."""
    cur, base = dict(current or {}), dict(baseline or {})
    lines = []
    for k in sorted(set(cur) | set(base)):
        a, b = base.get(k), cur.get(k)
        if a == b or a is None and b is None:
            continue
        name = "mxnet" if k in ("mxnet_version", "mxnet") else k
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            added = sorted(set(map(str, b)) - set(map(str, a)))
            removed = sorted(set(map(str, a)) - set(map(str, b)))
            parts = [f"+{x}" for x in added] + [f"-{x}" for x in removed]
            if parts:
                lines.append(f"{name}: {' '.join(parts)}")
            continue
        lines.append(f"{name}: {_fmt_val(a)} -> {_fmt_val(b)}")
    return lines


def _rel(cur: Optional[float], base: Optional[float]) -> Optional[float]:
    if cur is None or base is None or base <= 0:
        return None
    return cur / base - 1.0


def resource_notes(current: Mapping[str, Any], baseline: Mapping[str, Any],
                   memory_growth: float = MEMORY_GROWTH_NOTE) -> Tuple[Dict[str, Optional[float]], List[str]]:
    """Compare ``peak_rss_bytes`` and ``bind_seconds + first_batch_seconds``.

    Both arguments are summaries like a baseline recording (keys ``peak_rss_bytes``,
    ``bind_seconds``, ``first_batch_seconds``). Returns ({"memory_change", "startup_change"},
    notes); memory growth above ``memory_growth`` is a note (not a failure).
    """
    def startup(d):
        b, f = d.get("bind_seconds"), d.get("first_batch_seconds")
        return None if b is None or f is None else float(b) + float(f)

    mem = _rel(current.get("peak_rss_bytes"), baseline.get("peak_rss_bytes"))
    st = _rel(startup(current), startup(baseline))
    notes = []
    if mem is not None and mem > memory_growth:
        notes.append(f"peak memory grew {100 * mem:.0f}% ({baseline['peak_rss_bytes'] / 2**20:.0f} -> "
                     f"{current['peak_rss_bytes'] / 2**20:.0f} MiB)")
    return {"memory_change": mem, "startup_change": st}, notes


# ----------------------------------------------------------------------------- glue for the plugin

def verdicts_for_session(cells: Sequence[Any], baseline_doc: Optional[Mapping[str, Any]], *,
                         min_effect: float = MIN_EFFECT, q: float = FDR_Q,
                         software: Optional[Mapping[str, Any]] = None) -> Dict[str, Verdict]:
    """The plugin's entry point: ``CellMeasurement``s against a loaded baseline document.

    Returns key -> Verdict, with env/version differences and resource notes attached
    (``verdict.env_diff``, ``verdict.notes``). ``software`` is this session's software facts
    (mxnet_version, features, ...), compared with the baseline recording's.
    """
    from . import baselines as _bl
    pairs = {}
    recs = {}
    for cell in cells:
        key = cell.workload.key()
        rec = _bl.latest_recording(baseline_doc, key) if baseline_doc else None
        recs[key] = (cell, rec)
        pairs[key] = (cell.process_medians, rec.get("process_medians") if rec else None,
                      [cpu_share(r.meta) for r in cell.ok_runs], rec.get("process_cpu_share") if rec else None)
    out = judge_session(pairs, min_effect=min_effect, q=q)
    for key, v in out.items():
        cell, rec = recs[key]
        if not rec:
            continue
        summary = _bl.summarize_cell(cell)
        v.env_diff = env_diff(summary.get("env"), rec.get("env"))
        cur_soft = dict(software or {})
        cur_soft.setdefault("mxnet_version", summary.get("mxnet_version"))
        base_soft = dict(rec.get("software") or {})
        base_soft.setdefault("mxnet_version", rec.get("mxnet_version"))
        shared = (set(cur_soft) & set(base_soft)) | {"mxnet_version"}  # facts only one side recorded are not changes
        v.env_diff += version_diff({k: cur_soft.get(k) for k in shared}, {k: base_soft.get(k) for k in shared})
        changes, notes = resource_notes(summary, rec)
        v.notes.extend(notes)
        if changes["startup_change"] is not None and abs(changes["startup_change"]) > STARTUP_CHANGE_NOTE:
            v.notes.append(f"bind + first batch time {100 * changes['startup_change']:+.0f}%")
    return out
