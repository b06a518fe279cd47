"""The end of a session: label the machine's state, judge every figure, confirm, decide.

Plain logic over a PerfSession; the plugin calls ``finish_session`` once every test ran.

1. Every process is labelled quiet or slowed from the machine-state probes around it
   (against one reference for the session and the baseline, so both sides are labelled
   alike).
2. Every judged figure of every measured cell (throughput, latency, kvstore seconds,
   cluster samples/s, seconds and epochs to accuracy, peak memory) is judged: against the
   machine's baseline, or in A/B mode (``--perf-reference``) against the reference
   install's processes paired with the candidate's.
3. Suspects are re-measured once, with the same worker kind (``CellRecord.remeasure``):
   up to ``CONFIRM_PROCESSES`` processes in baseline mode, a second stage of as many pairs
   again in A/B mode. Whatever is still unclear is ``unresolved``.
4. A failing cell (regression, unresolved, below its floor) is profiled once more, untimed,
   under ``mx.profiler`` (``profiles.py``, ``workers/profile.py``): its top operators are
   shown beside the baseline's profile, or in A/B mode beside the reference interpreter's.
   ``--perf-profile`` profiles every cell; recording a baseline keeps each cell's profile.
5. The failure policy (``options.fail_on``) decides the exit status; the baseline is
   recorded when asked; the report files are written.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from . import baselines, machine_state, profiles, stats, verdict as vd, verdict_duet
from .samples import CellMeasurement, metric_key
from .session import CellRecord, PerfSession


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


def _cells(session: PerfSession) -> Dict[str, CellRecord]:
    """Measured cells by key; a cell measured by two tests is judged once, on all its processes."""
    out: Dict[str, CellRecord] = {}
    for r in session.records:
        if not r.cell.ok_runs:
            continue
        key = r.cell.workload.key()
        if key in out and out[key].cell is not r.cell:
            out[key].cell.runs.extend(r.cell.runs)
            if r.cell.reference and out[key].cell.reference is not None:
                out[key].cell.reference.extend(r.cell.reference)
        else:
            out.setdefault(key, r)
    return out


# ----------------------------------------------------------------------------- machine state

def _all_runs(cells: Dict[str, CellRecord]):
    for rec in cells.values():
        yield from rec.cell.runs
        yield from rec.cell.reference or []


def label_machine_states(cells: Dict[str, CellRecord], doc: Optional[Dict[str, Any]]) -> Optional[Dict[str, float]]:
    """Label every process quiet / slowed / unknown against one reference; returns it."""
    probes = []
    for run in _all_runs(cells):
        ms = run.meta.get("machine_state") or {}
        probes += [p for p in (ms.get("probe_before"), ms.get("probe_after")) if p]
    for entry in ((doc or {}).get("cells") or {}).values():
        for rec in entry.get("history") or []:
            for ms in rec.get("process_probes") or []:
                if isinstance(ms, dict):
                    probes += [p for p in (ms.get("probe_before"), ms.get("probe_after")) if p]
    if not probes:
        return None
    reference = machine_state.reference_from(probes)
    for run in _all_runs(cells):
        ms = run.meta.get("machine_state")
        if ms and (ms.get("probe_before") or ms.get("probe_after")):
            st = machine_state.label(ms.get("probe_before"), ms.get("probe_after"), ms.get("load"), reference)
            ms["state"], ms["reason"] = st.state, st.reason
    return reference


def _reasons(runs) -> List[str]:
    return [(r.meta.get("machine_state") or {}).get("reason") for r in runs
            if (r.meta.get("machine_state") or {}).get("state") in (machine_state.SLOWED, machine_state.SPELL)]


def _baseline_states(doc, key: str, reference) -> Optional[List[Optional[str]]]:
    """The baseline's labels, relabelled against this session's reference when its probes
    were recorded, else as recorded."""
    out: List[Optional[str]] = []
    for rec in baselines.comparison_set(doc, key):
        n = len(rec["process_medians"])
        probes = rec.get("process_probes")
        states = rec.get("process_states")
        if reference and isinstance(probes, list) and len(probes) == n:
            for ms in probes:
                if isinstance(ms, dict):
                    out.append(machine_state.label(ms.get("probe_before"), ms.get("probe_after"),
                                                   ms.get("load"), reference).state)
                else:
                    out.append(None)
        elif isinstance(states, list) and len(states) == n:
            out.extend(states)
        else:
            out.extend([None] * n)
    return out


# ----------------------------------------------------------------------------- baseline mode

def _comparisons(cells: Dict[str, CellRecord], doc, reference, confirmed: set) -> Dict[str, vd.Comparison]:
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
                baseline=baselines.baseline_values(doc, key, None if primary else m.name) or [],
                current_states=machine_state.states(ok),
                baseline_states=_baseline_states(doc, key, reference) if primary else None,
                session_medians=(),
                screened=screened, confirmed=key in confirmed, state_reasons=_reasons(ok),
                spell_depth=machine_state.spell_depth(ok, reference),
                resolution=(baselines.cell_resolution(doc, key, None if primary else m.name)
                            if m.rule == "processes" else None))
    return out


def _judge_baseline(session: PerfSession, cells, doc, reference, out: GateOutcome) -> Dict[str, vd.Verdict]:
    options = session.options
    confirmed: set = set()
    verdicts = vd.judge_session(_comparisons(cells, doc, reference, confirmed), min_effect=options.min_effect)
    if not options.smoke and not options.update_baselines:
        # Re-measure suspects; judging again can make another cell a suspect (BH across
        # cells), so repeat until none is left. After that, nothing stays "suspect": a
        # slowdown is a regression, unresolved, or unchanged.
        for _ in range(3):
            suspects = {k.partition("#")[0] for k, v in verdicts.items() if v.kind == "suspect"} - confirmed
            if not suspects:
                break
            for key in sorted(suspects):
                rec = cells[key]
                missing = vd.CONFIRM_PROCESSES - len(rec.cell.ok_runs)
                if missing > 0 and rec.remeasure is not None:
                    rec.cell.runs.extend(rec.remeasure(missing).runs)
                confirmed.add(key)
            reference = label_machine_states(cells, doc) or reference
            verdicts = vd.judge_session(_comparisons(cells, doc, reference, confirmed),
                                        min_effect=options.min_effect)
        out.confirmed = len(confirmed)
    software = software_facts(r for rec in cells.values() for r in rec.cell.ok_runs)
    for key, rec in cells.items():
        v = verdicts.get(key)
        base = baselines.latest_recording(doc, key)
        if v is None or base is None:
            continue
        summary = baselines.summarize_cell(rec.cell)
        v.env_diff = vd.env_diff(summary.get("env"), base.get("env"))
        cur_soft = dict(software)
        base_soft = dict(base.get("software") or {})
        base_soft.setdefault("mxnet_version", base.get("mxnet_version"))
        shared = (set(cur_soft) & set(base_soft)) | {"mxnet_version"}  # facts one side lacks are no change
        v.env_diff += vd.version_diff({k: cur_soft.get(k) for k in shared}, {k: base_soft.get(k) for k in shared})
        note = vd.startup_note(summary, base)
        if note:
            v.notes.append(note)
        trend = baselines.session_medians(doc, key)
        if len(trend) >= 2:
            v.notes.append("trend over recorded sessions: " + " ".join(f"{x:.4g}" for x in trend)
                           + f" -> {rec.cell.median_or_none:.4g} now")
    _resolution_headline(session, verdicts, doc, out)
    return verdicts


def _reference_hint(session: PerfSession, doc, keys: Sequence[str]) -> str:
    """How to settle what the baseline cannot: an A/B run against the install it recorded."""
    try:
        req = baselines.recorded_requirement(doc, keys)
    except baselines.BaselineError:
        req = None
    against = f" ({req}, the install the baseline was recorded with)" if req else ""
    return f"use A/B: --perf-reference baseline{against}, or --perf-reference REQ for another install"


def _resolution_headline(session: PerfSession, verdicts: Dict[str, vd.Verdict], doc, out: GateOutcome) -> None:
    """First in the summary: slowdowns the baseline cannot decide (below this machine's
    resolution; beyond it but not significant across the session), whether the resolution
    is provisional, and the failure policy for them (``--perf-fail-on`` below-resolution,
    unclear)."""
    options = session.options
    lines: List[str] = []
    below = {k: v for k, v in verdicts.items() if v.kind == "below-resolution"}
    unclear = {k: v for k, v in verdicts.items() if v.kind == "unclear"}
    undecided = [k.partition("#")[0] for k in list(below) + list(unclear)]
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
                     f"{100 * widest:.1f}%: the baseline cannot tell them from the machine's drift between "
                     f"sessions; {_reference_hint(session, doc, undecided)}"
                     + ("" if "below-resolution" in options.fail_on
                        else " (not failing; --perf-fail-on +below-resolution fails on them)"))
        lines += [item(k, v) for k, v in below.items()]
    if unclear:
        lines.append(f"mxperf: UNCLEAR: {len(unclear)} slowdown(s) beyond the resolution but not significant across "
                     f"the session's {tested} tested figure(s) (false discovery rate {vd.FDR_Q}); re-run, or "
                     f"{_reference_hint(session, doc, undecided)}"
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
            out.failed = True
            lines.append(f"mxperf: failing the session: {n} slowdown(s) {what} (--perf-fail-on {name})")
    out.headline = lines
    out.messages[:0] = lines


# ----------------------------------------------------------------------------- A/B mode

#: figures that are a rate of a duet's timed rounds (higher is better: score / train
#: throughput, an io cell's samples/s) or their time per unit (lower is better: a kvstore
#: cell's seconds per push+pull round); each worker kind's rounds time its primary figure
_ROUND_FIGURES = ("throughput", "samples_per_s", "comm_seconds")


def _duet_log_ratio(c, r, metric) -> float:
    """One duet pair's log(candidate figure / reference figure): for a figure the rounds
    time (``_ROUND_FIGURES``), from the rounds the two sides ran back to back
    (``stats.duet_pair_log_ratio``: the median round log speed ratio, negated for a time,
    which is lower when faster); for another figure of the pair (latency percentiles: a
    tail is not a median of round ratios), from the two sides' figures."""
    if (metric.name in _ROUND_FIGURES and c.round_seconds and r.round_seconds
            and len(c.round_seconds) == len(r.round_seconds)):
        speed = stats.duet_pair_log_ratio(c.seconds_per_batch, r.seconds_per_batch)
        return speed if metric.higher_is_better else -speed
    return math.log(c.value(metric.name) / r.value(metric.name))


