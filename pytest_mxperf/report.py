"""Human-readable session report: one row per measured cell, then findings."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from .fixture import CellRecord, Finding


def _fmt(x: Optional[float], digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


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


def _cell_label(rec: CellRecord) -> str:
    w = rec.cell.workload
    ctx = ",".join(w.contexts)
    extra = f" t={w.threads}" if w.threads != "auto" else ""
    if w.mode == "train":
        extra += f" {w.optimizer}" + (f" kv={w.kvstore}" if w.kvstore else "")
    return f"{w.mode} {w.model} b{w.batch_size} {ctx}{extra}"


def cell_rows(records: Sequence[CellRecord]) -> List[List[str]]:
    rows = []
    for rec in records:
        doc, kind, floor = _floor_cols(rec)
        v = rec.verdict or {}
        base = _fmt(v.get("baseline_median")) if v.get("baseline_median") is not None else "-"
        change = f"{v['change_pct']:+.1f}%" if v.get("change_pct") is not None else "-"
        verdict = v.get("kind") or ""
        status = rec.cell.status if rec.cell.status != "ok" else rec.outcome
        rows.append([_cell_label(rec), _fmt(rec.cell.median), _spread(rec), base, change, doc, kind, floor,
                     status + (f" / {verdict}" if verdict else "")])
    return rows


HEADER = ["cell", "img/s", "spread", "baseline", "change", "documented", "floor kind", "floor", "result"]


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> List[str]:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(header)]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)),
             "  ".join("-" * w for w in widths)]
    for r in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    return lines


def summary_lines(records: Sequence[CellRecord], findings: Sequence[Finding],
                  context: Dict[str, Any]) -> List[str]:
    lines: List[str] = []
    hw = context.get("hardware") or {}
    lines.append(f"machine: {hw.get('cpu_model', '?')}, {hw.get('logical_cpus', '?')} logical CPUs, "
                 f"{hw.get('physical_cores', '?')} physical cores; GPUs: {', '.join(hw.get('gpus') or []) or 'none'}")
    if context.get("machine_id"):
        lines.append(f"machine id: {context['machine_id']}; baseline: {context.get('baseline') or 'none'}")
    if context.get("software"):
        lines.append(f"software: {context['software']}")
    if context.get("env"):
        lines.append(f"worker env: {context['env']}")
    if records:
        lines.append("spread: half the interquartile range of per-process medians (p<n>) or, with one "
                     "process, of per-round samples (r<n>)")
        lines.extend(format_table(HEADER, cell_rows(records)))
        kinds = {rec.floor.kind for rec in records if rec.floor is not None}
        if "legacy-sanity" in kinds:
            lines.append("note: legacy-sanity floors hold this machine to 2016 hardware of the same size; "
                         "they catch catastrophes, not regressions (that is the baseline's job).")
    for f in findings:
        figs = ", ".join(f"{k}={_fmt(v, 3) if isinstance(v, float) else v}" for k, v in f.figures.items())
        lines.append(f"finding [{f.name}] {figs}" + (f" -- {f.note}" if f.note else ""))
    for msg in context.get("messages", []):
        lines.append(msg)
    return lines
