"""Baseline mode's judgement, pure, and what both modes share: the machine's state labelled
around every process (new values), every figure judged against the machine's baseline
(``judge_baseline_once``), how many processes confirming suspects takes
(``confirmation_plan``), and what changed around a figure (``with_context``).
``comparators.BaselineComparator`` uses them; the rules are ``judge/``'s; A/B mode is
``ab_judging.py``'s.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Tuple

from pytest_mxperf import __version__

from pytest_mxperf.judge import (
    context_diff,
    machine_states,
    thresholds,
)
from pytest_mxperf.judge import verdict as vd
from pytest_mxperf.output import reasons
from pytest_mxperf.measure import planning
from pytest_mxperf.measure.ledger import CellRecord
from pytest_mxperf.judge.thresholds import MACHINE_DIFFERS, SYSTEM_DIFFERS, UNEXPLAINED, effect_for
from pytest_mxperf.model.measurement import MEASURING_METHOD, METRICS, cell_of, metric_key
from pytest_mxperf.store import baseline_store
from pytest_mxperf.store.baselines import Baseline


def software_facts(cell_runs) -> Dict[str, Any]:
    """What the workers actually ran with (recorded beside figures, never in the machine id)."""
    for run in cell_runs:
        m = run.meta
        if m.mxnet_version:
            out = {"mxnet_version": m.mxnet_version, "features": m.features,
                   "python": m.python, "numpy_version": m.numpy_version}
            if m.cuda_runtime:
                out["cuda_runtime"] = m.cuda_runtime
            if m.cudnn:
                out["cudnn"] = m.cudnn
            return out
    return {}


# ----------------------------------------------------------------------------- machine state

def _all_runs(cells: Dict[str, CellRecord]):
    for rec in cells.values():
        yield from rec.cell.runs
        yield from rec.cell.reference or []


def label_machine_states(cells: Dict[str, CellRecord], baseline: Optional[Baseline]
                         ) -> Tuple[Dict[str, CellRecord], Optional[Dict[str, float]]]:
    """Every process labelled quiet / slowed / unknown against one reference (from this
    session's probes and the ones ``baseline`` recorded): (the cells as new values, each
    process a labelled copy of the one measured; the reference). Pure."""
    probes = []
    for run in _all_runs(cells):
        ms = run.machine_state
        probes += [p for p in (ms.get("probe_before"), ms.get("probe_after")) if p]
    for ms in baseline.process_probes() if baseline is not None else ():
        probes += [p for p in (ms.get("probe_before"), ms.get("probe_after")) if p]
    if not probes:
        return cells, None
    reference = machine_states.reference_from(probes)

    def labelled(run):
        ms = run.machine_state
        if not (ms.get("probe_before") or ms.get("probe_after")):
            return run
        st = machine_states.label(ms.get("probe_before"), ms.get("probe_after"), ms.get("load"), reference)
        if ms.get("state") == st.state and ms.get("reason") == st.reason:
            return run  # labelled so at an earlier look: the copy would be equal to it
        return run.labelled(st.state, st.reason)
    return {k: dataclasses.replace(rec, cell=rec.cell.mapped(labelled)) for k, rec in cells.items()}, reference


def _reasons(runs) -> List[str]:
    return [r.machine_state.get("reason") for r in runs if r.state in (machine_states.SLOWED, machine_states.SPELL)]


# ----------------------------------------------------------------------------- baseline mode

def unlike_sharing(cells: Dict[str, CellRecord], baseline: Baseline) -> Dict[str, str]:
    """Cell key -> why its figures are not judged against the baseline: the baseline's newest
    recording states that its processes were had another way (``CellMeasurement.sharing``:
    among other cells, or each alone) than this session's. A recording that does not say
    (recorded before the suite kept it) is judged as before. Pure."""
    out = {}
    for key, rec in cells.items():
        then = (baseline.recorded_suite(key) or {}).get("processes")
        now = rec.cell.sharing
        if then is not None and then != now:
            out[key] = reasons.unlike_sharing(vd.NOT_COMPARED_UNLIKE, then == "shared", now == "shared")
    return out


def comparisons(cells: Dict[str, CellRecord], baseline: Baseline, reference, confirmed: set,
                unlike: Dict[str, str]) -> Dict[str, vd.Comparison]:
    """Every judged figure's comparison with the baseline; a cell in ``unlike``
    (``unlike_sharing``) gets no baseline figures."""
    out = {}
    for key, rec in cells.items():
        cell = rec.cell
        mode = cell.workload.mode
        screened = cell.workload.device != "gpu"
        for m in cell.metrics():
            if not m.judged:
                continue
            primary = m.name == cell.primary.name
            ok = [r for r in cell.ok_runs if r.value(m.name) is not None]
            # the resolution the baseline states (its comparison set's drift between sessions,
            # or provisional); not the whole history, whose sessions may straddle a change
            out[metric_key(key, m.name, mode)] = vd.Comparison(
                metric=m, current=[r.value(m.name) for r in ok],
                baseline=[] if key in unlike else baseline.values(key, None if primary else m.name,
                                                                  cell.sharing) or [],
                current_states=machine_states.states(ok),
                # the baseline's labels, relabelled against this session's reference when its
                # probes were recorded, else as recorded
                baseline_states=(baseline.states(key, reference) or []) if primary else None,
                session_medians=(),
                screened=screened, confirmed=key in confirmed, state_reasons=_reasons(ok),
                spell_depth=machine_states.spell_depth(ok, reference),
                resolution=(baseline.resolution(key, None if primary else m.name)
                            if m.rule == "processes" else None))
    return for_the_session(out)


def for_the_session(comparisons: Dict[str, vd.Comparison]) -> Dict[str, vd.Comparison]:
    """Each figure's resolution as this session can resolve it: the change the drift test
    calls for one figure among the session's N tested figures (at its level / N, the level
    Benjamini-Hochberg asks of one changed figure among N), not for a figure alone. A
    slowdown beyond it is then caught whatever N is; one within it is below the resolution."""
    n = sum(c.resolution is not None for c in comparisons.values())
    if n <= 1:
        return comparisons
    return {k: (dataclasses.replace(c, resolution=dataclasses.replace(c.resolution, level=c.resolution.level / n))
                if c.resolution is not None else c) for k, c in comparisons.items()}


@dataclasses.dataclass(frozen=True)
class Judged:
    """What the judging stage returns: every judged figure's verdict, how many cells were
    measured again, and the cells as judged (with the processes that confirmed suspects,
    each labelled)."""

    verdicts: Dict[str, vd.Verdict]
    confirmed: int = 0
    cells: Dict[str, CellRecord] = dataclasses.field(default_factory=dict)


def judge_baseline_once(cells: Dict[str, CellRecord], baseline: Baseline, reference, confirmed: set,
                        min_effect: float) -> Dict[str, vd.Verdict]:
    """Every judged figure of ``cells`` against ``baseline``: a pure function of its arguments
    (the interim report and the end of the session call it alike)."""
    unlike = unlike_sharing(cells, baseline)
    verdicts = vd.judge_session(comparisons(cells, baseline, reference, confirmed, unlike), min_effect=min_effect)
    return {k: (dataclasses.replace(v, reason=unlike[cell_of(k)]) if cell_of(k) in unlike else v)
            for k, v in verdicts.items()}


def confirmation_plan(suspects: Dict[str, CellRecord], budget_s: float, options
                      ) -> Tuple[Dict[str, Tuple[int, float]], bool]:
    """(key -> (processes to add, seconds a process is expected to take) for each suspect,
    whether they were cut to the budget): up to ``CONFIRM_PROCESSES`` processes in all, cut
    alike for every suspect (at least one each) when they would take longer than
    ``budget_s``; a process's cost is the cost model's (``planning.process_seconds``). Pure."""
    plan: Dict[str, Tuple[int, float]] = {}
    for key, rec in suspects.items():
        runs = rec.cell.ok_runs
        plan[key] = (max(0, thresholds.CONFIRM_PROCESSES - len(runs)), planning.process_seconds(runs, options))
    total = sum(n * per for n, per in plan.values())
    cut = total > budget_s
    if cut:
        share = max(0.0, budget_s) / total
        plan = {k: (max(1, int(n * share)), per) for k, (n, per) in plan.items()}
    return {k: v for k, v in plan.items() if v[0] > 0}, cut


def _changes(summary: Dict[str, Any], base: Dict[str, Any], software: Dict[str, Any],
             facts: Optional[Tuple[str, ...]] = None) -> List[str]:
    """What differs between the setup a cell's processes ran with (``summary``:
    ``baseline_store.startup_of`` them) and the one its baseline recording did: its
    recorded variables (``NAME: baseline -> current``), then the software facts both sides know
    (``facts``: only these)."""
    lines = context_diff.env_diff(summary.get("env"), base.get("env"))
    cur_soft = dict(software)
    base_soft = dict(base.get("software") or {})
    base_soft.setdefault("mxnet_version", base.get("mxnet_version"))
    shared = (set(cur_soft) & set(base_soft)) | {"mxnet_version"}  # facts one side lacks are no change
    if facts is not None:  # only these, and only where both sides know them
        shared = {k for k in shared & set(facts) if cur_soft.get(k) is not None and base_soft.get(k) is not None}
    return lines + context_diff.version_diff({k: cur_soft.get(k) for k in shared}, {k: base_soft.get(k) for k in shared})


def with_context(verdicts: Dict[str, vd.Verdict], cells: Dict[str, CellRecord], baseline: Baseline
                 ) -> Dict[str, vd.Verdict]:
    """The verdicts of the cells' primary figures, each a new value with what changed around
    it since the baseline (environment, versions), its start-up note and its trend over the
    recorded sessions."""
    software = software_facts(r for rec in cells.values() for r in rec.cell.ok_runs)
    out = dict(verdicts)
    for key, rec in cells.items():
        v = verdicts.get(key)
        base = baseline.latest(key)
        if v is None or base is None:
            continue
        summary = baseline_store.startup_of(rec.cell)
        env_diff = _changes(summary, base, software)
        notes = list(v.notes)
        note = context_diff.startup_note(summary, base)
        if note:
            notes.append(note)
        trend = baseline.session_medians(key)
        if len(trend) >= 2:
            notes.append(reasons.trend(trend, rec.cell.median_or_none))
        out[key] = dataclasses.replace(v, env_diff=list(v.env_diff) + env_diff, notes=notes)
    return out


def setup_changes(cells: Dict[str, CellRecord], baseline: Optional[Baseline]) -> List[str]:
    """What the session's processes ran with that the baseline's recordings did not, as far
    as a duet against the recorded setup can put it back (its recorded variables, as each
    worker process saw them; the MXNet build and numpy): sorted lines ``NAME: baseline ->
    current``, empty when the setups are the same. Pure."""
    if baseline is None:
        return []
    software = software_facts(r for rec in cells.values() for r in rec.cell.ok_runs)
    lines = set()
    for key, rec in cells.items():
        base = baseline.latest(key)
        if base is not None and rec.cell.ok_runs:
            lines.update(_changes(baseline_store.startup_of(rec.cell), base, software, thresholds.SETUP_FACTS))
    return sorted(lines)


# ----------------------------------------------------------------------------- the recorded setup


def _between_processes(v: vd.Verdict) -> bool:
    m = METRICS.get(v.metric)
    return m is not None and m.rule == "processes"


def _against_a_busy_baseline(v: vd.Verdict) -> bool:
    """An unchanged figure the baseline could not judge because its own processes ran slowed
    (``excluded[1]``): a slow baseline makes any session look better, so its direction says
    nothing, and a real slowdown hides under it (recorded in a slow spell, a -28% cell read
    "better by 72%")."""
    return v.kind == "unchanged" and v.busy and v.excluded[1] > 0


def setup_suspects(verdicts: Dict[str, vd.Verdict], min_effect: float = 0.05) -> FrozenSet[str]:
    """The cells with a figure the baseline alone cannot settle (``thresholds.SETTLED_BY_SETUP``; an
    improvement, which a faster spell of the machine than the baseline's makes of a real
    slowdown too; one the baseline's own slowed processes left undecided), one worse than
    the baseline by more than ``thresholds.SETUP_TRIGGER`` x ``min_effect``, or one "unchanged" that
    its resolution cannot clear of a slowdown of ``min_effect`` (``thresholds.SETUP_CLEARANCE``): what
    baseline mode measures again against the recorded setup. Pure."""
    shift = session_shift(verdicts)

    def suspect(k: str, v: vd.Verdict) -> bool:
        if not _between_processes(v):
            return False
        if (v.kind in thresholds.SETTLED_BY_SETUP or (thresholds.SUSPECT_IMPROVEMENTS and v.kind == "improvement")
                or (thresholds.SUSPECT_BUSY_BASELINES and _against_a_busy_baseline(v))):
            return True
        if v.kind != "unchanged" or v.change is None:
            return False
        read, effect = METRICS[v.metric].oriented(v.change), effect_for(v.metric, min_effect, k)
        if read < shift - thresholds.SETUP_TRIGGER * effect:
            return True
        return thresholds.SETUP_CLEARANCE is not None and not _cleared(v, read, shift, effect)
    return frozenset(cell_of(k) for k, v in verdicts.items() if suspect(k, v))


def _cleared(v: vd.Verdict, read: float, shift: float, effect: float) -> bool:
    """Whether an unchanged figure's reading (oriented: positive is better) clears a slowdown
    of ``effect`` by k x its resolution's scale, the session's common gain ``shift`` taken
    off: k is ``thresholds.SETUP_CLEARANCE``, or the one-sided 95% Student t quantile of the
    resolution's degrees of freedom where that is larger (a scale estimated from few
    sessions). A provisional resolution clears nothing (``thresholds.PROVISIONAL_CLEARS``)."""
    res = v.resolution or {}
    if res.get("provisional") and not thresholds.PROVISIONAL_CLEARS:
        return False
    scale = res.get("scale") or 0.0
    k = thresholds.SETUP_CLEARANCE
    df = res.get("df")
    if isinstance(df, (int, float)) and not isinstance(df, bool) and df >= 1:
        from scipy.special import stdtrit  # the Student t quantile
        k = max(k, float(stdtrit(df, 0.95)))
    return read > -1 and math.log1p(read) - math.log1p(shift) >= -effect + k * scale


def judged_between_processes(verdicts: Dict[str, vd.Verdict]) -> FrozenSet[str]:
    """The cells with a figure judged between processes: every cell a duet against the
    recorded setup can measure again. Pure."""
    return frozenset(cell_of(k) for k, v in verdicts.items() if _between_processes(v))


def session_shift(verdicts: Dict[str, vd.Verdict]) -> float:
    """How much better than the baseline the session's figures read in common (the median of
    their oriented changes, figures judged between processes on a quiet machine), when it is
    better (else 0): a VM in a faster spell than the baseline's lifts every cell, and a cell
    that reads "unchanged" in such a session may have lost that much. Pure."""
    xs = [METRICS[v.metric].oriented(v.change) for v in verdicts.values()
          if _between_processes(v) and v.change is not None and not v.busy]
    return max(0.0, statistics.median(xs)) if len(xs) >= thresholds.SHIFT_FIGURES else 0.0


def _beyond_resolution(v: vd.Verdict) -> bool:
    """Whether the baseline's verdict saw a change beyond its resolution (and the minimum effect)."""
    if v.kind in ("unclear", "improvement", "regression"):
        return True
    return (v.kind in ("suspect", "unresolved") and v.change is not None and v.threshold is not None
            and abs(v.change) > v.threshold)


