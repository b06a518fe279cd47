"""The end of a session: baseline verdicts (with confirmation), baseline recording, reports.

Plain logic over a PerfSession; the plugin calls ``finish_session`` once every test ran.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import baselines, verdict as vd
from .fixture import CellRecord, PerfSession


@dataclasses.dataclass
class GateOutcome:
    messages: List[str]
    failed: bool = False
    regressions: int = 0
    improvements: int = 0
    confirmed: int = 0
    baseline_path: Optional[str] = None
    report_files: List[str] = dataclasses.field(default_factory=list)


def software_facts(session: PerfSession) -> Dict[str, Any]:
    """What the workers actually ran with (recorded beside figures, never in the machine id)."""
    for rec in session.records:
        for run in rec.cell.ok_runs:
            m = run.meta
            return {"mxnet_version": m.get("mxnet_version"), "features": m.get("features"),
                    "python": m.get("python"), "numpy_version": m.get("numpy_version"),
                    "gpus": m.get("gpus")}
    return {}


def _measured(session: PerfSession) -> List[CellRecord]:
    return [r for r in session.records if r.cell.ok_runs and r.cell.workload.mode in ("score", "train")]


def _judge(records: List[CellRecord], doc, options, software) -> Dict[str, vd.Verdict]:
    # The same cell may be measured by two tests; judge each key once, on all its processes.
    cells = {}
    for r in records:
        cells.setdefault(r.cell.workload.key(), r.cell)
    return vd.verdicts_for_session(list(cells.values()), doc, min_effect=options.min_effect, software=software)


def _confirm(session: PerfSession, records: List[CellRecord], verdicts: Dict[str, vd.Verdict],
             target: int) -> int:
    """Re-measure suspected regressions with more fresh processes; returns how many cells."""
    done = 0
    for key, v in verdicts.items():
        if v.kind not in ("suspect", "regression") or (v.change or 0) >= 0:
            continue
        rec = next(r for r in records if r.cell.workload.key() == key)
        missing = target - len(rec.cell.ok_runs)
        if missing <= 0:
            continue
        extra = session.measure(rec.cell.workload, processes=missing)
        rec.cell.runs.extend(extra.runs)
        done += 1
    return done


def finish_session(session: PerfSession, machine: Dict[str, Any], doc: Optional[Dict[str, Any]],
                   baselines_dir: Optional[str]) -> GateOutcome:
    options = session.options
    out = GateOutcome(messages=[])
    records = _measured(session)
    software = software_facts(session)
    if records:
        if doc is None:
            path = baselines.baseline_path(machine["id"], baselines_dir)
            if options.update_baselines:
                out.messages.append(f"mxperf: no baseline existed for this machine ({machine['id']}); "
                                    f"this run records the first one")
            else:
                out.messages.append(
                    f"mxperf: no baseline for this machine ({machine['id']}): nothing was compared with a "
                    f"previous measurement; record one with --perf-update-baselines (writes {path})")
            if "no-baseline" in options.fail_on and not options.update_baselines:
                out.failed = True
                out.messages.append("mxperf: --perf-fail-on no-baseline: failing the session")
        else:
            verdicts = _judge(records, doc, options, software)
            if not options.smoke and not options.update_baselines:
                out.confirmed = _confirm(session, records, verdicts, options.confirm_processes)
                if out.confirmed:
                    verdicts = _judge(records, doc, options, software)
            for r in records:
                v = verdicts.get(r.cell.workload.key())
                if v is not None:
                    r.verdict = v.to_dict()
            for key, v in verdicts.items():
                if v.kind in ("regression", "improvement", "suspect"):
                    line = f"mxperf: {v.kind.upper()} {key}: {v.reason}"
                    if v.env_diff:
                        line += "; changed: " + ", ".join(v.env_diff)
                    out.messages.append(line)
                for note in v.notes:
                    out.messages.append(f"mxperf: note {key}: {note}")
            out.regressions = sum(v.kind == "regression" for v in verdicts.values())
            out.improvements = sum(v.kind == "improvement" for v in verdicts.values())
            if out.confirmed:
                out.messages.append(f"mxperf: {out.confirmed} suspected regression(s) re-measured with up to "
                                    f"{options.confirm_processes} processes before judging")
            if out.improvements:
                out.messages.append("mxperf: improvements found; consider --perf-update-baselines")
            if out.regressions:
                out.failed = True
                out.messages.append(f"mxperf: {out.regressions} confirmed regression(s) against baseline "
                                    f"{machine['id']} (minimum effect {100 * options.min_effect:.0f}%, "
                                    f"false discovery rate {vd.FDR_Q})")
        if options.update_baselines:
            cells = {}
            for r in records:
                cells.setdefault(r.cell.workload.key(), r.cell)
            path = baselines.update(machine["id"], list(cells.values()), machine=machine, software=software,
                                    baselines_dir=baselines_dir)
            out.baseline_path = str(path)
            out.messages.append(f"mxperf: recorded {len(cells)} cell(s) into {path}")
    if options.report_dir:
        out.report_files = write_report(session, machine, doc, software, Path(options.report_dir))
        out.messages.append(f"mxperf: report written to {options.report_dir} "
                            f"({', '.join(Path(p).name for p in out.report_files)})")
    return out


def write_report(session: PerfSession, machine: Dict[str, Any], doc: Optional[Dict[str, Any]],
                 software: Dict[str, Any], out_dir: Path) -> List[str]:
    from . import plots, results
    out_dir.mkdir(parents=True, exist_ok=True)
    records = [r.to_dict() for r in session.records]
    meta = {"software": software, "started": session.started, "options": _options_dict(session.options),
            "findings": [dataclasses.asdict(f) for f in session.findings]}
    files = [str(results.dump_results(out_dir / "results.json", records, machine, meta))]
    files += [str(p) for p in plots.plot_throughput(records, doc, out_dir)]
    return files


def _options_dict(options) -> Dict[str, Any]:
    d = dataclasses.asdict(options)
    return json.loads(json.dumps(d, default=lambda x: sorted(x) if isinstance(x, frozenset) else str(x)))