def _is_duet(cell) -> bool:
    pairs = cell.pairs()
    return bool(pairs) and all("duet" in c.meta for c, _ in pairs)


def _ab_inputs(cells: Dict[str, CellRecord], final: set):
    """The judged figures of every cell in A/B mode: duet pairings (resident workers), process
    pairings (other worker kinds) and comparisons (figures with another rule)."""
    pairings, comparisons, duets = {}, {}, {}
    for key, rec in cells.items():
        cell = rec.cell
        screened = cell.workload.device != "gpu"
        for m in cell.metrics():
            if not m.judged:
                continue
            mk = metric_key(key, m.name, cell.workload.mode)
            pairs = [(c, r) for c, r in cell.pairs() if c.value(m.name) is not None and r.value(m.name) is not None]
            if m.rule == "processes" and _is_duet(cell):
                duets[mk] = verdict_duet.DuetPairing(m, [_duet_log_ratio(c, r, m) for c, r in pairs],
                                                     final=key in final,
                                                     rounds=len(pairs[0][0].round_seconds) if pairs else None)
            elif m.rule == "processes":
                states = ["slowed" if "slowed" in (a, b) else (a or b) for a, b in
                          zip(machine_state.states(c for c, _ in pairs), machine_state.states(r for _, r in pairs))]
                pairings[mk] = vd.Pairing(m, [c.value(m.name) for c, _ in pairs], [r.value(m.name) for _, r in pairs],
                                          states, screened=screened, final=key in final)
            else:
                comparisons[mk] = vd.Comparison(m, [c.value(m.name) for c, _ in pairs],
                                                [r.value(m.name) for _, r in pairs], screened=False)
    return pairings, comparisons, duets