def other_method(baseline: Baseline, key: str) -> Optional[str]:
    """Why cell ``key``'s baseline figures were measured another way than this suite measures
    them (its newest recording names another measuring method, ``MEASURING_METHOD``, or none:
    recorded before the suite said), else None: such figures are never compared figure for
    figure (``not_compared``), only settled against the recorded setup."""
    recorded = baseline.recorded_suite(key)
    if recorded is None:
        return reasons.method_unrecorded(MEASURING_METHOD)
    if recorded.get("method") != MEASURING_METHOD:
        return reasons.method_other(recorded.get("method"), recorded.get("version"), MEASURING_METHOD, __version__)
    return None


def other_methods(cells: Dict[str, CellRecord], baseline: Optional[Baseline]) -> Dict[str, str]:
    """Cell key -> ``other_method``, for the measured cells the baseline holds. Pure."""
    if baseline is None:
        return {}
    out = {}
    for key, rec in cells.items():
        if rec.cell.ok_runs and baseline.latest(key) is not None:
            why = other_method(baseline, key)
            if why:
                out[key] = why
    return out


def not_compared(verdicts: Dict[str, vd.Verdict], why: Dict[str, str], min_effect) -> Dict[str, vd.Verdict]:
    """The verdicts with each figure of a cell in ``why`` (``other_methods``) no longer a
    comparison with the baseline's: a slowdown beyond its minimum effect is **unresolved**
    (it fails unless a duet against the recorded setup settles it, ``against_recorded_setup``,
    which replaces it), any other figure between processes is not gated. Pure."""
    out = dict(verdicts)
    for mk, v in verdicts.items():
        reason = why.get(cell_of(mk))
        if reason is None or not _between_processes(v) or v.change is None:
            continue
        effect = effect_for(v.metric, min_effect, mk)
        slower = METRICS[v.metric].oriented(v.change) < -effect
        # the threshold a change must pass to be beyond the resolution, kept for the duet's
        # judgement of what both setups agree on (``_beyond_resolution``)
        threshold = v.threshold if v.threshold is not None else max(effect, (v.resolution or {}).get("value") or 0.0)
        out[mk] = dataclasses.replace(v, kind="unresolved" if slower else "not-gated", threshold=threshold,
                                      reason=reasons.not_compared(reason, vd.describe_change(v.change, METRICS[v.metric]),
                                                                  slower))
    return out


