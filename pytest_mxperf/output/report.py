"""What a session shows, rendered from its outcome (``model/outcome.SessionOutcome``): the
screen (the outcome in one line, what failed or changed, one compact table, the failing
cells' profiles) and the full report (machine, software, every figure's row, what is shown,
not judged, the details). Plain functions of values."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from pytest_mxperf.judge import answers as answers_rule
from pytest_mxperf.judge.verdict import NOT_COMPARED_UNLIKE
from pytest_mxperf.measure import planning
from pytest_mxperf.measure.ledger import CellRecord, Finding
from pytest_mxperf.model import kinds
from pytest_mxperf.model.measurement import METRICS, metric_key
from pytest_mxperf.model.options import duration_text
from pytest_mxperf.model.outcome import EXIT_PASSED, SessionOutcome
from pytest_mxperf.output import messages


def _cells(outcome: SessionOutcome) -> List[CellRecord]:
    """The session's cells, each once, as the end of the session judged them (labelled)."""
    return list(outcome.cells.values())


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
    if "optimizer" in kinds.kind(w.mode).key_fields:
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


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


#: where the cost constants (``planning.py``) were measured, said while they are the estimate
COSTS_MEASURED_ON = "a 2-vCPU AMD EPYC"


def costs_source(speed) -> str:
    """Where an estimate without this machine's history took its costs from: the reference
    machine's, scaled by this machine's speed (``planning.Speed``: MXNet's import, else its
    convolution) when it was read."""
    where = f"costs measured on {(speed.reference_cpu if speed else '') or COSTS_MEASURED_ON}"
    if speed is None or not speed.figure:
        return f"{where}, not scaled: this machine's MXNet speed was not read"
    if speed.figure == "import":
        return (f"{where}, x{speed.factor:.2f} for this machine's speed (MXNet's import "
                f"{speed.import_cpu_s:.2f} CPU-s against {speed.reference_import_cpu_s:.2f})")
    return (f"{where}, x{speed.factor:.2f} for this machine's MXNet speed "
            f"({speed.conv_gflops:.0f} GFLOP/s against {speed.reference_gflops:.0f})")


def setup_words(plan) -> str:
    """Whether the sessions an estimate starts from ran this session's setup (MXNet, Python,
    the recorded variables: ``planning.same_setup``)."""
    if plan.known_of_setup is True:
        return " and setup"
    if plan.known_of_setup is False:
        return " (none yet of this setup: MXNet, Python, recorded variables)"
    return ""


def _a(kind: str) -> str:
    """"an A/B" / "a paired"."""
    return f"an {kind}" if kind == "A/B" else f"a {kind}"


def settling_words(ready: bool, duet_tests: int, tests: int, path=None) -> str:
    """What a session against a baseline can settle against the baseline's recorded setup, for
    the first line: ``ready``, whether that setup can be rebuilt (``RecordedSetup.ready``);
    ``duet_tests`` of the ``tests`` measuring tests have cells whose workers take turns in a
    duet (the others: process pairs); ``path``: the session's ``planning.FirstPath``, which
    path it takes and why."""
    if not ready:
        return ("; no duet against the baseline's recorded setup (the next line says why): none is in the "
                "estimate")
    if path is not None and path.paired:
        return (f"; paired from the first process because {path.why}: every cell the baseline records is "
                "judged by its pairs, the baseline's figures beside them")
    cheap = f"; the cheap path, because {path.why}" if path is not None else ""
    pairs = tests - duet_tests
    return (f"{cheap}; against the baseline: what it alone cannot settle goes to a duet against its recorded setup "
            f"({duet_tests} of {tests} test(s) in duet pairs" + (f", {pairs} in process pairs" if pairs else "") + ")")


