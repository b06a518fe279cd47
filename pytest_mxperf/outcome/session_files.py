"""What a session leaves behind: its results document (``results_document``: the machine, the
session's facts, verdicts and failures, every cell with its processes, from the outcome), the
report files written from it (``write_report``: results.json, summary.md, plots;
``write_progress`` after every cell), and its entry in the history store (``record_history``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from pytest_mxperf.judge import verdict as vd
from pytest_mxperf.measure.scheduler import Scheduler
from pytest_mxperf.measure.ledger import NOT_REACHED
from pytest_mxperf.measure.session import PerfSession, SessionContext
from pytest_mxperf.model.outcome import HistoryStep, SessionOutcome
from pytest_mxperf.outcome.ab_judging import session_spreads
from pytest_mxperf.outcome.judging import software_facts


def record_history(where: str, doc: Dict[str, Any]) -> Tuple[str, Tuple[HistoryStep, ...], str]:
    """Append the session to the history store: (where it is kept, the new steps in its
    cells' histories that this session makes sure, why it could not be written or "").
    A store that cannot be written is a failed writer: the measurements and the report stand."""
    from pytest_mxperf.history import changepoints
    from pytest_mxperf.history.store import HistoryError, describe, open_store
    try:
        with open_store(where) as store:
            store.append(doc)
            sid = doc["session"]["id"]
            steps: List[HistoryStep] = []
            direction = {c["key"]: c["higher_is_better"] for c in store.cells()}
            for key in dict.fromkeys(rec["key"] for rec in doc["records"]):
                # this machine's history: a step is found among one machine's sessions
                hist = [h for h in store.history(key) if h.get("fast_end")
                        and h["machine_id"] == doc["machine"]["id"]]
                for ch in changepoints.cell_changes(hist, higher_is_better=direction.get(key, True)):
                    # a step needs MIN_SIZE sessions after it: it is said by the sessions that
                    # make it sure, naming the session it began in
                    ago = len(hist) - ch["index"] - 1
                    if ago < changepoints.MIN_SIZE + 2:
                        steps.append(HistoryStep(key, ch["ratio"], ch["before"], ch["after"], ch["session"],
                                                 0 if ch["session"] == sid else ago, tuple(ch["changed"])))
            return describe(where), tuple(steps), ""
    except (HistoryError, OSError, ValueError) as exc:
        return "", (), f"{describe(where)}: {exc}"


def write_progress(session: PerfSession) -> None:
    """results.json and summary.md with every cell so far and its interim verdict (the
    comparator's judgement as the cells stand: no more measuring), written atomically after
    each cell (``--perf-report``): a job that is killed or runs out of time keeps what it
    finished. Never fails a measurement: a problem is one line on stderr and the final
    report is written at the end as usual."""
    ctx = session.context
    if not ctx.options.report_dir:
        return
    try:
        from pytest_mxperf.outcome import comparators
        ledger = session.ledger
        verdicts = comparators.interim(comparators.choose(ctx, session.clock), ledger.measured_cells())
        outcome = SessionOutcome(ctx, ledger.cells(), verdicts, events=ledger.events(), findings=ledger.findings,
                                 skips=ledger.skips)
        write_report(ctx.options.report_dir, results_document(outcome, session.on_results, final=False),
                     ctx.baseline, final=False)
    except Exception as exc:  # noqa: BLE001 - the measurement matters more than its interim report
        import sys

        from pytest_mxperf.output import messages
        print(messages.interim_not_written(exc), file=sys.stderr)


def results_document(out: SessionOutcome, on_results: Callable[[Dict[str, Any]], None] = lambda doc: None,
                     final: bool = True) -> Dict[str, Any]:
    """The session as results.json holds it (and the history store takes it): the machine,
    the session's facts, verdicts and failures, and every cell's record with its processes."""
    from pytest_mxperf.history import provenance
    from pytest_mxperf.output import messages
    ctx = out.context
    options = ctx.options
    cells = list(out.cells.values())  # each cell once, with each of its processes once
    records = [r.to_dict(out.verdicts) for r in cells]
    meta = {"id": ctx.session_id, "software": software_facts(r for rec in cells for r in rec.cell.ok_runs),
            "git_commit": provenance.git_commit(), "ci_run": provenance.ci_run(),
            "fleet_id": options.fleet_id, "shard": f"{options.shard[0]}/{options.shard[1]}" if options.shard else None,
            "complete": final, "not_reached": [e.subject for e in out.events if e.kind == NOT_REACHED],
            "started": ctx.started, "kind": ctx.kind, "options": _options_dict(options),
            # what its measuring tests and the session took (the next estimate on this machine)
            "test_seconds": {n: round(t, 3) for n, t in out.test_seconds.items()},
            "wall_seconds": round(out.wall_seconds, 3) if out.wall_seconds is not None else None,
            # what it said it would take, and this machine's MXNet speed it scaled the costs by
            "estimate": _estimate_dict(ctx.plan),
            "findings": [dataclasses.asdict(f) for f in out.findings],
            "verdicts": {k: v.to_dict() for k, v in out.verdicts.items()},
            # the session's pooled spread of duet pairs per kind of figure: (sum of squares, df)
            "pair_spreads": {f: [ss, df] for f, (ss, df) in session_spreads(out.cells).items()},
            "failures": [f.to_dict() for f in out.failures], "exit_status": out.exit_status if final else None,
            # what the summary says first: slowdowns the baseline could not decide, and why
            "headline": messages.headline(out, prefix="")}
    profiled = {p.key: dict(p.current) for p in out.profiles if p.current is not None}
    if profiled:
        meta["profiles"] = profiled  # per cell key: operators, trace_path, batches, meta
    if ctx.comparison.ab:
        meta["ab"] = sides = dict(out.sides)
        for r in records:
            entry = ab_record(out.verdicts.get(r["key"]), sides)
            if entry:
                r["ab"] = entry
    doc = {"machine": dict(ctx.machine), "session": meta, "records": records}
    on_results(doc)  # the plugin's hook: pytest_mxperf_update_results
    return doc


def with_failures(doc: Dict[str, Any], out: SessionOutcome) -> Dict[str, Any]:
    """The results document ``doc`` (made once, the plugin's hook given it once) with the
    outcome's failures and exit status as they are now (a writer after it may have failed)."""
    session = dict(doc["session"], failures=[f.to_dict() for f in out.failures], exit_status=out.exit_status)
    return dict(doc, session=session)


def write_report(report_dir: str, doc: Dict[str, Any], baseline=None, final: bool = True) -> List[str]:
    """results.json and summary.md (and, when ``final``, the plots) of the results document
    ``doc`` into --perf-report DIR."""
    from pytest_mxperf.model.jsonio import atomic_write_text
    from pytest_mxperf.output import plots
    from pytest_mxperf.store.results import Results
    out_dir = Path(report_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = Results.from_doc(doc)
    files = [str(results.dump(out_dir / "results.json"))]
    summary = out_dir / "summary.md"
    atomic_write_text(summary, "\n".join(results.markdown_summary(final=final)) + "\n")
    files.append(str(summary))
    if final:
        files += [str(p) for p in plots.plot_throughput(results.records, baseline, out_dir)]
        files += [str(p) for p in plots.plot_serving(results.records, out_dir)]
    return files


#: the full report as text (``output/report.py``: the screen, then ``full_lines``) and
#: pytest-benchmark's tables, in --perf-report DIR
TEXT_REPORT, BENCHMARK_TABLES = "report.txt", "benchmark.txt"


def write_text(report_dir: str, name: str, lines: List[str]) -> str:
    """One text file of the report (TEXT_REPORT, BENCHMARK_TABLES) into --perf-report DIR,
    written atomically; its path."""
    from pytest_mxperf.model.jsonio import atomic_write_text
    out_dir = Path(report_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / name, "\n".join(lines) + "\n")
    return str(out_dir / name)


def ab_sides(scheduler: Scheduler, ctx: SessionContext) -> Dict[str, Any]:
    """Both interpreters of an A/B session: MXNet version and build features."""
    out = {}
    for side, py in (("candidate", ctx.options.python), ("reference", ctx.comparison.reference)):
        p = scheduler.probe_mxnet(py)
        out[side] = {"python": py or "(this interpreter)", "mxnet_version": p.get("mxnet_version"),
                     "features": p.get("features"), "status": p.get("status"), "message": p.get("message")}
    if ctx.comparison.requirement:  # --perf-reference baseline
        out["reference"]["recorded_baseline_requirement"] = ctx.comparison.requirement
    return out


def _estimate_dict(plan) -> Optional[Dict[str, Any]]:
    """The plan's estimate and the speed figure behind it (``planning.Speed``), for results.json."""
    if plan is None:
        return None
    speed = plan.speed
    return {"seconds": round(plan.estimate_seconds, 1) if plan.estimate_seconds is not None else None,
            "factor": round(speed.factor, 4) if speed else None,
            "conv_gflops": round(speed.conv_gflops, 2) if speed and speed.conv_gflops is not None else None,
            "reference_gflops": speed.reference_gflops if speed else None,
            "import_cpu_s": round(speed.import_cpu_s, 3) if speed and speed.import_cpu_s is not None else None,
            "reference_import_cpu_s": speed.reference_import_cpu_s if speed else None,
            "figure": speed.figure if speed else None}


def _options_dict(options) -> Dict[str, Any]:
    d = dataclasses.asdict(options)
    return json.loads(json.dumps(d, default=lambda x: sorted(x) if isinstance(x, frozenset) else str(x)))


def ab_record(verdict: Optional[vd.Verdict], sides: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The ``ab`` entry of a results record: ratio, interval, verdict, both sides."""
    if verdict is None or verdict.interval is None:
        return None
    return {"ratio": 1.0 + (verdict.change or 0.0), "low": verdict.interval[0], "high": verdict.interval[1],
            "verdict": verdict.kind, "pairs": verdict.n_current, **sides}