def _probes_of(records) -> List[Dict[str, Any]]:
    return [p for ms in records if isinstance(ms, dict) for p in (ms.get("probe_before"), ms.get("probe_after"))
            if isinstance(p, dict)]


def machine_shifts(cells: Dict[str, CellRecord], baseline: Baseline
                   ) -> Dict[str, Tuple[Optional[machine_states.ProbeShift], str]]:
    """Cell key -> (the machine's probes around its processes now, both sides of its duet
    included: they ran on this machine now, against the ones the baseline recorded around the
    processes of its comparison set, ``machine_states.probe_shift``; why there is none, when
    None). Per cell: a baseline's cells may come from other sessions (``=add``), even other
    hosts. Pure."""
    out = {}
    for key, rec in cells.items():
        now = _probes_of(r.machine_state for r in list(rec.cell.runs) + list(rec.cell.reference or []))
        then = _probes_of(ms for r in baseline.comparison_set(key) for ms in (r.get("process_probes") or []))
        if not now:
            out[key] = (None, reasons.NO_PROBES_NOW)
        elif not then:
            out[key] = (None, reasons.NO_PROBES_THEN)
        else:
            shift = machine_states.probe_shift(now, then)
            out[key] = (shift, "" if shift is not None else reasons.PROBES_ON_OTHER_SETUPS)
    return out


