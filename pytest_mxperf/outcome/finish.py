"""The end of a session: label the machine's state, judge every figure, confirm, decide.

Plain logic over a PerfSession; the plugin calls ``finish_session`` once every test ran.
Steps 1-3 are ``judging.py``'s.

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
   under ``mx.profiler`` (``measure/profiling.py``, ``workers/profile.py``): its top operators are
   shown beside the baseline's profile, or in A/B mode beside the reference interpreter's.
   ``--perf-profile`` profiles every cell; recording a baseline keeps each cell's profile.
5. The failure policy (``options.fail_on``) decides the exit status; the baseline is
   recorded when asked; the report files are written.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from pytest_mxperf.judge import thresholds
from pytest_mxperf.judge import verdict as vd
from pytest_mxperf.measure import profiling as profiles
from pytest_mxperf.measure.session import CellRecord, PerfSession
from pytest_mxperf.model.measurement import cell_of
from pytest_mxperf.outcome.ab_judging import judge_ab
from pytest_mxperf.outcome.answer_check import NOT_COMPARED as NOT_COMPARED_ANSWERS
from pytest_mxperf.outcome.answer_check import SAME as SAME_ANSWERS
from pytest_mxperf.outcome.answer_check import WRONG, answer_verdicts
from pytest_mxperf.outcome.judging import (
    GateOutcome,
    Judged,
    judge_baseline,
    label_machine_states,
    software_facts,
)
from pytest_mxperf.outcome.session_files import (
    ab_sides,
    record_history,
    results_document,
    write_report,
)
from pytest_mxperf.store import baseline_store, kept_profiles
from pytest_mxperf.store.baselines import BaselineError

# ----------------------------------------------------------------------------- the session

#: how a session ends for pytest's exit status
EXIT_OK, EXIT_FAILED, EXIT_INTERNAL_ERROR = "ok", "failed", "internal-error"


def end_session(session: PerfSession) -> str:
    """The end of a session, in one call from the plugin: the deadline and "nothing
    measured" policies, then ``finish_session``. Its messages and outcome are kept on the
    session (``PerfSession.ended``); returns EXIT_OK, EXIT_FAILED or EXIT_INTERNAL_ERROR."""
    options = session.options
    msgs: List[str] = []
    status = EXIT_OK
    if session.not_reached:
        msgs.append(f"mxperf: {len(session.not_reached)} measuring test(s) not reached before --perf-deadline "
                    f"({options.deadline:g} s): {', '.join(session.not_reached[:5])}"
                    + (" ..." if len(session.not_reached) > 5 else ""))
        if "not-reached" in options.fail_on:
            msgs.append("mxperf: failing the session: tests not reached (--perf-fail-on=-not-reached to allow)")
            status = EXIT_FAILED
    if session.no_gpu_reason and session.no_gpu_fails:
        # said once when collection ended (plugin.pytest_collection_finish), before any worker
        status = EXIT_FAILED
    measured = [r for r in session.records if r.cell.status == "ok"]
    skipped = set(session.skipped_reasons) - {session.no_gpu_reason}
    if not measured and (session.records or skipped):
        reasons = sorted(skipped) or ["every cell failed to measure"]
        msgs.append(f"mxperf: nothing was measured ({'; '.join(reasons)})")
        if "none-measured" in options.fail_on:
            msgs.append("mxperf: failing the session: nothing was measured (--perf-fail-on none-measured)")
            status = EXIT_FAILED
    outcome = None
    if session.records:
        try:
            outcome = finish_session(session)
        except Exception as exc:  # a broken baseline or report must not hide the measurements
            msgs.append(f"mxperf: could not finish the session: {type(exc).__name__}: {exc}")
            status = EXIT_INTERNAL_ERROR
        else:
            msgs.extend(outcome.messages)
            if outcome.failed:
                status = EXIT_FAILED
    session.ended(msgs, outcome)
    return status


def finish_session(session: PerfSession) -> GateOutcome:
    """The end of a session as one pipeline, each stage taking the previous one's output:
    measured cells -> judged (suspects measured again on the way) -> what it means (advice,
    profiles of failing cells, the failure policy) -> recorded -> written (results.json,
    summary.md, plots, history)."""
    options = session.options
    sides = ab_sides(session) if options.reference else {}
    if not session.measured_cells():
        return GateOutcome(messages=[], sides=sides)
    # measured -> judged (speed, then answers)
    judged, said = _judged(session)
    cells = session.measured_cells()  # as judged: with the processes that confirmed suspects
    judged = dataclasses.replace(judged, verdicts={
        **judged.verdicts, **answer_verdicts(cells, session.baseline, bool(options.reference))})
    # judged -> what it means
    advice_lines, advice_notes = advise(cells, judged.verdicts)
    verdicts = {k: (dataclasses.replace(v, notes=list(v.notes) + advice_notes[k]) if advice_notes.get(k) else v)
                for k, v in judged.verdicts.items()}
    profiles, profile_lines, profile_briefs = _profile(session, cells, verdicts)
    verdict_lines, failed = verdict_messages(options, session.machine, verdicts, judged.confirmed)
    # cells whose two pools did not fit on one GPU: their A/B pairs ran as process pairs
    fallbacks = list(session.duet_fallbacks.values())
    messages = list(judged.headline) + said + fallbacks + advice_lines + verdict_lines
    # -> recorded
    baseline_path = None
    if options.update_baselines:
        baseline_path, lines = _record(session, cells, profiles)
        messages += lines
    out = GateOutcome(messages=messages, verdicts=verdicts, failed=judged.failed or failed,
                      confirmed=judged.confirmed, baseline_path=baseline_path, profiles=profiles,
                      headline=list(judged.headline), sides=sides, profile_lines=profile_lines,
                      details=verdict_details(verdicts) + profile_briefs)
    # -> written
    doc = results_document(session, out) if (options.report_dir or options.history) else None
    if options.report_dir:
        files = write_report(session, out, doc=doc)
        out = dataclasses.replace(out, report_files=files, messages=out.messages + [
            f"mxperf: report written to {options.report_dir} ({', '.join(Path(p).name for p in files)})"])
    if options.history and not options.smoke:
        said, kept = record_history(options.history, doc)
        out = dataclasses.replace(out, messages=out.messages + said, details=out.details + kept)
    return out


def _judged(session: PerfSession) -> Tuple[Judged, List[str]]:
    """The judging stage for the session's mode, and what it says when there is nothing to
    judge against (no baseline for this machine)."""
    options, baseline, machine = session.options, session.baseline, session.machine
    if options.reference:
        return judge_ab(session), []
    if baseline is not None:
        return judge_baseline(session, baseline), []
    label_machine_states(session.measured_cells(), None)  # the report shows each process's state
    path = session.store.path(machine["id"])
    if options.update_baselines:
        return Judged({}), [f"mxperf: no baseline existed for this machine ({machine['id']}); "
                            f"this run records the first one"]
    said = [f"mxperf: no baseline for this machine ({machine['id']}): nothing was compared with a "
            f"previous measurement; record one with --perf-update-baselines (writes {path}), or "
            "compare two MXNet installs with --perf-reference"]
    fails = "no-baseline" in options.fail_on
    if fails:
        said.append("mxperf: failing the session: no baseline (--perf-fail-on no-baseline)")
    return Judged({}, failed=fails), said


def advice_for(cell, topology_facts: Optional[Dict[str, Any]] = None) -> List:
    """The environment advisor on what the cell's first process ran with (see advisor.py);
    ``topology_facts``: ``topology.describe()`` when the caller has read it already."""
    from pytest_mxperf.machine import advisor, topology
    run = next(iter(cell.ok_runs), None)
    if run is None:
        return []
    m = run.meta
    return advisor.advise(m.get("env") or {}, m.get("env_defaults_applied") or {}, m.get("features"),
                          topology_facts if topology_facts is not None else topology.describe(),
                          cell.workload.contexts, int(m.get("num_gpus") or 0), advisor.openmp_runtime(m.get("threads")))


#: the start of a failing verdict's advice note: said on the screen once for the session
#: (``advise``'s line), on each failing figure in the full report and results.json
ADVICE = "advice: "


def advise(cells: Dict[str, CellRecord], verdicts: Dict[str, vd.Verdict]) -> Tuple[List[str], Dict[str, List[str]]]:
    """Advice once per session (which cells it concerns), and on each failing verdict: the
    session's lines, and per failing figure the notes to add to its verdict."""
    from pytest_mxperf.machine import advisor, topology
    seen: Dict[str, List[str]] = {}
    lines: Dict[str, str] = {}
    notes: Dict[str, List[str]] = {}
    topology_facts = topology.describe()  # the machine's, read once for the session's cells
    for key, rec in cells.items():
        adv = advice_for(rec.cell, topology_facts)
        for a in adv:
            seen.setdefault(a.code, []).append(key)
            lines[a.code] = advisor.format_advice([a])[0]
        for k, v in verdicts.items():
            if cell_of(k) == key and v.failed:
                notes[k] = [ADVICE + line for line in advisor.format_advice(adv)]
    failing = {cell_of(k) for k in notes}

    def which(keys):
        n = len(failing.intersection(keys))
        return f"{len(keys)} cell(s)" + (f", {n} of them failing" if n else "")
    return [f"mxperf: advice ({which(keys)}): {lines[code]}" for code, keys in seen.items()], notes