def _judge_ab_once(cells: Dict[str, CellRecord], final: set, min_effect: float) -> Dict[str, vd.Verdict]:
    pairings, comparisons, duets = _ab_inputs(cells, final)
    v = vd.judge_ab(pairings, min_effect=min_effect)
    v.update(verdict_duet.judge_duet(duets, min_effect=min_effect))
    for mk, d in duets.items():  # each side's figure (median over its processes), shown beside the ratio
        cell = cells[mk.partition("#")[0]].cell
        v[mk].current_median, v[mk].baseline_median = cell.figure(d.metric.name), cell.reference_figure(d.metric.name)
    v.update(vd.judge_session(comparisons, min_effect=min_effect))
    return v


def pair_seconds(cell: CellMeasurement) -> Optional[float]:
    """What one pair of this cell took so far (the median over its pairs; a duet pair's two
    workers run side by side, so the longer of the two)."""
    walls = [max(c.wall_seconds, r.wall_seconds) for c, r in zip(cell.runs, cell.reference or [])]
    walls = [w for w in walls if w > 0]
    return statistics.median(walls) if walls else None


def second_stage_line(wanted: Dict[str, int], cells: Dict[str, CellRecord]) -> str:
    """Said before the second stage starts: how many pairs it adds and what they will cost,
    from what each cell's first-stage pairs took (the plan could not know which cells would
    be unclear)."""
    from .options import duration_text
    seconds = sum(n * (pair_seconds(cells[k].cell) or 0.0) for k, n in wanted.items())
    short = {k: k.split("/threads=")[0] for k in wanted}
    each = ", ".join(f"{short[k]} +{n}" for k, n in wanted.items())
    return (f"mxperf: second stage: {len(wanted)} unclear cell(s) get {sum(wanted.values())} more pair(s) "
            f"({each}); expected about {duration_text(seconds)} more")