def _both_agree(b: vd.Verdict, said: str, key: str, baseline: Baseline,
                shifts: Mapping[str, Tuple[Optional[machine_states.ProbeShift], str]]) -> Tuple[str, str]:
    """(kind, reason) of a figure both setups of the duet read alike while the baseline saw
    a change beyond its resolution: what moved, from the evidence (see ``MACHINE_DIFFERS``)."""
    metric = METRICS[b.metric]
    method = other_method(baseline, cell_of(key))
    shift, no_shift = shifts.get(cell_of(key), (None, reasons.NO_PROBES_OF_CELL))
    # what the probes say of it (their readings are speeds); nothing, with another method
    what = shift.explains(metric.as_speed(b.change)) if shift is not None and not method else None
    kind = {machine_states.MACHINE: MACHINE_DIFFERS, machine_states.SYSTEM: SYSTEM_DIFFERS}.get(what, UNEXPLAINED)
    return kind, reasons.both_agree(said, vd.describe_change(b.change, metric), b.threshold, method,
                                    shift.said() if shift is not None else None, no_shift, what, b.change)


def against_recorded_setup(verdicts: Dict[str, vd.Verdict], duets: Dict[str, vd.Verdict], baseline: Baseline,
                           min_effect: float,
                           shifts: Optional[Mapping[str, Tuple[Optional[machine_states.ProbeShift], str]]] = None,
                           unrecorded_build: Optional[str] = None) -> Dict[str, vd.Verdict]:
    """The verdicts with each figure that was measured in pairs against the recorded setup
    (``duets``: its pairs' verdicts, ``ab_judging.judge_ab_once``) judged by those pairs, as
    new values saying so ("against the recorded setup: x0.91 [0.89, 0.93]"). When the pairs
    show no change but the baseline saw one beyond its resolution, both setups agree: the
    change is not the MXNet install's nor the recorded variables', and the verdict says what
    moved, from the evidence (``_both_agree``): **machine-differs** where the machine's probes
    moved with it against the baseline's recorded probes (``shifts``, by cell:
    ``machine_shifts``), **system-differs** where they did not, **unexplained** where nothing
    tells (no probes: the reason ``shifts`` gives; another measuring method). Each
    fails only as the failure policy names it. ``unrecorded_build``: the requirement that
    stood for a setup whose build the baseline did not record (each verdict says so). Pure."""
    out = dict(verdicts)
    for mk, d in duets.items():
        b = verdicts.get(mk)
        if b is None or not _between_processes(d):
            continue
        if d.n_current == 0:
            # no pair gave this figure. A figure the duet's workers do not measure, while the
            # cell's other figures had pairs: the baseline's verdict stands, as a session
            # without the setup would have it. Every pair failed: a
            # slowdown the baseline left to the duet is unresolved, never passed
            if not any(o.n_current > 0 for k, o in duets.items() if cell_of(k) == cell_of(mk)):
                out.update(unsettled({mk: b}, {cell_of(mk): reasons.NO_PAIR_GAVE_IT}, min_effect))
            continue
        said = reasons.against_setup(unrecorded_build, d.change, d.interval)
        common = dict(resolution=b.resolution, notes=list(b.notes) + [reasons.against_baseline(b.kind, b.reason)],
                      busy=d.busy)
        if d.kind == "unchanged" and b.change is not None and _beyond_resolution(b):
            kind, reason = _both_agree(b, said, mk, baseline, shifts or {})
            out[mk] = dataclasses.replace(
                d, kind=kind, change=b.change, interval=b.interval, threshold=b.threshold,
                current_median=b.current_median, baseline_median=b.baseline_median, reason=reason, **common)
        else:
            out[mk] = dataclasses.replace(d, reason=f"{said}: {d.reason}", **common)
    return out