def _failing_cells(cells: Dict[str, CellRecord], verdicts: Dict[str, vd.Verdict]) -> Dict[str, str]:
    """Cell key -> why it fails: a failing verdict of any of its figures, or its floor."""
    failing: Dict[str, str] = {}
    for k, v in verdicts.items():
        key = cell_of(k)
        if v.failed and key in cells:
            failing.setdefault(key, v.kind if key == k else f"{v.kind} of {k.partition('#')[2]}")
    for key, rec in cells.items():
        if rec.outcome == "failed" and rec.floor is not None and rec.cell.status == "ok":
            failing.setdefault(key, "below its floor")
    return failing


def _recorded_env(runs) -> Optional[Dict[str, str]]:
    return next((r.env for r in runs if r.env is not None), None)


def _profile(session: PerfSession, cells: Dict[str, CellRecord], verdicts: Dict[str, vd.Verdict]
             ) -> Tuple[Dict[str, Dict[str, Any]], List[str], List[str]]:
    """Profile the failing cells (every cell with --perf-profile, every recorded cell with
    --perf-update-baselines) in one more, untimed worker each: the profiles by cell key, the
    lines to show (failing cells), and one line for each other cell (the full report's)."""
    options = session.options
    failing = _failing_cells(cells, verdicts)
    wanted = [k for k in cells if k in failing or options.profile or options.update_baselines]
    if not wanted:
        return {}, [], []
    directory = profiles.trace_dir(options.report_dir, session.started)
    lines: List[str] = []
    briefs: List[str] = []
    kept: Dict[str, Dict[str, Any]] = {}

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
        current = kept[key] = run(key, options.python, rec.cell.ok_runs)
        if key not in failing:
            briefs.append(profiles.brief_line(key, current))
        elif options.reference:
            reference = run(key, options.reference, rec.cell.reference or rec.cell.ok_runs, "reference")
            lines += profiles.failure_lines(key, failing[key], current, reference, side="reference")
        else:
            baseline = session.baseline
            base = baseline.profile(key) if baseline is not None else None
            missing = ("this machine has no baseline" if baseline is None else
                       "the baseline has no operator profile for this cell (recorded before profiles were kept: "
                       "re-record with --perf-update-baselines)")
            lines += profiles.failure_lines(key, failing[key], current, base, side="baseline", missing=missing)
    return kept, lines, briefs