def _judge_ab(session: PerfSession, cells, out: GateOutcome) -> Dict[str, vd.Verdict]:
    options = session.options
    final: set = set()

    def judge():
        return _judge_ab_once(cells, final, options.min_effect)

    # duet cells: the first stage's log ratios of each cell's primary figure, and their spread
    # pooled over the session (a cell's 3 pairs can show far less than the machine's by chance)
    first = {k: [_duet_log_ratio(c, r, rec.cell.primary) for c, r in rec.cell.pairs()]
             for k, rec in cells.items() if _is_duet(rec.cell)}
    spread = verdict_duet.session_spread(first.values())

    def second_stage_pairs(key: str) -> int:
        if key not in first:
            return session.ab_pairs
        # as many more pairs as make the interval at q / cells narrower than the minimum effect
        return verdict_duet.pairs_needed(len(first), first[key], spread=spread,
                                         min_effect=options.min_effect) - len(first[key])

    verdicts = judge()
    if not options.smoke:
        suspects = sorted({k.partition("#")[0] for k, v in verdicts.items() if v.kind == "suspect"})
        wanted = {k: second_stage_pairs(k) for k in suspects if cells[k].remeasure is not None}
        if wanted:
            session.say(second_stage_line(wanted, cells))
        for key in suspects:
            rec = cells[key]
            if rec.remeasure is not None:
                extra = rec.remeasure(wanted[key])
                rec.cell.runs.extend(extra.runs)
                rec.cell.reference.extend(extra.reference or [])
            final.add(key)
        if final:
            out.confirmed = len(final)
            label_machine_states(cells, None)
            verdicts = judge()
        # a cell that became unclear only in the second judgement (BH across cells) gets no
        # third stage: it is unresolved, never left as a silent "suspect"
        late = {k.partition("#")[0] for k, v in verdicts.items() if v.kind == "suspect"} - final
        if late:
            final |= late
            verdicts = judge()
    return verdicts