def plan_line(tests: int, options, ab_pairs: int, duet_pairs: int = 3, duet_tests: Optional[int] = None,
              plan=None, deselected_slow: int = 0, ab: bool = False, speed=None, settling: str = "",
              paired: bool = False, first_why: str = "", constants: Optional[Tuple[float, float]] = None) -> str:
    """The expected duration, said before anything is measured. ``ab``: an A/B session, or
    (``paired``) one against a baseline whose cells are paired with its recorded setup from the
    first process, priced as an A/B session is;
    ``duet_tests``: how many of the tests are duet cells in A/B mode (default: all); ``plan``:
    baseline mode's ``planning.estimate`` (which cells share worker processes, which tests
    have their own); ``speed``: this machine's MXNet speed against the reference machine's
    (``planning.Speed``), which scales the costs; ``settling``: baseline mode's
    ``settling_words``; ``first_why``: which cells get one duet pair before their first look
    instead of ``duet_pairs`` and why (``planning.first_pairs``), when any do; ``constants``: an
    A/B session's tests at the constants, their first stage and most (``planning.ab_constants``,
    at this machine's speed: each test's kind's own pair), else priced from the counts."""
    duet_tests = tests if duet_tests is None else duet_tests
    slow = f"; {slow_note(deselected_slow)}" if deselected_slow else ""
    factor = speed.factor if speed else 1.0
    if ab and constants is not None:
        seconds = constants[0]
    else:
        seconds = factor * (duet_tests * planning.planned_test_seconds(options, ab, duet_pairs, ab_pairs)
                            + (tests - duet_tests) * planning.planned_test_seconds(options, ab, duet_pairs, ab_pairs,
                                                                                   duet=False))
    own_ab = ab and plan is not None and bool(plan.known_tests or plan.scaled_tests)
    # the tests, not an A/B session's second stage (which the deadline cuts) or its end, are
    # what a deadline leaves not reached
    first = sum(s for _, s in plan.per_test) if own_ab else seconds
    cut = ""
    if options.deadline is not None and first > options.deadline:
        cut = f"; --perf-deadline {duration_text(options.deadline)} will leave some not reached"
    if ab:
        mode = "against the baseline, its recorded setup as the reference" if paired else "A/B mode"
        first = f" before its first look, or {first_why}" if first_why else ""
        pairs = f"{duet_pairs} duet pair{'' if duet_pairs == 1 else 's'}"
        what = (f"mxperf: {mode}: {tests} cell(s) x {pairs}{first} (resident candidate and "
                f"reference workers taking turns at timed rounds: {', '.join(kinds.RESIDENT_KINDS)}, your own network; "
                f"a worker kind that cannot be resident runs {ab_pairs} "
                f"process pairs); ")
        kind = "paired" if paired else "A/B"
        cut += settling if paired else ""
        if own_ab:
            others = tests - plan.known_tests - plan.scaled_tests
            parts = []
            if plan.known_tests:
                parts.append(f"{plan.known_tests} test(s) at what they took in this machine's last "
                             f"{plan.known_sessions} {kind} session(s){setup_words(plan)}, their second stage and "
                             f"end included")
            if plan.scaled_tests:
                parts.append(f"{plan.scaled_tests} test(s) at what they took in the reference machine's A/B session"
                             + (", its second stage and end included" if plan.reference_settles else "")
                             + f" ({costs_source(speed)}; this machine's own once {_a(kind)} session is in its "
                               "history)")
            if others:
                parts.append(f"{others} at the constants' first stage"
                             + ("" if plan.scaled_tests else f" ({costs_source(speed)})"))
            more = ("" if plan.known_tests or plan.reference_settles else
                    "; more when a cell needs a second stage (a real slowdown always does)")
            return f"{what}expected about {duration_text(plan.seconds)}: {', '.join(parts)}{more}{cut}{slow}"
        most = (constants[1] if constants is not None else
                seconds + factor * duet_tests * planning.SECOND_STAGE_PAIRS * planning.duet_pair_seconds(options))
        return (f"{what}expected about "
                f"{duration_text(seconds)} when no cell needs a second stage, about {duration_text(most)} when "
                f"every cell does (a real slowdown always does"
                f"{'; ' + costs_source(speed) if speed and speed.figure else ''}; this machine's "
                f"own once {_a(kind)} session is in its history){cut}{slow}")
    if plan is not None:
        parts = []
        if plan.shared_cells:
            parts.append(f"{plan.shared_cells} cell(s) in worker processes of several cells (a test's grid in each "
                         f"process, about {_minutes(plan.shared_seconds)})")
        if plan.fresh_tests:
            parts.append(f"{plan.fresh_tests} test(s) with fresh processes of their own "
                         f"({', '.join(plan.fresh_kinds)}: about {_minutes(plan.fresh_seconds)})")
        if plan.known_tests:
            parts.append(f"{plan.known_tests} test(s) at what they took in this machine's last "
                         f"{plan.known_sessions} session(s) of the kind{setup_words(plan)}")
        if plan.scaled_tests:
            parts.append(f"{plan.scaled_tests} test(s) at what they took on the reference machine")
        source = ("" if plan.known_tests else
                  f" ({costs_source(speed)}; this machine's own once a session is in its history)")
        # the time outside the tests of this machine's last sessions holds the suspects they
        # confirmed at the end; the constants hold none
        more = (", confirming suspects included as those sessions needed it" if plan.known_tests
                else ", confirming suspects included as an unchanged session against a baseline on the reference "
                     "machine needed it" if plan.reference_settles
                else ", more if suspects are confirmed")
        return (f"mxperf: {tests} measuring test(s), {options.processes} process(es) a cell: {'; '.join(parts)}; "
                f"expected about {_minutes(plan.seconds)}{source}{more}{settling}{cut}{slow}")
    return (f"mxperf: {tests} measuring test(s) x {options.processes} process(es): expected at least "
            f"{duration_text(seconds)} (tests that measure several cells, heavy models and re-measured suspects take "
            f"longer){cut}{slow}")


