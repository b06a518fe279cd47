"""Human-readable session report: one row per judged figure (with its unit), then findings
and the gate's messages. Plain functions over the session and the gate's outcome."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from pytest_mxperf.judge import answers as answers_rule
from pytest_mxperf.measure.session import CellRecord, Finding
from pytest_mxperf.model.measurement import METRICS, metric_key
from pytest_mxperf.model.options import duration_text

#: seconds a worker process costs besides its timed part (interpreter, import mxnet, bind,
#: warm-up, the machine probe around it); used only for the duration estimate printed first.
#: Measured here: an A/B session of 2 ResNet-50 v2 cells (1.8.0.post0 vs 1.9.1, 72 processes
#: at the default 1.5 s budget) took 533 s, 7.4 s a process.
PROCESS_OVERHEAD_S = 4.0
PROBE_OVERHEAD_S = 2.0
# a duet pair: two workers importing MXNet, binding and warming up at once, then finishing
# (measured: 7-8 s for ResNet-50 v2 b2 here), and its rounds, sized to at least half of
# duet.ROUND_SECONDS and rounded up to whole batches (measured: 0.2 s for a 0.15-s target)
DUET_STARTUP_S = 7.5
DUET_ROUND_S = 0.2
#: duet pairs a second stage typically adds to a cell: the median over the cells of a real
#: session with oneDNN fusion off on the candidate (AMD EPYC, 2 vCPUs, 2026-11-23: 0 to 9, median 5)
SECOND_STAGE_PAIRS = 5


def _fmt(x: Optional[float], digits: int = 2) -> str:
    if x is None:
        return "-"
    if abs(x) >= 1000 or digits == 0:
        return f"{x:.0f}"
    if abs(x) < 0.1 and x != 0:
        return f"{x:.4f}"
    return f"{x:.{digits}f}"


def _spread(rec: CellRecord) -> str:
    sp = rec.cell.spread
    if not sp or sp.get("rel") is None:
        return "-"
    mark = "p" if sp["basis"] == "processes" else "r"
    return f"±{100 * sp['rel'] / 2:.1f}%{mark}{sp['n']}"


def _floor_cols(rec: CellRecord):
    f = rec.floor
    if f is None:
        return "-", "-", "-"
    doc = "OOM" if f.oom_documented else _fmt(f.documented)
    kind = {"documented": "documented", "legacy-sanity": "legacy"}.get(f.kind, "none")
    return doc, kind, _fmt(f.value)


#: characters of a failed cell's reason its row shows (the whole line is in the test's failure
#: and in results.json)
REASON_WIDTH = 80


def reason(message: str, width: int = REASON_WIDTH) -> str:
    """The first line of a failed cell's message, cut to ``width`` characters with an ellipsis."""
    lines = [ln.strip() for ln in (message or "").splitlines() if ln.strip()]
    line = " ".join(lines[0].split()) if lines else ""
    return line if len(line) <= width else line[:width - 1].rstrip() + "…"


def cell_label(rec: CellRecord) -> str:
    w = rec.cell.workload
    ctx = ",".join(w.contexts)
    extra = f" t={w.threads}" if w.threads != "auto" else ""
    extra += f" {w.dtype}" if w.dtype != "float32" else ""
    if w.mode == "train":
        extra += f" {w.optimizer}"
    if w.kvstore:
        extra += f" kv={w.kvstore}"
    return f"{w.mode} {w.model} b{w.batch_size} {ctx}{extra}"


def _test_word(rec: CellRecord) -> str:
    """What a cell's row says of its test before any verdict: the floor's outcome, but
    ``measured`` for a cell measured where no published floor applies (a training cell on a
    CPU): its test skips the floor, the cell was measured, as the first line counts it."""
    if rec.outcome == "skipped" and rec.cell.status == "ok" and rec.floor is not None and rec.floor.kind is None:
        return "measured"
    return rec.outcome


