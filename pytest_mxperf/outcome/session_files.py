"""What a session leaves behind: its results document (results_document: the machine, the
session's facts and verdicts, every cell with its processes), the report files written
from it (write_report: results.json, summary.md, plots; write_progress after every
cell), and its entry in the history store (record_history)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from pytest_mxperf.judge import verdict as vd
from pytest_mxperf.measure.session import PerfSession
from pytest_mxperf.outcome.ab_judging import judge_ab_once
from pytest_mxperf.outcome.judging import (
    GateOutcome,
    comparisons,
    label_machine_states,
    software_facts,
)


def record_history(where: str, doc: Dict[str, Any]) -> Tuple[List[str], List[str]]:
    """Append the session to the history store: the lines saying which of its cells start a
    new step there (a change point at this session), and the line saying where it is kept
    (the full report's). A store that cannot be written is one line of the first, never a
    failed session: the measurements and the report stand."""
    from pytest_mxperf.history import changepoints
    from pytest_mxperf.history.store import HistoryError, describe, open_store
    try:
        with open_store(where) as store:
            store.append(doc)
            sid = doc["session"]["id"]
            kept = [f"mxperf: session {sid[:12]} kept in the history store {describe(where)}"]
            lines: List[str] = []
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
                        lines.append(f"mxperf: {key}: a new step in its history, x{ch['ratio']:.3f} "
                                     f"({ch['before']:.4g} -> {ch['after']:.4g}), began "
                                     + ("in this session" if ch["session"] == sid else
                                        f"{ago} session(s) ago ({ch['session'][:12]})")
                                     + ": " + "; ".join(ch["changed"]))
            return lines, kept
    except (HistoryError, OSError, ValueError) as exc:
        return [f"mxperf: history store {describe(where)} not written: {exc}"], []


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


def provisional_verdicts(session: PerfSession) -> Dict[str, vd.Verdict]:
    """The verdicts of the cells measured so far, judged as they stand: no re-measuring, no
    profiles (a suspect stays a suspect). A/B: against the reference's pairs; baseline mode:
    against the baseline; none without either."""
    cells = session.measured_cells()
    options = session.options
    if options.reference:
        return judge_ab_once(cells, set(), options.min_effect)
    baseline = session.baseline
    if baseline is None or not cells:
        return {}
    reference = label_machine_states(cells, baseline)
    return vd.judge_session(comparisons(cells, baseline, reference, set()), min_effect=options.min_effect)


def results_document(session: PerfSession, out: GateOutcome, final: bool = True) -> Dict[str, Any]:
    """The session as results.json holds it (and the history store takes it): the machine,
    the session's facts and verdicts, and every cell's record with its processes."""
    from pytest_mxperf.history import provenance
    options = session.options
    cells = list(session.cells().values())  # each cell once, with each of its processes once
    records = [r.to_dict(out.verdicts) for r in cells]
    meta = {"id": session.session_id, "software": software_facts(r for rec in cells for r in rec.cell.ok_runs),
            "git_commit": provenance.git_commit(), "ci_run": provenance.ci_run(),
            "fleet_id": options.fleet_id, "shard": f"{options.shard[0]}/{options.shard[1]}" if options.shard else None,
            "complete": final, "not_reached": list(session.not_reached),
            "started": session.started, "options": _options_dict(session.options),
            "findings": [dataclasses.asdict(f) for f in session.findings],
            "verdicts": {k: v.to_dict() for k, v in out.verdicts.items()},
            # what the summary says first: slowdowns the baseline could not decide, and why
            "headline": [m.removeprefix("mxperf: ") for m in out.headline]}
    if out.profiles:
        meta["profiles"] = out.profiles  # per cell key: operators, trace_path, batches, meta
    if session.options.reference:
        meta["ab"] = sides = out.sides or ab_sides(session)
        for r in records:
            entry = ab_record(out.verdicts.get(r["key"]), sides)
            if entry:
                r["ab"] = entry
    doc = {"machine": session.machine, "session": meta, "records": records}
    session.on_results(doc)  # the plugin's hook: pytest_mxperf_update_results
    return doc


def write_report(session: PerfSession, out: GateOutcome, final: bool = True,
                 doc: Optional[Dict[str, Any]] = None) -> List[str]:
    """results.json and summary.md (and, when ``final``, the plots) into --perf-report DIR."""
    from pytest_mxperf.model.jsonio import atomic_write_text
    from pytest_mxperf.output import plots
    from pytest_mxperf.store.results import Results
    out_dir = Path(session.options.report_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = Results.from_doc(doc or results_document(session, out, final))
    files = [str(results.dump(out_dir / "results.json"))]
    summary = out_dir / "summary.md"
    atomic_write_text(summary, "\n".join(results.markdown_summary(final=final)) + "\n")
    files.append(str(summary))
    if final:
        files += [str(p) for p in plots.plot_throughput(results.records, session.baseline, out_dir)]
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