#: verdict kinds the terminal says one line each of, with their notes (the others are counted
#: in the session's first line; the slowdowns the baseline cannot decide are its headline)
SAID = ("regression", "improvement", "suspect", "unresolved", WRONG)


def _verdict_line(key: str, v: vd.Verdict) -> str:
    line = f"mxperf: {v.kind.upper()} {key}: {v.reason}"
    return line + ("; changed: " + ", ".join(v.env_diff) if v.env_diff else "")


def verdict_details(verdicts: Dict[str, vd.Verdict]) -> List[str]:
    """What the full report says of the verdicts the terminal does not: each figure not gated
    (the baseline holds too few processes of it), the notes on figures not said there, and
    each failing figure's advice (the terminal says each piece of advice once)."""
    lines: List[str] = []
    for key, v in verdicts.items():
        if v.kind in ("not-gated", SAME_ANSWERS, NOT_COMPARED_ANSWERS):
            lines.append(_verdict_line(key, v))
        lines += [f"mxperf: note {key}: {note}" for note in v.notes
                  if v.kind not in SAID or note.startswith(ADVICE)]
    return lines


def verdict_messages(options, machine: Dict[str, Any], verdicts: Dict[str, vd.Verdict], confirmed: int,
                     profile_lines: Sequence[str] = ()) -> Tuple[List[str], bool]:
    """What the verdicts say (each change, its notes, the profiles), then the failure
    policy's lines: the lines, and whether the session fails on its verdicts."""
    messages: List[str] = []
    failed = False
    against = (f"reference {options.reference}" if options.reference
               else f"baseline {machine.get('id')}")
    for key, v in verdicts.items():
        if v.kind in SAID:
            messages.append(_verdict_line(key, v))
            messages += [f"mxperf: note {key}: {note}" for note in v.notes if not note.startswith(ADVICE)]
    messages.extend(profile_lines)
    if confirmed:
        what = "pairs" if options.reference else "processes"
        messages.append(f"mxperf: {confirmed} unclear cell(s) re-measured with more {what} before judging")

    def count(kind: str) -> int:
        return sum(v.kind == kind for v in verdicts.values())
    if count("improvement"):
        messages.append("mxperf: improvements found; consider --perf-update-baselines")
    regressions, unresolved = count("regression"), count("unresolved")
    if regressions and "regression" in options.fail_on:
        failed = True
        messages.append(f"mxperf: failing the session: {regressions} confirmed regression(s) against "
                        f"{against} (minimum effect {100 * options.min_effect:.0f}%, false discovery rate "
                        f"{thresholds.FDR_Q})")
    if unresolved and "unresolved" in options.fail_on:
        failed = True
        busy = sum(v.busy for v in verdicts.values() if v.kind == "unresolved")
        messages.append(f"mxperf: failing the session: {unresolved} slowdown(s) could not be confirmed or "
                        f"ruled out ({busy} on a busy machine): re-run; --perf-fail-on=-unresolved to "
                        "report them without failing")
        if busy and not options.reference:
            # seen here: a 2-vCPU VM whose slow spells last minutes left every unchanged
            # session's AlexNet cell unresolved against a baseline recorded in one fast spell
            messages.append("mxperf: on a machine that switches speed for minutes at a time, record the "
                            "baseline over several sessions (--perf-update-baselines=add) so it spans its "
                            "spells, or gate an upgrade with an A/B run (--perf-reference), which needs no "
                            "baseline")
    wrong = count(WRONG)
    if wrong and "answers" in options.fail_on:
        failed = True
        messages.append(f"mxperf: failing the session: {wrong} cell(s) computed something else than {against} "
                        "(--perf-fail-on=-answers to report them without failing)")
    if options.smoke and count("suspect"):
        messages.append("mxperf: --perf-smoke: suspects are not re-measured and do not fail the session")
    return messages, failed