# ----------------------------------------------------------------------------- the session

def finish_session(session: PerfSession) -> GateOutcome:
    options = session.options
    doc = session.baseline_doc
    machine = session.machine
    out = GateOutcome(messages=[])
    cells = _cells(session)
    if not cells:
        return out
    reference = label_machine_states(cells, None if options.reference else doc)
    if options.reference:
        out.verdicts = _judge_ab(session, cells, out)
    elif doc is None:
        path = session.store.path(machine["id"])
        if options.update_baselines:
            out.messages.append(f"mxperf: no baseline existed for this machine ({machine['id']}); "
                                f"this run records the first one")
        else:
            out.messages.append(
                f"mxperf: no baseline for this machine ({machine['id']}): nothing was compared with a "
                f"previous measurement; record one with --perf-update-baselines (writes {path}), or "
                "compare two MXNet installs with --perf-reference")
            if "no-baseline" in options.fail_on:
                out.failed = True
                out.messages.append("mxperf: failing the session: no baseline (--perf-fail-on no-baseline)")
    else:
        out.verdicts = _judge_baseline(session, cells, doc, reference, out)
    _advise(cells, out)
    profile_lines = _profile(session, cells, out)
    _say_verdicts(out, session, profile_lines)
    if options.update_baselines:
        _record(session, cells, out)
    if options.report_dir:
        out.report_files = write_report(session, out)
        out.messages.append(f"mxperf: report written to {options.report_dir} "
                            f"({', '.join(Path(p).name for p in out.report_files)})")
    return out


def advice_for(cell) -> List:
    """The environment advisor on what the cell's first process ran with (see advisor.py)."""
    from . import advisor, topology
    run = next(iter(cell.ok_runs), None)
    if run is None:
        return []
    m = run.meta
    return advisor.advise(m.get("env") or {}, m.get("env_defaults_applied") or {}, m.get("features"),
                          topology.describe(), cell.workload.contexts, int(m.get("num_gpus") or 0),
                          advisor.openmp_runtime(m.get("threads")))


def _advise(cells: Dict[str, CellRecord], out: GateOutcome) -> None:
    """Advice once per session (which cells it concerns), and on each failing verdict."""
    from . import advisor
    seen: Dict[str, List[str]] = {}
    lines: Dict[str, str] = {}
    for key, rec in cells.items():
        adv = advice_for(rec.cell)
        for a in adv:
            seen.setdefault(a.code, []).append(key)
            lines[a.code] = advisor.format_advice([a])[0]
        failing = [v for k, v in out.verdicts.items() if k.partition("#")[0] == key and v.failed]
        for v in failing:
            v.notes.extend(f"advice: {line}" for line in advisor.format_advice(adv))
    for code, keys in seen.items():
        out.messages.append(f"mxperf: advice ({len(keys)} cell(s)): {lines[code]}")


def _failing_cells(cells: Dict[str, CellRecord], out: GateOutcome) -> Dict[str, str]:
    """Cell key -> why it fails: a failing verdict of any of its figures, or its floor."""
    failing: Dict[str, str] = {}
    for k, v in out.verdicts.items():
        key = k.partition("#")[0]
        if v.failed and key in cells:
            failing.setdefault(key, v.kind if key == k else f"{v.kind} of {k.partition('#')[2]}")
    for key, rec in cells.items():
        if rec.outcome == "failed" and rec.floor is not None and rec.cell.status == "ok":
            failing.setdefault(key, "below its floor")
    return failing


def _recorded_env(runs) -> Optional[Dict[str, str]]:
    return next((dict(r.meta["env"]) for r in runs if isinstance(r.meta.get("env"), dict)), None)