def cell_rows(records: Sequence[CellRecord], verdicts: Dict[str, Any]) -> List[List[str]]:
    rows = []
    for rec in records:
        cell = rec.cell
        key = cell.workload.key()
        doc, kind, floor = _floor_cols(rec)
        metrics = [m for m in cell.metrics() if m.judged] or [cell.primary]
        for i, m in enumerate(metrics):
            v = verdicts.get(metric_key(key, m.name, cell.workload.mode))
            vd = v.to_dict() if hasattr(v, "to_dict") else (v or {})
            if vd.get("interval"):
                lo, hi = vd["interval"]
                base = f"ref x{1 + vd['change']:.3f} [{lo:.3f},{hi:.3f}]"
            else:
                base = _fmt(vd.get("baseline_median"))
            change = f"{vd['change_pct']:+.1f}%" if vd.get("change_pct") is not None else "-"
            status = cell.status if cell.status != "ok" else _test_word(rec)
            label = cell_label(rec) if i == 0 else "  " + METRICS[m.name].label
            first = i == 0
            result = " / ".join(x for x in ((status if first else ""), vd.get("kind") or "") if x)
            why = reason(cell.message) if first and cell.status != "ok" else ""
            failed = [r for r in cell.runs if not r.ok]
            if first and cell.status == "ok" and failed:
                # a merged cell some of whose tests did not measure (another test's attempt):
                # its row says so and why
                result += f"; {len(failed)} of {len(cell.runs)} process(es) {failed[0].status}"
                why = reason(failed[0].message)
            rows.append([label, m.unit, _fmt(cell.figure(m.name)) if cell.ok_runs else "-",
                         _spread(rec) if first else "-", base, change,
                         doc if first else "", kind if first else "", floor if first else "",
                         f"{result}: {why}" if why else result])
    return rows


HEADER = ["cell", "unit", "median", "spread", "baseline", "change", "documented", "floor kind", "floor", "result"]


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(header)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    return lines


def duet_pair_seconds(options) -> float:
    """What one duet pair costs: both workers start and warm up together (two processes on
    the machine's cores), then the settling and timed rounds of both sides, one at a time."""
    from pytest_mxperf.measure import duet
    rounds = 1 if options.smoke else duet.rounds_for(options.time_budget)
    return DUET_STARTUP_S + 2 * (rounds + duet.SETTLE_ROUNDS + 1) * DUET_ROUND_S


def planned_test_seconds(options, duet_pairs: int = 3, ab_pairs: int = 8, duet: bool = True) -> float:
    """The plan's estimate of one measuring test (one cell); in A/B mode a duet cell's or,
    with ``duet=False``, a cell of process pairs."""
    per_process = options.time_budget + PROCESS_OVERHEAD_S + (PROBE_OVERHEAD_S if options.machine_probe else 0.0)
    if options.reference:
        return duet_pairs * duet_pair_seconds(options) if duet else 2 * ab_pairs * per_process
    return options.processes * per_process


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def plan_line(tests: int, options, ab_pairs: int, duet_pairs: int = 3, duet_tests: Optional[int] = None,
              plan=None, deselected_slow: int = 0) -> str:
    """The expected duration, said before anything is measured. ``duet_tests``: how many of
    the tests are duet cells in A/B mode (default: all); ``plan``: baseline mode's
    ``planning.estimate`` (which cells share worker processes, which tests have their own)."""
    duet_tests = tests if duet_tests is None else duet_tests
    seconds = (duet_tests * planned_test_seconds(options, duet_pairs, ab_pairs)
               + (tests - duet_tests) * planned_test_seconds(options, duet_pairs, ab_pairs, duet=False))
    cut = ""
    if options.deadline is not None and seconds > options.deadline:
        cut = f"; --perf-deadline {duration_text(options.deadline)} will leave some not reached"
    if options.reference:
        most = seconds + duet_tests * SECOND_STAGE_PAIRS * duet_pair_seconds(options)
        return (f"mxperf: A/B mode: {tests} cell(s) x {duet_pairs} duet pairs (resident candidate and reference "
                f"workers taking turns at timed rounds: score, train, latency, io, kvstore, your own network; "
                f"distributed and time-to-accuracy cells run {ab_pairs} process pairs); expected about "
                f"{duration_text(seconds)} when no cell needs a second stage, about {duration_text(most)} when "
                f"every cell does (a real slowdown always does){cut}")
    if plan is not None:
        parts = []
        if plan.shared_cells:
            parts.append(f"{plan.shared_cells} cell(s) in worker processes of several cells (a test's grid in each "
                         f"process, about {_minutes(plan.shared_seconds)})")
        if plan.fresh_tests:
            parts.append(f"{plan.fresh_tests} test(s) with fresh processes of their own "
                         f"({', '.join(plan.fresh_kinds)}: about {_minutes(plan.fresh_seconds)})")
        slow = f"; {deselected_slow} slow test(s) deselected (--perf-slow runs them)" if deselected_slow else ""
        return (f"mxperf: {tests} measuring test(s), {options.processes} process(es) a cell: {'; '.join(parts)}; "
                f"expected about {_minutes(plan.seconds)}, more if suspects are confirmed{cut}{slow}")
    return (f"mxperf: {tests} measuring test(s) x {options.processes} process(es): expected at least "
            f"{duration_text(seconds)} (tests that measure several cells, heavy models and re-measured suspects take "
            f"longer){cut}")