#: what measures a slow test (``collection.asked_for``)
HOW_TO_ASK_FOR_SLOW = ("--perf-slow runs them, or name the cells: --perf-models and --perf-batch-sizes, "
                       "or a test's node id with its parameters")


def slow_note(deselected_slow: int) -> str:
    """The slow tests the selection left out and how to have them measured (with the plan
    said first, and on the screen at the end)."""
    return f"{deselected_slow} slow test(s) deselected ({HOW_TO_ASK_FOR_SLOW})"



def none_selected_line(slow: int, other: int, shard: int, shard_spec: Optional[str] = None) -> str:
    """Measuring tests were collected and the selection left none: why, in one line (the
    session then exits ``EXIT_NONE_SELECTED``). ``other``: deselected by -m, -k, --deselect
    or another plugin."""
    why = []
    if slow:
        why.append(f"{slow} deselected as slow ({HOW_TO_ASK_FOR_SLOW})")
    if other:
        why.append(f"{other} by -m/-k/--deselect")
    if shard:
        why.append(f"{shard} in other shards than --perf-shard {shard_spec}")
    return f"mxperf: no measuring test selected: {', '.join(why)}"


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


def _context(outcome: SessionOutcome) -> Dict[str, Any]:
    """What the full report says of the machine, the software and the environment."""
    from pytest_mxperf.machine import hardware
    ctx = outcome.context
    software, env = "", {}
    for r in _cells(outcome):
        for run in r.cell.runs:
            if run.mxnet_version and not software:
                software = (f"mxnet {run.mxnet_version}, python {run.meta.python}, "
                            f"OpenMP threads {run.openmp_threads}")
            env = run.env or env
    baseline = ctx.baseline
    sides = []
    if ctx.comparison.ab:
        for side, facts in outcome.sides.items():
            recorded = facts.get("recorded_baseline_requirement")
            sides.append(f"{side}: mxnet {facts.get('mxnet_version')} ({facts.get('python')}"
                         + (f"; {recorded}, the install this machine's baseline was recorded with" if recorded else "")
                         + f"); features: {','.join(facts.get('features') or []) or '?'}")
    return {"hardware": hardware.summary(), "software": software, "machine_id": ctx.machine.get("id"),
            "baseline": (f"{ctx.store.path(ctx.machine['id'])} ({len(baseline.keys())} cells)"
                         if baseline is not None else None),
            "sides": sides,
            "env": ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "(none recorded)"}


def full_lines(outcome: SessionOutcome) -> List[str]:
    """The full report: the machine, software and environment, every figure of every cell
    (memory and the other judged figures in rows of their own, floors), utilisation, the
    figures shown, not judged, and what the end of the session said beside its verdicts
    (``messages.detail_lines``). ``--perf-report DIR`` writes it to DIR/report.txt; ``-v``
    shows it after the session's screen."""
    lines = summary_lines(_cells(outcome), outcome.findings, _context(outcome), outcome.verdicts)
    return lines + messages.detail_lines(outcome)