def _profile(session: PerfSession, cells: Dict[str, CellRecord], out: GateOutcome) -> List[str]:
    """Profile the failing cells (every cell with --perf-profile, every recorded cell with
    --perf-update-baselines) in one more, untimed worker each; the lines to show."""
    options = session.options
    failing = _failing_cells(cells, out)
    wanted = [k for k in cells if (k in failing and options.profile_failures) or options.profile
              or options.update_baselines]
    if not wanted:
        return []
    directory = profiles.default_dir(options.report_dir, session.started)
    lines: List[str] = []

    def run(key: str, python, runs, side=""):
        return profiles.run_profile(cells[key].cell.workload, profiles.trace_path(directory, key, side), python=python,
                                    environ=session.environ, recorded_env=_recorded_env(runs),
                                    timeout=options.timeout, memory_limit=options.memory_limit)

    for key in wanted:
        rec = cells[key]
        why = profiles.unprofiled_reason(rec.cell.workload)
        if why:
            if key in failing:
                lines.append(f"mxperf: profile of {key} ({failing[key]}): {why}")
            continue
        current = out.profiles[key] = run(key, options.python, rec.cell.ok_runs)
        if key not in failing:
            lines.append(profiles.brief_line(key, current))
        elif options.reference:
            reference = run(key, options.reference, rec.cell.reference or rec.cell.ok_runs, "reference")
            lines += profiles.failure_lines(key, failing[key], current, reference, side="reference")
        else:
            doc = session.baseline_doc
            base = baselines.baseline_profile(doc, key)
            missing = ("this machine has no baseline" if doc is None else
                       "the baseline has no operator profile for this cell (recorded before profiles were kept: "
                       "re-record with --perf-update-baselines)")
            lines += profiles.failure_lines(key, failing[key], current, base, side="baseline", missing=missing)
    return lines


def _say_verdicts(out: GateOutcome, session: PerfSession, profile_lines: Sequence[str] = ()) -> None:
    options = session.options
    against = (f"reference {options.reference}" if options.reference
               else f"baseline {session.machine.get('id')}")
    for key, v in out.verdicts.items():
        if v.kind in ("regression", "improvement", "suspect", "unresolved", "not-gated"):
            line = f"mxperf: {v.kind.upper()} {key}: {v.reason}"
            if v.env_diff:
                line += "; changed: " + ", ".join(v.env_diff)
            out.messages.append(line)
        for note in v.notes:
            out.messages.append(f"mxperf: note {key}: {note}")
    out.messages.extend(profile_lines)
    if out.confirmed:
        what = "pairs" if options.reference else "processes"
        out.messages.append(f"mxperf: {out.confirmed} unclear cell(s) re-measured with more {what} before judging")
    if out.count("improvement"):
        out.messages.append("mxperf: improvements found; consider --perf-update-baselines")
    regressions, unresolved = out.count("regression"), out.count("unresolved")
    if regressions and "regression" in options.fail_on:
        out.failed = True
        out.messages.append(f"mxperf: failing the session: {regressions} confirmed regression(s) against "
                            f"{against} (minimum effect {100 * options.min_effect:.0f}%, false discovery rate "
                            f"{vd.FDR_Q})")
    if unresolved and "unresolved" in options.fail_on:
        out.failed = True
        busy = sum(v.busy for v in out.verdicts.values() if v.kind == "unresolved")
        out.messages.append(f"mxperf: failing the session: {unresolved} slowdown(s) could not be confirmed or "
                            f"ruled out ({busy} on a busy machine): re-run; --perf-fail-on=-unresolved to "
                            "report them without failing")
        if busy and not options.reference:
            # seen here: a 2-vCPU VM whose slow spells last minutes left every unchanged
            # session's AlexNet cell unresolved against a baseline recorded in one fast spell
            out.messages.append("mxperf: on a machine that switches speed for minutes at a time, record the "
                                "baseline over several sessions (--perf-update-baselines=add) so it spans its "
                                "spells, or gate an upgrade with an A/B run (--perf-reference), which needs no "
                                "baseline")
    if options.smoke and out.count("suspect"):
        out.messages.append("mxperf: --perf-smoke: suspects are not re-measured and do not fail the session")


