"""The session result JSON (``--perf-report DIR`` writes ``DIR/results.json``).

::

    {"schema": 1, "kind": "pytest-mxperf-results",
     "machine": {...machine_fingerprint()...},
     "session": {"date": ..., "software": {"mxnet_version": ..., ...}, ...free-form...},
     "records": [ CellMeasurement.to_dict() + optional "floor" (dict), "verdict" (dict),
                  "outcome" (str) ]}

``load_results`` validates it and raises ``ResultsError`` with a one-line message naming the
file; ``record_cells`` turns records back into ``CellMeasurement``s.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from pytest_mxperf.model.jsonio import atomic_write_text
from pytest_mxperf.model.measurement import CellMeasurement

SCHEMA_VERSION = 1
KIND = "pytest-mxperf-results"


class ResultsError(ValueError):
    """A results file that cannot be used (one-line message naming the file)."""


def _jsonable(x: Any) -> Any:
    """Replace non-finite floats (not valid JSON) by None, recursively."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def make_record(cell: Union[CellMeasurement, Mapping[str, Any]], *, floor: Optional[Mapping] = None,
                verdict: Any = None, outcome: Optional[str] = None) -> Dict[str, Any]:
    """A record: ``cell.to_dict()`` plus the optional ``floor``, ``verdict`` (Verdict or dict), ``outcome``."""
    rec = cell.to_dict() if isinstance(cell, CellMeasurement) else dict(cell)
    if floor is not None:
        rec["floor"] = dict(floor) if isinstance(floor, Mapping) else getattr(floor, "__dict__", str(floor))
    if verdict is not None:
        rec["verdict"] = verdict.to_dict() if hasattr(verdict, "to_dict") else dict(verdict)
    if outcome is not None:
        rec["outcome"] = str(outcome)
    return rec


def dump_results(path: Union[str, Path], records: Sequence[Union[CellMeasurement, Mapping[str, Any]]],
                 machine: Optional[Mapping[str, Any]], session: Optional[Mapping[str, Any]] = None) -> Path:
    """Write the session's results atomically; ``records`` are dicts (see make_record) or CellMeasurements."""
    path = Path(path)
    doc = {
        "schema": SCHEMA_VERSION,
        "kind": KIND,
        "machine": dict(machine or {}),
        "session": dict(session or {}),
        "records": [make_record(r) for r in records],
    }
    atomic_write_text(path, json.dumps(_jsonable(doc), indent=1, sort_keys=True, default=str) + "\n")
    return path


def load_results(path: Union[str, Path]) -> Dict[str, Any]:
    """Load and validate a results file; ResultsError (one line) for any problem."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ResultsError(f"cannot read results file {path} ({exc.strerror or exc.__class__.__name__})") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        detail = (str(exc).splitlines() or [exc.__class__.__name__])[0][:120]
        raise ResultsError(f"results file {path} is not valid JSON ({detail})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("schema"), int) or isinstance(doc.get("schema"), bool):
        raise ResultsError(f"results file {path} is not a pytest-mxperf results file (no integer 'schema')")
    if doc["schema"] > SCHEMA_VERSION:
        raise ResultsError(f"results file {path} has schema {doc['schema']}, newer than this pytest-mxperf "
                           f"understands ({SCHEMA_VERSION}); upgrade pytest-mxperf")
    if doc["schema"] < 1:
        raise ResultsError(f"results file {path} has unknown schema {doc['schema']}")
    recs = doc.get("records")
    if not isinstance(recs, list) or not all(isinstance(r, dict) for r in recs):
        raise ResultsError(f"results file {path} has no list of record objects")
    for field in ("machine", "session"):
        if not isinstance(doc.get(field) or {}, dict):
            raise ResultsError(f"results file {path} has a '{field}' that is not an object")
    try:
        for r in recs:
            CellMeasurement.from_dict(r)
    except Exception as exc:  # any malformed record
        raise ResultsError(f"results file {path} has a malformed record ({exc.__class__.__name__}: "
                           f"{(str(exc).splitlines() or [''])[0][:100]})") from None
    return doc


def record_cells(doc: Mapping[str, Any]) -> List[CellMeasurement]:
    """The CellMeasurements of a loaded results document, in file order."""
    return [CellMeasurement.from_dict(r) for r in doc.get("records", [])]


def records_by_key(doc: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """key -> record (the last one wins when a key repeats)."""
    out = {}
    for r in doc.get("records", []):
        key = r.get("key") or CellMeasurement.from_dict(r).workload.key()
        out[key] = r
    return out


#: verdict kinds that fail a session by default, then the ones worth a line, in that order
_FAILING = ("regression", "unresolved")
_NOTABLE = ("suspect", "below-resolution", "unclear", "improvement")


def _pct(change: Optional[float]) -> str:
    return "-" if change is None else f"{100.0 * change:+.1f}%"


def _num(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.4g}"


def markdown_summary(doc: Mapping[str, Any], *, final: bool = True) -> List[str]:
    """A session as markdown for a CI job summary or a pull-request comment: failures first
    (regressions, unresolved slowdowns, cells below their floor, cells that did not measure),
    then the other changes, then how many figures were unchanged."""
    session = doc.get("session") or {}
    verdicts: Mapping[str, Mapping[str, Any]] = session.get("verdicts") or {}
    ab = session.get("ab") or {}
    mode = "A/B" if ab else "baseline"
    lines = ["## pytest-mxperf" + ("" if final else " (in progress: verdicts so far, before confirmation)")]
    if ab:
        sides = [f"{side} mxnet {(ab.get(side) or {}).get('mxnet_version', '?')}" for side in ("candidate", "reference")]
        lines.append(f"A/B: {' vs '.join(sides)}")
    for line in session.get("headline") or []:  # undecided slowdowns and the resolution, first
        lines.append(f"> {line.strip()}")
    header = ["cell", "unit", "now", "reference" if ab else "baseline", "change", "interval", "verdict"]
    failing, notable, unchanged = [], [], 0
    for key in sorted(verdicts):
        v = verdicts[key]
        kind = v.get("kind")
        interval = v.get("interval")
        row = [f"`{key}`", str(v.get("unit") or ""), _num(v.get("current_median")), _num(v.get("baseline_median")),
               _pct(v.get("change")), f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "-", f"**{kind}**"]
        if kind in _FAILING:
            failing.append(row)
        elif kind in _NOTABLE:
            notable.append(row)
        elif kind == "unchanged":
            unchanged += 1
    for rec in doc.get("records") or []:
        floor = rec.get("floor") or {}
        if rec.get("status") != "ok":
            failing.append([f"`{rec.get('key')}`", "", "-", "-", "-", "-",
                            f"**{rec.get('status')}**: {str(rec.get('message') or '').splitlines()[0][:120] if rec.get('message') else ''}"])
        elif rec.get("outcome") == "failed" and floor.get("value") is not None:
            failing.append([f"`{rec.get('key')}`", str(rec.get("unit") or ""), _num(rec.get("median")),
                            f"floor {_num(floor.get('value'))}", "-", "-", "**below floor**"])

    def table(rows):
        return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                + ["| " + " | ".join(r) + " |" for r in rows])
    if failing:
        lines += ["", f"### Failing ({len(failing)})", ""] + table(failing)
    if notable:
        lines += ["", f"### Changes ({len(notable)})", ""] + table(notable)
    lines += ["", f"{unchanged} figure(s) unchanged ({mode} mode); {len(doc.get('records') or [])} cell(s) measured."]
    if session.get("not_reached"):
        lines.append(f"{len(session['not_reached'])} measuring test(s) not reached before the deadline.")
    return lines