# ----------------------------------------------------------------------------- the screen

#: how a cell is counted in the session's first line: by its primary figure's verdict, each
#: cell once; the first four are said even when none
COUNTED = (("regressed", ("regression",)), ("unresolved", ("unresolved",)), ("improved", ("improvement",)),
           ("unclear", ("unclear", "below-resolution", "suspect")), ("unexplained", ("unexplained",)),
           ("machine differs", ("machine-differs",)), ("system differs", ("system-differs",)),
           ("unchanged", ("unchanged",)),
           ("not in the baseline", ("no-baseline",)), ("not gated", ("not-gated",)))
ALWAYS_COUNTED = ("regressed", "improved", "unclear", "unchanged")
#: verdict kinds of a figure that changed, or may have: its row is on the screen
CHANGED = ("regression", "unresolved", "improvement", "unclear", "below-resolution", "suspect", "unexplained",
           "machine-differs", "system-differs")
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


def _reason(v) -> Optional[str]:
    return getattr(v, "reason", None) if not isinstance(v, dict) else v.get("reason")


def _named(keys: Sequence[str]) -> str:
    return ", ".join(keys[:NAMED]) + (f" and {len(keys) - NAMED} more" if len(keys) > NAMED else "")


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


def session_failed(outcome: SessionOutcome, exitstatus: Optional[int] = None) -> bool:
    """Whether the session fails: pytest's exit status (a test that failed), or the outcome's
    failures (a judged failure, or a writer that could not write)."""
    return exitstatus not in (None, 0) or outcome.exit_status != EXIT_PASSED


def against(outcome: SessionOutcome, reference: Optional[str] = None) -> str:
    """What the session was compared with: this machine's baseline and when it was recorded,
    or in A/B mode the reference install (``reference``: --perf-reference as given)."""
    ctx = outcome.context
    if ctx.comparison.ab:
        sides = outcome.sides
        ref, cand = sides.get("reference") or {}, sides.get("candidate") or {}
        spec = reference or ctx.comparison.reference or ""
        if ctx.comparison.requirement:
            what = f"{ctx.comparison.requirement}, the install this machine's baseline was recorded with"
        elif "/" in spec:
            what = f"mxnet {ref.get('mxnet_version') or '?'} at {spec}"
        else:
            what = spec
        return what + " (A/B" + (f"; candidate mxnet {cand['mxnet_version']}" if cand.get("mxnet_version") else "") + ")"
    baseline = ctx.baseline
    when = (baseline.updated or "")[:10] if baseline is not None else ""
    return f"baseline {ctx.machine.get('id')}" + (f" (recorded {when})" if when else "")


def outcome_line(outcome: SessionOutcome, *, failed: bool, command: str = "pytest",
                 reference: Optional[str] = None) -> str:
    """The session in one line: passed or FAILED, its cells counted once each by their primary
    figure's verdict, against what; without anything to compare with, what to do next."""
    ctx = outcome.context
    records = _cells(outcome)
    verdicts = outcome.verdicts
    counts = cell_counts(records, verdicts)
    status = "FAILED" if failed else "passed"
    total = len(records)
    judged = sum(counts[w] for w, _ in COUNTED)
    extra = [f"{counts[w]} {w}" for w in ("not measured", "skipped") if counts[w]]
    if judged:
        said = [f"{counts[w]} {w}" for w, _ in COUNTED if w in ALWAYS_COUNTED or counts[w]]
        if counts["measured"]:
            extra.insert(0, f"{counts['measured']} not compared")
        line = f"mxperf: {status}: {', '.join(said + extra)} of {_n(total, 'cell')} against {against(outcome, reference)}"
    else:
        measured = counts["measured"]
        line = (f"mxperf: {status}: " + (_n(measured, "cell") if measured == total else f"{measured} of {_n(total, 'cell')}")
                + " measured" + "".join(f", {x}" for x in extra))
        recorded = outcome.written.recorded
        if recorded is not None:
            line += f"; recorded as this machine's first baseline ({ctx.machine.get('id')}: {recorded.path})"
        elif ctx.baseline is None and not ctx.comparison.ab and measured and not ctx.options.update_baselines:
            line += (f"; no baseline for this machine ({ctx.machine.get('id')}): record one with {command} "
                     "--perf-update-baselines")
    answers = answers_rule.summary(_kind(v) for key, v in verdicts.items() if key.endswith(answers_rule.KEY_SUFFIX))
    if answers:
        line += "; " + answers
    others = other_figures(verdicts)
    if others:
        line += "; other figures: " + ", ".join(f"{n} {w}" for w, n in others.items())
    floors = sum(r.below_floor for r in records)
    if floors:
        line += f"; {_n(floors, 'cell')} below {'its' if floors == 1 else 'their'} floor"
    if judged and outcome.written.recorded is not None:
        line += f"; recorded into {outcome.written.recorded.path}"
    return line