def _recorded_requirement(python: Optional[str]) -> Optional[str]:
    """``name==version`` of the MXNet distribution installed for the interpreter that
    measured (``--perf-python``, default this one), from its metadata; None when there is
    not exactly one or it cannot be listed."""
    from . import installs
    try:
        return baselines.mxnet_requirement(installs.installed_mxnet_distributions(python))
    except installs.InstallError:
        return None


def _record(session: PerfSession, cells: Dict[str, CellRecord], out: GateOutcome) -> None:
    machine = session.machine
    software = software_facts(r for rec in cells.values() for r in rec.cell.ok_runs)
    kept = profiles.kept_summaries(out.profiles)
    requirement = _recorded_requirement(session.options.python)
    path = session.store.update(machine["id"], [rec.cell for rec in cells.values()], machine=machine,
                                software=software, pool=session.options.baseline_pool, profiles=kept,
                                requirement=requirement)
    out.baseline_path = str(path)
    runs = [r for rec in cells.values() for r in rec.cell.ok_runs]
    slowed = sum((r.meta.get("machine_state") or {}).get("state") == "slowed" for r in runs)
    out.messages.append(f"mxperf: recorded {len(cells)} cell(s) into {path} "
                        f"({session.options.baseline_pool}: "
                        + ("a new comparison set" if session.options.baseline_pool == "replace"
                           else "pooled with the recordings since the last replace") + ")")
    if slowed:
        out.messages.append(f"mxperf: warning: {slowed} of {len(runs)} recorded processes ran on a slowed machine "
                            "(they are labelled and left out of comparisons; re-record on a quiet machine "
                            "for a tighter baseline)")
    few = [k for k, rec in cells.items() if len(rec.cell.ok_runs) < vd.MIN_BASELINE_PROCESSES]
    if few:
        out.messages.append(f"mxperf: {len(few)} cell(s) recorded with fewer than {vd.MIN_BASELINE_PROCESSES} "
                            "processes will be shown, not gated: " + ", ".join(few[:5])
                            + (" ..." if len(few) > 5 else ""))
    out.messages += _resolution_lines(session, list(cells), requirement)


def _resolution_lines(session: PerfSession, keys: Sequence[str], requirement: Optional[str]) -> List[str]:
    """What the recording says about this machine's resolution, and the install it measured."""
    try:
        doc = session.store.load(session.machine["id"])
    except baselines.BaselineError:
        return []
    summ = baselines.resolution_summary(doc, keys)
    lines = []
    if summ["cells"]:
        spread = (f"median {100 * summ['median']:.1f}%, largest {100 * summ['largest']:.1f}% "
                  f"({summ['largest_key']})")
        if summ["provisional"] == summ["cells"]:
            lines.append(f"mxperf: resolution provisional: {spread}, from the spread of each cell's processes in "
                         "this one session; how far this machine drifts between sessions is unknown: record "
                         "again later, at another time of day, with --perf-update-baselines=add to measure it")
        else:
            lines.append(f"mxperf: resolution (the smallest slowdown a later session can tell from this machine's "
                         f"drift between sessions): {spread}, from up to {summ['sessions']} pooled sessions"
                         + (f"; provisional for {summ['provisional']} cell(s) recorded in one session"
                            if summ["provisional"] else "")
                         + "; a smaller slowdown is reported below the resolution: gate it with an A/B run")
    if requirement:
        lines.append(f"mxperf: recorded with {requirement} (--perf-reference baseline runs an A/B against it)")
    return lines