def unsettled(verdicts: Dict[str, vd.Verdict], why: Dict[str, str], min_effect: float) -> Dict[str, vd.Verdict]:
    """The verdicts with each slowdown beyond ``min_effect`` that a duet against the recorded
    setup should have settled and did not (``why``, by cell: the setup could not be built, the
    deadline cut it) made unresolved: it fails, never passes. Pure."""
    out = dict(verdicts)
    for mk, v in verdicts.items():
        reason = why.get(cell_of(mk))
        effect = effect_for(v.metric, min_effect, mk)
        if (reason is None or v.kind not in thresholds.SETTLED_BY_SETUP or v.kind == "unresolved" or v.change is None
                or not _between_processes(v) or METRICS[v.metric].oriented(v.change) >= -effect):
            continue
        out[mk] = dataclasses.replace(v, kind="unresolved", reason=reasons.not_passed(v.reason, reason, effect))
    return out


def undecided(verdicts: Dict[str, vd.Verdict]) -> Tuple[Dict[str, vd.Verdict], Dict[str, vd.Verdict]]:
    """The slowdowns the baseline cannot decide: (below this machine's resolution, beyond it but
    not significant across the session), by figure key."""
    return ({k: v for k, v in verdicts.items() if v.kind == "below-resolution"},
            {k: v for k, v in verdicts.items() if v.kind == "unclear"})