def change_lines(outcome: SessionOutcome) -> List[str]:
    """What failed or changed, after the first line: cells that did not measure or were
    skipped (grouped by what happened), cells below their floor, cells the baseline does not
    hold or gate, then what the end of the session said (the slowdowns the baseline cannot
    decide, each change, the failure policy, profiles of failing cells, recording, report
    files)."""
    records = _cells(outcome)
    verdicts = outcome.verdicts
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
    below = [rec for rec in records if rec.below_floor]
    for rec in below[:NAMED]:
        lines.append(f"mxperf: BELOW FLOOR {rec.key}: {reason(rec.note, 2 * REASON_WIDTH)}")
    if len(below) > NAMED:
        lines.append(f"mxperf: ... and {len(below) - NAMED} more cell(s) below their floor (the full report's table "
                     "has each)")
    unlike = [rec.key for rec in records if _kind(verdicts.get(rec.key)) == "no-baseline"
              and str(_reason(verdicts.get(rec.key))).startswith(NOT_COMPARED_UNLIKE)]
    new = [rec.key for rec in records if _kind(verdicts.get(rec.key)) == "no-baseline" and rec.key not in unlike]
    if new:
        lines.append(f"mxperf: {_n(len(new), 'cell')} not in this machine's baseline, not compared: {_named(new)}; "
                     "--perf-update-baselines records them")
    if unlike:
        them = "it" if len(unlike) == 1 else "them"
        lines.append(f"mxperf: {_n(len(unlike), 'cell')} in this machine's baseline but measured another way than it "
                     f"recorded {them} (among other cells, or alone), not compared: {_named(unlike)}; "
                     f"--perf-update-baselines records {them} this way")
    ungated = [rec.key for rec in records if _kind(verdicts.get(rec.key)) == "not-gated"]
    if ungated:
        from pytest_mxperf.judge.thresholds import MIN_BASELINE_PROCESSES
        lines.append(f"mxperf: {_n(len(ungated), 'cell')} shown, not gated: the baseline holds fewer than "
                     f"{MIN_BASELINE_PROCESSES} processes of {'it' if len(ungated) == 1 else 'them'}; re-record "
                     "with --perf-update-baselines")
    return lines + messages.end_lines(outcome)


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
            result = "; ".join(x for x in ("below floor" if rec.below_floor else "",
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


def session_lines(outcome: SessionOutcome, *, exitstatus: Optional[int] = None, command: str = "pytest",
                  reference: Optional[str] = None) -> List[str]:
    """The session's screen (the terminal's ``mxperf`` section): the outcome in one line, what
    failed or changed and what to do next, then one compact table, then the failing cells'
    operator profiles. ``exitstatus``: pytest's,
    before the end of the session's policy; ``command``: the command line to run again (what
    the next step says); ``reference``: --perf-reference as given."""
    cells = _cells(outcome)
    lines = [outcome_line(outcome, failed=session_failed(outcome, exitstatus), command=command, reference=reference)]
    lines += change_lines(outcome)
    if cells:
        lines += compact_table(cells, outcome.verdicts, ab=outcome.context.comparison.ab)
    lines += messages.profile_lines(outcome)  # what failed, in detail
    slow = outcome.context.plan.deselected_slow
    if slow:
        lines.append(f"mxperf: {slow_note(slow)}")
    lines += threshold_warnings(outcome)
    return lines


def threshold_warnings(outcome: SessionOutcome) -> List[str]:
    """A line for each pyproject.toml threshold pattern that named no figure of the session
    (a typo there would silently leave the cell at --perf-min-effect)."""
    from pytest_mxperf.judge.thresholds import MinEffects
    patterns = tuple(t for t in getattr(outcome.context.plan, "thresholds", ()) if t.pattern is not None)
    if not patterns or not outcome.verdicts:
        return []
    keys = {k: getattr(v, "metric", "") or "" for k, v in outcome.verdicts.items()}
    return [f"mxperf: warning: the threshold {t.source} named no figure of this session" for t in
            MinEffects(patterns=patterns).unmatched(keys)]


def held_back(outcome: SessionOutcome) -> str:
    """What the full report holds that the screen does not, in a few words."""
    shown = f"{_n(len(outcome.findings), 'figure')} shown, not judged; " if outcome.findings else ""
    return f"{shown}every figure's row; machine, software, environment"


def footer_line(outcome: SessionOutcome, *, full_below: bool, report_file: Optional[str] = None,
                benchmark: Optional[str] = None) -> str:
    """The screen's last line: where the full report is (``report_file``; below it with
    ``-v``; else how to see it), and pytest-benchmark's tables when they are not on the
    terminal (``benchmark``: their file, "" when they are in none; None: not held back)."""
    if full_below:
        return "mxperf: the full report follows" + (f" (also in {report_file})" if report_file else "")
    if report_file:
        return (f"mxperf: full report ({held_back(outcome)}): {report_file}"
                + (f"; pytest-benchmark's tables: {benchmark}" if benchmark else "") + "; -v shows them here")
    return (f"mxperf: -v shows the full report ({held_back(outcome)})"
            + (" and pytest-benchmark's tables" if benchmark is not None else "")
            + "; --perf-report DIR writes it to DIR/report.txt")


# ----------------------------------------------------------------------------- the terminal's section

#: the full report as text (the screen, then ``full_lines``) and pytest-benchmark's tables,
#: in --perf-report DIR
TEXT_REPORT, BENCHMARK_TABLES = "report.txt", "benchmark.txt"


def write_text(report_dir: Optional[str], name: str, lines: Sequence[str]) -> tuple:
    """One text file of the report (TEXT_REPORT, BENCHMARK_TABLES) into --perf-report DIR,
    written atomically: (its path or None, the line saying it could not be written)."""
    from pathlib import Path

    from pytest_mxperf.model.jsonio import atomic_write_text
    if not report_dir:
        return None, []
    try:
        out_dir = Path(report_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out_dir / name, "\n".join(lines) + "\n")
        return str(out_dir / name), []
    except OSError as exc:
        return None, [f"mxperf: {name} not written to {report_dir}: {exc}"]


def shown(outcome: SessionOutcome) -> bool:
    """Whether the session has anything to show: cells, figures shown, or what its end says."""
    return bool(outcome.cells or outcome.findings or messages.end_lines(outcome))


def show(terminalreporter, outcome: SessionOutcome, *, exitstatus: int, command: str, reference: Optional[str],
         verbose: bool, benchmark: Optional[str]) -> None:
    """The terminal's ``mxperf`` section (the screen, where the rest is) and, with ``-v``, the
    full report after it; report.txt written to --perf-report DIR. ``benchmark``: where
    pytest-benchmark's tables are (``benchmark_records.tables``)."""
    if not shown(outcome):
        return
    screen = session_lines(outcome, exitstatus=exitstatus, command=command, reference=reference)
    full = full_lines(outcome)
    report_file, unwritten = write_text(outcome.context.options.report_dir, TEXT_REPORT,
                                        screen + ["", "full report:"] + full)
    terminalreporter.section("mxperf")
    for line in screen + unwritten + [footer_line(outcome, full_below=verbose, report_file=report_file,
                                                  benchmark=benchmark)]:
        terminalreporter.write_line(line)
    if verbose:
        terminalreporter.section("mxperf: full report", sep="-")
        for line in full:
            terminalreporter.write_line(line)