def provisional_verdicts(session: PerfSession) -> Dict[str, vd.Verdict]:
    """The verdicts of the cells measured so far, judged as they stand: no re-measuring, no
    profiles (a suspect stays a suspect). A/B: against the reference's pairs; baseline mode:
    against the baseline; none without either."""
    cells = _cells(session)
    options = session.options
    if options.reference:
        return _judge_ab_once(cells, set(), options.min_effect)
    doc = session.baseline_doc
    if doc is None or not cells:
        return {}
    reference = label_machine_states(cells, doc)
    return vd.judge_session(_comparisons(cells, doc, reference, set()), min_effect=options.min_effect)


def write_progress(session: PerfSession) -> None:
    """results.json and summary.md with every cell so far and its provisional verdict,
    written atomically after each cell (``--perf-report``): a job that is killed or runs out
    of time keeps what it finished. Never fails a measurement: a problem is one line on
    stderr and the final report is written at the end as usual."""
    if not session.options.report_dir:
        return
    try:
        write_report(session, GateOutcome(messages=[], verdicts=provisional_verdicts(session)), final=False)
    except Exception as exc:  # noqa: BLE001 - the measurement matters more than its interim report
        import sys
        print(f"mxperf: could not write the interim report: {type(exc).__name__}: {exc}", file=sys.stderr)


def write_report(session: PerfSession, out: GateOutcome, final: bool = True) -> List[str]:
    """results.json and summary.md (and, when ``final``, the plots) into --perf-report DIR."""
    from . import plots, results
    from .jsonio import atomic_write_text
    out_dir = Path(session.options.report_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = [r.to_dict(out.verdicts) for r in session.records]
    meta = {"software": software_facts(r for rec in session.records for r in rec.cell.ok_runs),
            "complete": final, "not_reached": list(session.not_reached),
            "started": session.started, "options": _options_dict(session.options),
            "findings": [dataclasses.asdict(f) for f in session.findings],
            "verdicts": {k: v.to_dict() for k, v in out.verdicts.items()},
            # what the summary says first: slowdowns the baseline could not decide, and why
            "headline": [m.removeprefix("mxperf: ") for m in out.headline]}
    if out.profiles:
        meta["profiles"] = out.profiles  # per cell key: operators, trace_path, batches, meta
    if session.options.reference:
        meta["ab"] = sides = ab_sides(session)
        for r in records:
            entry = ab_record(out.verdicts.get(r["key"]), sides)
            if entry:
                r["ab"] = entry
    doc = {"machine": session.machine, "session": meta, "records": records}
    session.on_results(doc)  # the plugin's hook: pytest_mxperf_update_results
    files = [str(results.dump_results(out_dir / "results.json", doc["records"], doc["machine"], doc["session"]))]
    summary = out_dir / "summary.md"
    atomic_write_text(summary, "\n".join(results.markdown_summary(doc, final=final)) + "\n")
    files.append(str(summary))
    if final:
        files += [str(p) for p in plots.plot_throughput(records, session.baseline_doc, out_dir)]
    return files


def ab_sides(session: PerfSession) -> Dict[str, Any]:
    """Both interpreters of an A/B session: MXNet version and build features."""
    out = {}
    for side, py in (("candidate", session.options.python), ("reference", session.options.reference)):
        p = session.probe_mxnet(py)
        out[side] = {"python": py or "(this interpreter)", "mxnet_version": p.get("mxnet_version"),
                     "features": p.get("features"), "status": p.get("status"), "message": p.get("message")}
    if session.reference_requirement:  # --perf-reference baseline
        out["reference"]["recorded_baseline_requirement"] = session.reference_requirement
    return out


def _options_dict(options) -> Dict[str, Any]:
    d = dataclasses.asdict(options)
    return json.loads(json.dumps(d, default=lambda x: sorted(x) if isinstance(x, frozenset) else str(x)))


def ab_record(verdict: Optional[vd.Verdict], sides: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The ``ab`` entry of a results record: ratio, interval, verdict, both sides."""
    if verdict is None or verdict.interval is None:
        return None
    return {"ratio": 1.0 + (verdict.change or 0.0), "low": verdict.interval[0], "high": verdict.interval[1],
            "verdict": verdict.kind, "pairs": verdict.n_current, **sides}