def summary_lines(records: Sequence[CellRecord], findings: Sequence[Finding], context: Dict[str, Any],
                  verdicts: Optional[Dict[str, Any]] = None) -> List[str]:
    lines: List[str] = []
    hw = context.get("hardware") or {}
    lines.append(f"machine: {hw.get('cpu_model', '?')}, {hw.get('logical_cpus', '?')} logical CPUs, "
                 f"{hw.get('physical_cores', '?')} physical cores; GPUs: {', '.join(hw.get('gpus') or []) or 'none'}")
    if context.get("machine_id"):
        lines.append(f"machine id: {context['machine_id']}; baseline: {context.get('baseline') or 'none'}")
    for line in context.get("sides") or []:
        lines.append(line)
    if context.get("software"):
        lines.append(f"software: {context['software']}")
    if context.get("env"):
        lines.append(f"worker env: {context['env']}")
    lines.extend(context.get("headline") or [])  # what the baseline could not decide, before the table
    if records:
        lines.append("spread: half the interquartile range of per-process figures (p<n>) or, with one "
                     "process, of per-round samples (r<n>)")
        lines.extend(format_table(HEADER, cell_rows(records, verdicts or {})))
        kinds = {rec.floor.kind for rec in records if rec.floor is not None}
        rules = dict.fromkeys((rec.floor.kind, rec.floor.rule) for rec in records
                              if rec.floor is not None and rec.floor.kind and getattr(rec.floor, "rule", ""))
        for kind, rule in rules:
            lines.append(f"floor rule ({kind}): {rule}")
        if "legacy-sanity" in kinds:
            lines.append("note: legacy-sanity floors hold this machine to 2016 hardware of the same size; "
                         "they catch catastrophes, not regressions (that is the baseline's job).")
    lines.extend(utilisation_lines(records))
    for f in findings:
        figs = ", ".join(f"{k}={_fmt(v, 3) if isinstance(v, float) else v}" for k, v in f.figures.items())
        lines.append(f"shown, not judged [{f.name}] {figs}" + (f" -- {f.note}" if f.note else ""))
    for msg in context.get("messages", []):
        lines.append(msg)
    return lines


