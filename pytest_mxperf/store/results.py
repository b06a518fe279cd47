"""The session result JSON (``--perf-report DIR`` writes ``DIR/results.json``), and
``Results``, the class that owns its format.

::

    {"schema": 1, "kind": "pytest-mxperf-results",
     "machine": {...machine_fingerprint()...},
     "session": {"date": ..., "software": {"mxnet_version": ..., ...}, ...free-form...},
     "records": [ CellMeasurement.to_dict() + optional "floor" (dict), "verdict" (dict),
                  "outcome" (str) ]}

``Results.load`` checks (and migrates) a file and raises ``ResultsError`` with a one-line
message naming it; ``Results.dump`` writes one atomically; ``Results.cells`` turns the
records back into ``CellMeasurement``s; ``Results.markdown_summary`` is the session as a CI
job summary. Where a plain document is the interface (the ``pytest_mxperf_update_results``
hook, the history store's ``append``), ``Results.from_doc(doc)`` and ``Results.doc`` cross it.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Union

from pytest_mxperf.model.jsonio import atomic_write_text
from pytest_mxperf.model.measurement import CellMeasurement

SCHEMA_VERSION = 1
KIND = "pytest-mxperf-results"

#: schema n -> the function that turns a document of schema n into one of schema n + 1,
#: applied on loading before the document is checked (none yet: schema 1 is the first)
MIGRATIONS: Dict[int, Callable[[Dict[str, Any]], Dict[str, Any]]] = {}


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


class Results:
    """One session's results (results.json): the machine, the session's facts, and a record
    per cell (``make_record``). Made from records (``Results(records, machine, session)``),
    from a document (``from_doc``) or from a file (``load``); written with ``dump``."""

    def __init__(self, records: Iterable[Union[CellMeasurement, Mapping[str, Any]]] = (),
                 machine: Optional[Mapping[str, Any]] = None, session: Optional[Mapping[str, Any]] = None):
        self.doc: Dict[str, Any] = {"schema": SCHEMA_VERSION, "kind": KIND, "machine": dict(machine or {}),
                                    "session": dict(session or {}), "records": [make_record(r) for r in records]}

    @classmethod
    def from_doc(cls, doc: Dict[str, Any]) -> "Results":
        """The results of a document in memory (not copied: ``doc`` is what ``.doc`` gives back),
        e.g. the one the ``pytest_mxperf_update_results`` hook was given."""
        out = cls.__new__(cls)
        out.doc = doc
        return out

    @classmethod
    def load(cls, path: Union[str, Path]) -> "Results":
        """Load, migrate and check a results file; ResultsError (one line) for any problem."""
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
        while doc["schema"] < SCHEMA_VERSION:
            doc = dict(MIGRATIONS[doc["schema"]](doc), schema=doc["schema"] + 1)
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
        return cls.from_doc(doc)

    def dump(self, path: Union[str, Path]) -> Path:
        """Write the results atomically to ``path`` (non-finite numbers as null); returns it."""
        path = Path(path)
        doc = {
            "schema": SCHEMA_VERSION,
            "kind": KIND,
            "machine": dict(self.machine),
            "session": dict(self.session),
            "records": [make_record(r) for r in self.records],
        }
        atomic_write_text(path, json.dumps(_jsonable(doc), indent=1, sort_keys=True, default=str) + "\n")
        return path

    # -- what it holds

    @property
    def machine(self) -> Dict[str, Any]:
        """The machine's fingerprint ({} when the document has none)."""
        return self.doc.get("machine") or {}

    @property
    def machine_id(self) -> Optional[str]:
        return self.machine.get("id")

    @property
    def session(self) -> Dict[str, Any]:
        """The session's facts: id, software, options, verdicts, headline, profiles, ..."""
        return self.doc.get("session") or {}

    @property
    def software(self) -> Optional[Dict[str, Any]]:
        """What the workers ran with (mxnet_version, features, python, ...)."""
        return self.session.get("software")

    @property
    def profiles(self) -> Dict[str, Any]:
        """The operator profiles of the session (a --perf-profile run's), per cell key."""
        return self.session.get("profiles") or {}

    @property
    def date(self) -> Optional[str]:
        """When the session ran, as an ISO date (its ``date``, else its ``started`` stamp)."""
        date = self.session.get("date") or self.session.get("started")
        if isinstance(date, (int, float)) and not isinstance(date, bool):  # a time.time() stamp
            return _dt.datetime.fromtimestamp(date, _dt.timezone.utc).isoformat(timespec="seconds")
        return date if isinstance(date, str) else None

    @property
    def records(self) -> List[Dict[str, Any]]:
        """The records (``make_record``), in file order."""
        return self.doc.get("records") or []

    def cells(self) -> List[CellMeasurement]:
        """The CellMeasurements of the records, in file order."""
        return [CellMeasurement.from_dict(r) for r in self.records]

    def by_key(self) -> Dict[str, Dict[str, Any]]:
        """key -> record (the last one wins when a key repeats)."""
        out = {}
        for r in self.records:
            key = r.get("key") or CellMeasurement.from_dict(r).workload.key()
            out[key] = r
        return out

    def markdown_summary(self, *, final: bool = True) -> List[str]:
        """The session as markdown for a CI job summary or a pull-request comment: failures first
        (regressions, unresolved slowdowns, cells below their floor, cells that did not measure),
        then the other changes, then how many figures were unchanged."""
        return _markdown_summary(self.session, self.records, final)


def load_results(path: Union[str, Path]) -> Dict[str, Any]:
    """``Results.load(path).doc``: the checked document (for ``history/__main__.py``, whose
    history store appends documents)."""
    return Results.load(path).doc


def markdown_summary(doc: Dict[str, Any], *, final: bool = True) -> List[str]:
    """``Results.from_doc(doc).markdown_summary(final=final)`` (for ``history/__main__.py``)."""
    return Results.from_doc(doc).markdown_summary(final=final)


#: verdict kinds that fail a session by default, then the ones worth a line, in that order
_FAILING = ("regression", "unresolved")
_NOTABLE = ("suspect", "below-resolution", "unclear", "unexplained", "machine-differs", "system-differs",
            "improvement")
#: record statuses of a cell this machine or build cannot run (its test skips): not a failure
_NOT_HERE = ("unsupported", "unavailable")


def _pct(change: Optional[float]) -> str:
    return "-" if change is None else f"{100.0 * change:+.1f}%"


def _num(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.4g}"


def _markdown_summary(session: Mapping[str, Any], records: List[Mapping[str, Any]], final: bool) -> List[str]:
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
    not_here = []
    for rec in records:
        floor = rec.get("floor") or {}
        if rec.get("status") in _NOT_HERE:  # a skipped test: this machine or build cannot run the cell
            not_here.append(f"`{rec.get('key')}` ({rec.get('status')})")
        elif rec.get("status") != "ok":
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
    measured = sum(rec.get("status") == "ok" for rec in records)
    lines += ["", f"{unchanged} figure(s) unchanged ({mode} mode); {measured} cell(s) measured."]
    if not_here:
        lines.append(f"{len(not_here)} cell(s) not measurable here (skipped, not failing): {', '.join(not_here)}")
    if session.get("not_reached"):
        lines.append(f"{len(session['not_reached'])} measuring test(s) not reached before the deadline.")
    return lines
