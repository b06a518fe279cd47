"""Human-readable session report: one row per judged figure (with its unit), then findings
and the gate's messages. Plain functions over the session and the gate's outcome."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

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
            status = cell.status if cell.status != "ok" else rec.outcome
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


def session_lines(session, outcome) -> List[str]:
    """The terminal summary of a PerfSession after the gate ran."""
    from pytest_mxperf.machine import hardware
    software, env = "", {}
    cells = list(session.cells().values())  # each cell once, with each of its processes once
    for r in cells:
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
    context = {"hardware": hardware.summary(), "software": software, "machine_id": session.machine.get("id"),
               "baseline": (f"{session.store.path(session.machine['id'])} ({len(baseline.keys())} cells)"
                            if baseline is not None else None),
               "sides": sides,
               "env": ", ".join(f"{k}={v}" for k, v in sorted(env.items())) or "(none recorded)",
               "headline": list(outcome.headline) if outcome else [],
               "messages": [m for m in session.end_messages if not (outcome and m in outcome.headline)]}
    lines = summary_lines(cells, session.findings, context, outcome.verdicts if outcome else {})
    if session.deselected_slow:
        lines.append(f"mxperf: {session.deselected_slow} slow cells deselected (--perf-slow runs them)")
    return lines