def _recorded_requirement(python: Optional[str]) -> Optional[str]:
    """``name==version`` of the MXNet distribution installed for the interpreter that
    measured (``--perf-python``, default this one), from its metadata; None when there is
    not exactly one or it cannot be listed."""
    from pytest_mxperf.proc import distributions
    try:
        return baseline_store.mxnet_requirement(distributions.installed_mxnet_distributions(python))
    except distributions.InstallError:
        return None


def _record(session: PerfSession, cells: Dict[str, CellRecord], profiled: Dict[str, Dict[str, Any]]
            ) -> Tuple[str, List[str]]:
    """Record the cells into this machine's baseline: its path, and the lines to say."""
    machine = session.machine
    software = software_facts(r for rec in cells.values() for r in rec.cell.ok_runs)
    kept = kept_profiles.kept_summaries(profiled)
    messages: List[str] = []
    requirement = _recorded_requirement(session.options.python)
    path = session.store.update(machine["id"], [rec.cell for rec in cells.values()], machine=machine,
                                software=software, pool=session.options.baseline_pool, profiles=kept,
                                requirement=requirement)
    runs = [r for rec in cells.values() for r in rec.cell.ok_runs]
    slowed = sum(r.state == "slowed" for r in runs)
    messages.append(f"mxperf: recorded {len(cells)} cell(s) into {path} "
                    f"({session.options.baseline_pool}: "
                    + ("a new comparison set" if session.options.baseline_pool == "replace"
                       else "pooled with the recordings since the last replace") + ")")
    if slowed:
        messages.append(f"mxperf: warning: {slowed} of {len(runs)} recorded processes ran on a slowed machine "
                        "(they are labelled and left out of comparisons; re-record on a quiet machine "
                        "for a tighter baseline)")
    few = [k for k, rec in cells.items() if len(rec.cell.ok_runs) < thresholds.MIN_BASELINE_PROCESSES]
    if few:
        messages.append(f"mxperf: {len(few)} cell(s) recorded with fewer than {thresholds.MIN_BASELINE_PROCESSES} "
                        "processes will be shown, not gated: " + ", ".join(few[:5])
                        + (" ..." if len(few) > 5 else ""))
    messages += _resolution_lines(session, list(cells), requirement)
    return str(path), messages


def _resolution_lines(session: PerfSession, keys: Sequence[str], requirement: Optional[str]) -> List[str]:
    """What the recording says about this machine's resolution, and the install it measured."""
    try:
        baseline = session.store.load(session.machine["id"])
    except BaselineError:
        return []
    summ = baseline.resolution_summary(keys) if baseline is not None else {"cells": 0}
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