def utilisation_lines(records: Sequence[CellRecord]) -> List[str]:
    """Per cell, what its processes' utilisation (sampled from the parent, over the timed
    rounds the workers mark) says: every GPU cell's GPU utilisation, and any cell whose
    utilisation stands out (``utilisation.labels``)."""
    from pytest_mxperf.machine import utilisation
    lines = []
    for rec in records:
        runs = [r for r in rec.cell.ok_runs if r.utilisation]
        if not runs:
            continue
        # the process in the middle by CPUs busy (over its timed rounds when they tell) speaks
        # for the cell (one line, not one per process)
        runs.sort(key=lambda r: utilisation.cpus_busy(r.utilisation) or 0.0)
        mid = runs[len(runs) // 2]
        said = utilisation.labels(mid.utilisation, mid.openmp_threads)
        if rec.cell.workload.device == "gpu" or said:
            desc = utilisation.describe(mid.utilisation) or ""
            lines.append(f"utilisation {cell_label(rec)} (median of {len(runs)} processes): {desc}"
                         + (f"; {'; '.join(said)}" if said else ""))
    return lines


def _context(session, outcome) -> Dict[str, Any]:
    """What the full report says of the machine, the software and the environment."""
    from pytest_mxperf.machine import hardware
    software, env = "", {}
    for r in session.cells().values():
        for run in r.cell.runs:
            if run.mxnet_version and not software:
                software = (f"mxnet {run.meta['mxnet_version']}, python {run.meta.get('python')}, "
                            f"OpenMP threads {(run.meta.get('threads') or {}).get('openmp')}")
            env = run.env or env
    baseline = session.baseline
    sides = []
    if session.options.reference and outcome:
        for side, facts in outcome.sides.items():
            recorded = facts.get("recorded_baseline_requirement")
            sides.append(f"{side}: mxnet {facts.get('mxnet_version')} ({facts.get('python')}"
                         + (f"; {recorded}, the install this machine's baseline was recorded with" if recorded else "")
                         + f"); features: {','.join(facts.get('features') or []) or '?'}")
    return {"hardware": hardware.summary(), "software": software, "machine_id": session.machine.get("id"),
            "baseline": (f"{session.store.path(session.machine['id'])} ({len(baseline.keys())} cells)"
                         if baseline is not None else None),
            "sides": sides,
            "env": ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "(none recorded)"}


def full_lines(session, outcome) -> List[str]:
    """The full report: the machine, software and environment, every figure of every cell
    (memory and the other judged figures in rows of their own, floors), utilisation, the
    figures shown, not judged, and what the end of the session said beside its verdicts
    (``GateOutcome.details``). ``--perf-report DIR`` writes it to DIR/report.txt; ``-v``
    shows it after the session's screen."""
    cells = list(session.cells().values())  # each cell once, with each of its processes once
    lines = summary_lines(cells, session.findings, _context(session, outcome), outcome.verdicts if outcome else {})
    return lines + list(outcome.details if outcome else [])


# ----------------------------------------------------------------------------- the screen

#: how a cell is counted in the session's first line: by its primary figure's verdict, each
#: cell once; the first four are said even when none
COUNTED = (("regressed", ("regression",)), ("unresolved", ("unresolved",)), ("improved", ("improvement",)),
           ("unclear", ("unclear", "below-resolution", "suspect")), ("unchanged", ("unchanged",)),
           ("not in the baseline", ("no-baseline",)), ("not gated", ("not-gated",)))
ALWAYS_COUNTED = ("regressed", "improved", "unclear", "unchanged")
#: verdict kinds of a figure that changed, or may have: its row is on the screen
CHANGED = ("regression", "unresolved", "improvement", "unclear", "below-resolution", "suspect")
#: cell statuses of what this machine or build cannot run (the test skips): not a failure
NOT_HERE = ("unavailable", "unsupported")
#: the screen's table fits this many columns (a failed cell's reason is cut to fit)
SCREEN_WIDTH = 120
#: cells a grouped line names before "and N more" (the full report has every row)
NAMED = 3


def _n(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _kind(v) -> Optional[str]:
    return getattr(v, "kind", None) if not isinstance(v, dict) else v.get("kind")


def _named(keys: Sequence[str]) -> str:
    return ", ".join(keys[:NAMED]) + (f" and {len(keys) - NAMED} more" if len(keys) > NAMED else "")


def _below_floor(rec: CellRecord) -> bool:
    return rec.outcome == "failed" and rec.floor is not None and rec.cell.status == "ok"


def cell_counts(records: Sequence[CellRecord], verdicts: Dict[str, Any]) -> Dict[str, int]:
    """The session's cells, each counted once: by its primary figure's verdict, or as not
    measured (a crash, timeout, error or OOM), skipped (not runnable here), or measured (no
    verdict: nothing to compare with)."""
    to_word = {kind: word for word, kinds in COUNTED for kind in kinds}
    counts = dict.fromkeys([w for w, _ in COUNTED] + ["not measured", "skipped", "measured"], 0)
    for rec in records:
        if rec.cell.status in NOT_HERE:
            counts["skipped"] += 1
        elif rec.cell.status != "ok":
            counts["not measured"] += 1
        else:
            counts[to_word.get(_kind(verdicts.get(rec.key)), "measured")] += 1
    return counts


def other_figures(verdicts: Dict[str, Any]) -> Dict[str, int]:
    """How many of the cells' other judged figures (memory, latency percentiles, ...) changed,
    by the word the first line says them in."""
    to_word = {kind: word for word, kinds in COUNTED for kind in kinds}
    out: Dict[str, int] = {}
    for key, v in verdicts.items():
        if "#" in key and _kind(v) in CHANGED:
            out[to_word[_kind(v)]] = out.get(to_word[_kind(v)], 0) + 1
    return out


def session_failed(session, outcome, exitstatus: Optional[int] = None) -> bool:
    """Whether the session fails: pytest's exit status (a test that failed), or the end of the
    session's policy (``outcome/finish.end_session``)."""
    if exitstatus not in (None, 0):
        return True
    return bool((outcome is not None and outcome.failed) or (session.no_gpu_reason and session.no_gpu_fails)
                or any(m.startswith(("mxperf: failing the session", "mxperf: could not finish"))
                       for m in session.end_messages))


def against(session, outcome, reference: Optional[str] = None) -> str:
    """What the session was compared with: this machine's baseline and when it was recorded,
    or in A/B mode the reference install (``reference``: --perf-reference as given)."""
    options = session.options
    if options.reference:
        sides = outcome.sides if outcome is not None else {}
        ref, cand = sides.get("reference") or {}, sides.get("candidate") or {}
        spec = reference or options.reference
        if session.reference_requirement:
            what = f"{session.reference_requirement}, the install this machine's baseline was recorded with"
        elif "/" in spec:
            what = f"mxnet {ref.get('mxnet_version') or '?'} at {spec}"
        else:
            what = spec
        return what + " (A/B" + (f"; candidate mxnet {cand['mxnet_version']}" if cand.get("mxnet_version") else "") + ")"
    baseline = session.baseline
    when = (baseline.updated or "")[:10] if baseline is not None else ""
    return f"baseline {session.machine.get('id')}" + (f" (recorded {when})" if when else "")


def outcome_line(session, outcome, *, failed: bool, command: str = "pytest", reference: Optional[str] = None) -> str:
    """The session in one line: passed or FAILED, its cells counted once each by their primary
    figure's verdict, against what; without anything to compare with, what to do next."""
    records = list(session.cells().values())
    verdicts = outcome.verdicts if outcome is not None else {}
    counts = cell_counts(records, verdicts)
    status = "FAILED" if failed else "passed"
    total = len(records)
    judged = sum(counts[w] for w, _ in COUNTED)
    extra = [f"{counts[w]} {w}" for w in ("not measured", "skipped") if counts[w]]
    if judged:
        said = [f"{counts[w]} {w}" for w, _ in COUNTED if w in ALWAYS_COUNTED or counts[w]]
        if counts["measured"]:
            extra.insert(0, f"{counts['measured']} not compared")
        line = f"mxperf: {status}: {', '.join(said + extra)} of {_n(total, 'cell')} against {against(session, outcome, reference)}"
    else:
        measured = counts["measured"]
        line = (f"mxperf: {status}: " + (_n(measured, "cell") if measured == total else f"{measured} of {_n(total, 'cell')}")
                + " measured" + "".join(f", {x}" for x in extra))
        options = session.options
        if options.update_baselines and outcome is not None and outcome.baseline_path:
            line += f"; recorded as this machine's first baseline ({session.machine.get('id')}: {outcome.baseline_path})"
        elif session.baseline is None and not options.reference and measured:
            line += (f"; no baseline for this machine ({session.machine.get('id')}): record one with {command} "
                     "--perf-update-baselines")
    answers = answers_rule.summary(_kind(v) for key, v in verdicts.items() if key.endswith(answers_rule.KEY_SUFFIX))
    if answers:
        line += "; " + answers
    others = other_figures(verdicts)
    if others:
        line += "; other figures: " + ", ".join(f"{n} {w}" for w, n in others.items())
    floors = sum(_below_floor(r) for r in records)
    if floors:
        line += f"; {_n(floors, 'cell')} below {'its' if floors == 1 else 'their'} floor"
    if judged and session.options.update_baselines and outcome is not None and outcome.baseline_path:
        line += f"; recorded into {outcome.baseline_path}"
    return line


def change_lines(session, outcome) -> List[str]:
    """What failed or changed, after the first line: cells that did not measure or were
    skipped (grouped by what happened), cells below their floor, cells the baseline does not
    hold or gate, then what the end of the session said (the slowdowns the baseline cannot
    decide, each change, the failure policy, profiles of failing cells, recording, report
    files)."""
    records = list(session.cells().values())
    verdicts = outcome.verdicts if outcome is not None else {}
    lines: List[str] = []
    failed: Dict[tuple, List[str]] = {}
    skipped: Dict[str, List[str]] = {}
    for rec in records:
        cell = rec.cell
        if cell.status in NOT_HERE:
            skipped.setdefault(reason(cell.message), []).append(rec.key)
        elif cell.status != "ok":
            failed.setdefault((cell.status, reason(cell.message)), []).append(rec.key)
    for (status, why), keys in failed.items():
        lines.append(f"mxperf: NOT MEASURED {_named(keys)}: {status}" + (f": {why}" if why else ""))
    for why, keys in skipped.items():
        lines.append(f"mxperf: SKIPPED {_named(keys)}" + (f": {why}" if why else ""))
    below = [rec for rec in records if _below_floor(rec)]
    for rec in below[:NAMED]:
        lines.append(f"mxperf: BELOW FLOOR {rec.key}: {reason(rec.note, 2 * REASON_WIDTH)}")
    if len(below) > NAMED:
        lines.append(f"mxperf: ... and {len(below) - NAMED} more cell(s) below their floor (the full report's table "
                     "has each)")
    new = [rec.key for rec in records if _kind(verdicts.get(rec.key)) == "no-baseline"]
    if new:
        lines.append(f"mxperf: {_n(len(new), 'cell')} not in this machine's baseline, not compared: {_named(new)}; "
                     "--perf-update-baselines records them")
    ungated = [rec.key for rec in records if _kind(verdicts.get(rec.key)) == "not-gated"]
    if ungated:
        from pytest_mxperf.judge.thresholds import MIN_BASELINE_PROCESSES
        lines.append(f"mxperf: {_n(len(ungated), 'cell')} shown, not gated: the baseline holds fewer than "
                     f"{MIN_BASELINE_PROCESSES} processes of {'it' if len(ungated) == 1 else 'them'}; re-record "
                     "with --perf-update-baselines")
    return lines + list(session.end_messages)


COMPACT_HEADER = ["cell", "unit", "median", "spread", "baseline", "change", "floor", "result"]


def _compared(vd: Dict[str, Any]) -> List[str]:
    """The baseline (or reference) column and the change column of a figure's verdict."""
    if vd.get("interval"):
        lo, hi = vd["interval"]
        base = f"x{1 + vd['change']:.3f} [{lo:.3f},{hi:.3f}]"
    else:
        base = _fmt(vd.get("baseline_median"))
    return [base, f"{vd['change_pct']:+.1f}%" if vd.get("change_pct") is not None else "-"]


def _vd(v) -> Dict[str, Any]:
    return v.to_dict() if hasattr(v, "to_dict") else (v or {})


def compact_rows(records: Sequence[CellRecord], verdicts: Dict[str, Any]) -> List[List[str]]:
    """The screen's table: one row a cell (its primary figure), and a row for each of its other
    judged figures (memory, ...) that changed; columns as COMPACT_HEADER."""
    rows = []
    for rec in records:
        cell = rec.cell
        key = rec.key
        vd = _vd(verdicts.get(key))
        f = rec.floor
        floor = "-"
        if f is not None and (f.value is not None or f.oom_documented):
            floor = ("OOM" if f.oom_documented else _fmt(f.value)) + (" doc" if f.kind == "documented" else " legacy")
        if cell.status != "ok":
            result = cell.status + (f": {reason(cell.message)}" if reason(cell.message) else "")
        else:
            result = "; ".join(x for x in ("below floor" if _below_floor(rec) else "",
                                           vd.get("kind") or _test_word(rec)) if x)
            failed = [r for r in cell.runs if not r.ok]
            if failed:
                result += f"; {len(failed)} of {len(cell.runs)} process(es) {failed[0].status}"
        rows.append([cell_label(rec), cell.primary.unit, _fmt(cell.median_or_none) if cell.ok_runs else "-",
                     _spread(rec), *_compared(vd), floor, result])
        for m in cell.metrics():
            if not m.judged or m.name == cell.primary.name:
                continue
            other = _vd(verdicts.get(metric_key(key, m.name, cell.workload.mode)))
            if other.get("kind") in CHANGED:
                rows.append(["  " + METRICS[m.name].label, m.unit, _fmt(cell.figure(m.name)), "-",
                             *_compared(other), "-", other["kind"]])
    return rows


def compact_table(records: Sequence[CellRecord], verdicts: Dict[str, Any], ab: bool = False,
                  width: int = SCREEN_WIDTH) -> List[str]:
    """The screen's table: COMPACT_HEADER without the columns no row fills, the result of a
    cell that did not measure cut so that its row fits ``width`` characters."""
    rows = compact_rows(records, verdicts)
    header = list(COMPACT_HEADER)
    header[header.index("baseline")] = "vs reference" if ab else "baseline"
    keep = [i for i, h in enumerate(header)
            if h in ("cell", "result") or any(r[i] not in ("-", "") for r in rows)]
    header = [header[i] for i in keep]
    rows = [[r[i] for i in keep] for r in rows]
    fixed = sum(max(len(header[i]), *(len(r[i]) for r in rows)) + 2 for i in range(len(header) - 1)) if rows else 0
    room = max(40, width - fixed)
    rows = [r[:-1] + [r[-1] if len(r[-1]) <= room else r[-1][:room - 1].rstrip() + "…"] for r in rows]
    return format_table(header, rows)


def session_lines(session, outcome, *, exitstatus: Optional[int] = None, command: str = "pytest",
                  reference: Optional[str] = None) -> List[str]:
    """The session's screen (the terminal's ``mxperf`` section): the outcome in one line, what
    failed or changed and what to do next, then one compact table, then the failing cells'
    operator profiles. ``exitstatus``: pytest's,
    before the end of the session's policy; ``command``: the command line to run again (what
    the next step says); ``reference``: --perf-reference as given."""
    cells = list(session.cells().values())
    verdicts = outcome.verdicts if outcome is not None else {}
    lines = [outcome_line(session, outcome, failed=session_failed(session, outcome, exitstatus), command=command,
                          reference=reference)]
    lines += change_lines(session, outcome)
    if cells:
        lines += compact_table(cells, verdicts, ab=bool(session.options.reference))
    lines += list(outcome.profile_lines if outcome is not None else [])  # what failed, in detail
    if session.deselected_slow:
        lines.append(f"mxperf: {session.deselected_slow} slow cells deselected (--perf-slow runs them)")
    return lines


def held_back(session) -> str:
    """What the full report holds that the screen does not, in a few words."""
    shown = f"{_n(len(session.findings), 'figure')} shown, not judged; " if session.findings else ""
    return f"{shown}every figure's row; machine, software, environment"


def footer_line(session, *, full_below: bool, report_file: Optional[str] = None,
                benchmark: Optional[str] = None) -> str:
    """The screen's last line: where the full report is (``report_file``; below it with
    ``-v``; else how to see it), and pytest-benchmark's tables when they are not on the
    terminal (``benchmark``: their file, "" when they are in none; None: not held back)."""
    if full_below:
        return "mxperf: the full report follows" + (f" (also in {report_file})" if report_file else "")
    if report_file:
        return (f"mxperf: full report ({held_back(session)}): {report_file}"
                + (f"; pytest-benchmark's tables: {benchmark}" if benchmark else "") + "; -v shows them here")
    return (f"mxperf: -v shows the full report ({held_back(session)})"
            + (" and pytest-benchmark's tables" if benchmark is not None else "")
            + "; --perf-report DIR writes it to DIR/report.txt")
