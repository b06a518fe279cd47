"""Judge a session's cells in baseline mode, and what both modes share: the session's cells
(``PerfSession.measured_cells``), the machine's state labelled around every process, and the outcome
record (``GateOutcome``). Every figure is judged against the machine's baseline, and
suspects are confirmed by measuring them again through the cell's own worker kind
(``CellRecord.remeasure``, up to ``CONFIRM_PROCESSES`` processes). Whatever is still
unclear is ``unresolved``. The rules themselves are ``judge/``'s; A/B mode is
``ab_judging.py``'s. ``finish.py`` calls them at the end of the session.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from pytest_mxperf.judge import (
    context_diff,
    machine_states,
    thresholds,
)
from pytest_mxperf.judge import verdict as vd
from pytest_mxperf.measure.session import CellRecord, PerfSession
from pytest_mxperf.model.measurement import cell_of, metric_key
from pytest_mxperf.store import baseline_store
from pytest_mxperf.store.baselines import Baseline, BaselineError


@dataclasses.dataclass
class GateOutcome:
    messages: List[str]
    verdicts: Dict[str, vd.Verdict] = dataclasses.field(default_factory=dict)
    failed: bool = False
    confirmed: int = 0
    baseline_path: Optional[str] = None
    report_files: List[str] = dataclasses.field(default_factory=list)
    profiles: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)  # key -> profile worker result
    # what the summary says first (baseline mode): slowdowns below this machine's resolution or
    # unclear across the session, a provisional resolution; also the first of ``messages``
    headline: List[str] = dataclasses.field(default_factory=list)
    # A/B mode: what each side ran (``session_files.ab_sides``), for the report
    sides: Dict[str, Any] = dataclasses.field(default_factory=dict)
    # what the full report says and the terminal does not by default (``output/report.py``):
    # notes on figures that did not change, figures not gated, profiles of passing cells,
    # where the history store keeps the session
    details: List[str] = dataclasses.field(default_factory=list)
    # the failing cells' operator profiles beside the baseline's or the reference's: the
    # screen shows them after its table (they are not among ``messages``)
    profile_lines: List[str] = dataclasses.field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(v.kind == kind for v in self.verdicts.values())


def software_facts(cell_runs) -> Dict[str, Any]:
    """What the workers actually ran with (recorded beside figures, never in the machine id)."""
    for run in cell_runs:
        m = run.meta
        if m.get("mxnet_version"):
            out = {"mxnet_version": m.get("mxnet_version"), "features": m.get("features"),
                   "python": m.get("python"), "numpy_version": m.get("numpy_version")}
            for k in ("cuda_runtime", "cudnn"):
                if m.get(k):
                    out[k] = m[k]
            return out
    return {}


# ----------------------------------------------------------------------------- machine state

def _all_runs(cells: Dict[str, CellRecord]):
    for rec in cells.values():
        yield from rec.cell.runs
        yield from rec.cell.reference or []


def label_machine_states(cells: Dict[str, CellRecord], baseline: Optional[Baseline]) -> Optional[Dict[str, float]]:
    """Label every process quiet / slowed / unknown against one reference (from this
    session's probes and the ones ``baseline`` recorded); returns it."""
    probes = []
    for run in _all_runs(cells):
        ms = run.machine_state
        probes += [p for p in (ms.get("probe_before"), ms.get("probe_after")) if p]
    for ms in baseline.process_probes() if baseline is not None else ():
        probes += [p for p in (ms.get("probe_before"), ms.get("probe_after")) if p]
    if not probes:
        return None
    reference = machine_states.reference_from(probes)
    for run in _all_runs(cells):
        ms = run.machine_state
        if ms.get("probe_before") or ms.get("probe_after"):
            st = machine_states.label(ms.get("probe_before"), ms.get("probe_after"), ms.get("load"), reference)
            run.label_machine_state(st.state, st.reason)
    return reference


def _reasons(runs) -> List[str]:
    return [r.machine_state.get("reason") for r in runs if r.state in (machine_states.SLOWED, machine_states.SPELL)]


# ----------------------------------------------------------------------------- baseline mode

def comparisons(cells: Dict[str, CellRecord], baseline: Baseline, reference, confirmed: set
                ) -> Dict[str, vd.Comparison]:
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
                baseline=baseline.values(key, None if primary else m.name) or [],
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
    confirmed by measuring them again, what the summary says first (baseline mode: the
    slowdowns the baseline cannot decide, the provisional resolution) and whether that
    headline fails the session by the failure policy."""

    verdicts: Dict[str, vd.Verdict]
    confirmed: int = 0
    headline: Tuple[str, ...] = ()
    failed: bool = False


def judge_baseline_once(cells: Dict[str, CellRecord], baseline: Baseline, reference, confirmed: set,
                        min_effect: float) -> Dict[str, vd.Verdict]:
    """Every judged figure of ``cells`` against ``baseline``: a pure function of its arguments
    (the interim report and the end of the session call it alike)."""
    return vd.judge_session(comparisons(cells, baseline, reference, confirmed), min_effect=min_effect)


def judge_baseline(session: PerfSession, baseline: Baseline) -> Judged:
    """Baseline mode: judge the session's cells; suspects are measured again through the
    session (``PerfSession.confirm``, up to ``CONFIRM_PROCESSES`` processes) and the cells
    judged again, as they then are; then what the verdicts need beside them (what changed
    around each figure, its trend) and the headline."""
    options = session.options
    cells = session.measured_cells()
    reference = label_machine_states(cells, baseline)
    confirmed: set = set()
    verdicts = judge_baseline_once(cells, baseline, reference, confirmed, options.min_effect)
    if not options.smoke and not options.update_baselines:
        # Re-measure suspects; judging again can make another cell a suspect (BH across
        # cells), so repeat until none is left. After that, nothing stays "suspect": a
        # slowdown is a regression, unresolved, or unchanged.
        # confirming costs at most the first stage again (or a minute, after a shorter one)
        budget = max(CONFIRM_FLOOR_S, time.time() - session.started)
        spent = 0.0
        for _ in range(3):
            suspects = {cell_of(k) for k, v in verdicts.items() if v.kind == "suspect"} - confirmed
            if not suspects:
                break
            wanted, cut = confirmation_plan({k: cells[k] for k in suspects}, budget - spent, session.options)
            session.say(confirmation_line(wanted, budget - spent, cut))
            t0 = time.time()
            for i, (key, (n, _)) in enumerate(sorted(wanted.items())):
                session.confirm(key, n)
                confirmed.add(key)
                session.say(f"mxperf: re-measured {i + 1} of {len(wanted)} suspect cell(s) ({key}), "
                            f"{(time.time() - t0) / 60:.1f} min gone, about "
                            f"{sum(n * s for k, (n, s) in wanted.items() if k > key) / 60:.1f} min left")
            spent += time.time() - t0
            cells = session.measured_cells()
            reference = label_machine_states(cells, baseline) or reference
            verdicts = judge_baseline_once(cells, baseline, reference, confirmed, options.min_effect)
    verdicts = with_context(verdicts, cells, baseline)
    headline, failed = resolution_headline(options, verdicts, baseline)
    return Judged(verdicts, len(confirmed), tuple(headline), failed)


#: starting a worker process and reading its result, beside MXNet's import (measured: 0.2-0.4 s)
SPAWN_S = 0.5
#: what confirming suspects may take after a first stage shorter than this (seconds)
CONFIRM_FLOOR_S = 60.0


def confirmation_plan(suspects: Dict[str, CellRecord], budget_s: float, options
                      ) -> Tuple[Dict[str, Tuple[int, float]], bool]:
    """(key -> (processes to add, seconds a process is expected to take) for each suspect,
    whether they were cut to the budget): up to
    ``CONFIRM_PROCESSES`` processes in all, cut alike for every suspect (at least one each)
    when they would take longer than ``budget_s``, what the first stage took (a suspect's
    confirming process is a fresh one: its figure's process time, plus MXNet's import and a
    process start when it was measured among other cells, plus the probe). Pure."""
    from pytest_mxperf.output.report import PROBE_OVERHEAD_S, PROCESS_OVERHEAD_S
    plan: Dict[str, Tuple[int, float]] = {}
    for key, rec in suspects.items():
        runs = rec.cell.ok_runs
        walls = sorted(r.wall_seconds for r in runs if r.wall_seconds)
        per = walls[len(walls) // 2] if walls else options.time_budget + PROCESS_OVERHEAD_S
        shared = [r for r in runs if r.meta.get("process_cells")]
        if shared:  # a fresh process imports MXNet too, which a shared one did once for all its cells
            per += max(float(r.meta.get("import_seconds") or 0.0) for r in shared) + SPAWN_S
        per += PROBE_OVERHEAD_S if options.machine_probe else 0.0
        plan[key] = (max(0, thresholds.CONFIRM_PROCESSES - len(runs)), per)
    total = sum(n * per for n, per in plan.values())
    cut = total > budget_s
    if cut:
        share = max(0.0, budget_s) / total
        plan = {k: (max(1, int(n * share)), per) for k, (n, per) in plan.items()}
    return {k: v for k, v in plan.items() if v[0] > 0}, cut


def confirmation_line(plan: Dict[str, Tuple[int, float]], budget_s: float, cut: bool) -> str:
    """Said before the suspects are measured again: how many, how many processes, the cost."""
    n = sum(p for p, _ in plan.values())
    cost = sum(p * per for p, per in plan.values())
    return (f"mxperf: confirming {len(plan)} suspect cell(s) with {n} more process(es), about "
            f"{cost / 60:.1f} min (at most as long again as the measuring so far or a minute: {max(0.0, budget_s) / 60:.1f} min"
            + ("; cut to fit, so some may stay unresolved" if cut else "") + ")")


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
        summary = baseline_store.summarize_cell(rec.cell)
        env_diff = context_diff.env_diff(summary.get("env"), base.get("env"))
        cur_soft = dict(software)
        base_soft = dict(base.get("software") or {})
        base_soft.setdefault("mxnet_version", base.get("mxnet_version"))
        shared = (set(cur_soft) & set(base_soft)) | {"mxnet_version"}  # facts one side lacks are no change
        env_diff += context_diff.version_diff({k: cur_soft.get(k) for k in shared}, {k: base_soft.get(k) for k in shared})
        notes = list(v.notes)
        note = context_diff.startup_note(summary, base)
        if note:
            notes.append(note)
        trend = baseline.session_medians(key)
        if len(trend) >= 2:
            notes.append("trend over recorded sessions: " + " ".join(f"{x:.4g}" for x in trend)
                         + f" -> {rec.cell.median_or_none:.4g} now")
        out[key] = dataclasses.replace(v, env_diff=list(v.env_diff) + env_diff, notes=notes)
    return out


def _reference_hint(baseline: Baseline, keys: Sequence[str]) -> str:
    """How to settle what the baseline cannot: an A/B run against the install it recorded."""
    try:
        req = baseline.recorded_requirement(keys)
    except BaselineError:
        req = None
    against = f" ({req}, the install the baseline was recorded with)" if req else ""
    return f"use A/B: --perf-reference baseline{against}, or --perf-reference REQ for another install"


def resolution_headline(options, verdicts: Dict[str, vd.Verdict], baseline: Baseline) -> Tuple[List[str], bool]:
    """First in the summary: slowdowns the baseline cannot decide (below this machine's
    resolution; beyond it but not significant across the session), whether the resolution
    is provisional, and the failure policy for them (``--perf-fail-on`` below-resolution,
    unclear): the lines, and whether they fail the session."""
    failed = False
    lines: List[str] = []
    below = {k: v for k, v in verdicts.items() if v.kind == "below-resolution"}
    unclear = {k: v for k, v in verdicts.items() if v.kind == "unclear"}
    undecided = [cell_of(k) for k in list(below) + list(unclear)]
    tested = sum(v.resolution is not None for v in verdicts.values())   # the figures BH ran over

    def item(k: str, v: vd.Verdict) -> str:
        res = v.resolution or {}
        where = ("provisional" if res.get("provisional") else f"{res.get('sessions')} sessions") if res else "?"
        r = f"{100 * res['value']:.1f}%" if isinstance(res.get("value"), (int, float)) else "?"
        ch = f"{100 * v.change:+.1f}%" if v.change is not None else "?"
        return f"mxperf:   {k}: {ch} ({v.unit}), resolution {r} ({where})"

    if below:
        widest = max((v.resolution or {}).get("value") or 0.0 for v in below.values())
        lines.append(f"mxperf: BELOW RESOLUTION: {len(below)} slowdown(s) below this machine's resolution of up to "
                     f"{100 * widest:.1f}% (for one of this session's {tested} tested figure(s)): the baseline cannot tell them from the machine's drift between "
                     f"sessions; {_reference_hint(baseline, undecided)}"
                     + ("" if "below-resolution" in options.fail_on
                        else " (not failing; --perf-fail-on +below-resolution fails on them)"))
        lines += [item(k, v) for k, v in below.items()]
    if unclear:
        lines.append(f"mxperf: UNCLEAR: {len(unclear)} slowdown(s) beyond the resolution but not significant across "
                     f"the session's {tested} tested figure(s) (false discovery rate {thresholds.FDR_Q}); re-run, or "
                     f"{_reference_hint(baseline, undecided)}"
                     + ("" if "unclear" in options.fail_on else " (not failing; --perf-fail-on +unclear fails on them)"))
        lines += [item(k, v) for k, v in unclear.items()]
    judged = [v for v in verdicts.values() if v.resolution]
    provisional = [v for v in judged if v.resolution.get("provisional")]
    if provisional:
        lines.append(f"mxperf: resolution provisional for {len(provisional)} of {len(judged)} figure(s): the baseline "
                     "holds one recorded session of them, so how far this machine drifts between sessions is "
                     "unknown (a slow spell of a shared VM can outlast a recording); measure it: record again "
                     "later, at another time of day, with --perf-update-baselines=add")
    for kind, name, what in (("below-resolution", "below-resolution", "below this machine's resolution"),
                             ("unclear", "unclear", "unclear across the session")):
        n = sum(v.kind == kind for v in verdicts.values())
        if n and name in options.fail_on:
            failed = True
            lines.append(f"mxperf: failing the session: {n} slowdown(s) {what} (--perf-fail-on {name})")
    return lines, failed
