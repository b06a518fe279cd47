"""A session's results document (results.json, as the suite writes it) as rows of the store.

Pure: no database. ``session_rows(doc)`` returns what ``store.append`` writes in one
transaction. A document without a session id (an older results.json) gets one from a
digest of its content, so importing the same file twice stores it once.

The figure a cell's history is drawn from is the *fast end* of its processes
(``FAST_END``, the upper quartile for a figure where higher is better, the lower one where
lower is better): on these shared VMs noise only ever slows a process down (a slow spell of
the machine, a neighbour), so the fast end moves with MXNet and much less with the machine.
The median is kept beside it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from pytest_mxperf.judge.thresholds import FAST_END
from pytest_mxperf.model.measurement import METRICS, cell_of
from pytest_mxperf.model.stats import quantile



class IngestError(ValueError):
    """A results document the store cannot take (one line)."""


@dataclasses.dataclass
class SessionRows:
    session: Dict[str, Any]
    machine: Tuple[str, str]                        # (id, facts as JSON)
    cells: List[Tuple[str, str, str, int]]          # (key, metric, unit, higher_is_better)
    cell_results: List[Tuple[Any, ...]]             # (session, cell, status, median, fast_end, n, floor, published,
    #                                                  nodeid)
    processes: List[Tuple[Any, ...]]                # (session, cell, side, idx, status, figures, facts)
    verdicts: List[Tuple[Any, ...]]                 # (session, figure, cell, kind, change, low, high, reason)
    durations: List[Tuple[Any, ...]] = dataclasses.field(default_factory=list)  # (session, nodeid, seconds)
    spreads: List[Tuple[Any, ...]] = dataclasses.field(default_factory=list)    # (session, family, ss, df)


def _dumps(x: Any) -> str:
    return json.dumps(x, sort_keys=True, default=str)


def _num(x: Any) -> Optional[float]:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def session_id(doc: Mapping[str, Any]) -> str:
    """The session's own id, or a digest of the document (stable for the same file)."""
    sid = (doc.get("session") or {}).get("id")
    if isinstance(sid, str) and sid:
        return sid
    return "doc-" + hashlib.sha256(_dumps(doc).encode()).hexdigest()[:24]


def fast_end(values: List[float], higher_is_better: bool) -> Optional[float]:
    vals = [v for v in (_num(x) for x in values) if v is not None]
    if not vals:
        return None
    return quantile(vals, FAST_END if higher_is_better else 1.0 - FAST_END)


#: the kinds a session says it is (``SessionContext.kind``)
KINDS = ("ab", "recording", "baseline", "paired", "suite")


def _kind(session: Mapping[str, Any]) -> str:
    """The session's own word for its kind; a results.json from before it said one: A/B,
    recording or "suite" (sessions against a baseline were counted as "suite" then)."""
    if session.get("kind") in KINDS:
        return str(session["kind"])
    options = session.get("options") or {}
    if session.get("ab") or options.get("reference"):
        return "ab"
    if options.get("update_baselines"):
        return "recording"
    return "suite"


def _environment(records) -> Dict[str, Any]:
    for rec in records:
        for run in rec.get("runs") or []:
            env = (run.get("meta") or {}).get("env")
            if isinstance(env, dict) and env:
                return env
    return {}


def _merged(records: List[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """One record a cell: a cell that two tests measured is one cell, with both tests'
    processes (as the session judged it)."""
    out: Dict[str, Dict[str, Any]] = {}
    for rec in records:
        key = str(rec["key"])
        if key not in out:
            out[key] = dict(rec)
            continue
        first = out[key]
        for field in ("process_medians", "runs", "reference_runs"):
            if rec.get(field):
                first[field] = list(first.get(field) or []) + list(rec[field])
        if first.get("status") != "ok" and rec.get("status") == "ok":
            first["status"], first["median"] = "ok", rec.get("median")
    return list(out.values())


def session_rows(doc: Mapping[str, Any]) -> SessionRows:
    """The rows of one results document; ``IngestError`` (one line) for a document that
    cannot be read as one, whatever is wrong in it."""
    try:
        return _session_rows(doc)
    except IngestError:
        raise
    except (AttributeError, TypeError, ValueError, KeyError, OverflowError) as exc:
        raise IngestError(f"not a results document this pytest-mxperf can read ({type(exc).__name__}: "
                          f"{(str(exc).splitlines() or [''])[0]})") from None


def _session_rows(doc: Mapping[str, Any]) -> SessionRows:
    if not isinstance(doc, Mapping) or not isinstance(doc.get("records"), list):
        raise IngestError("not a results document (no records)")
    machine = dict(doc.get("machine") or {})
    mid = machine.get("id")
    if not isinstance(mid, str) or not mid:
        raise IngestError("the results document names no machine id")
    session = dict(doc.get("session") or {})
    if not isinstance(session.get("verdicts") or {}, Mapping):
        raise IngestError("its session's verdicts are not an object")
    sid = session_id(doc)
    software = dict(session.get("software") or {})
    records = _merged([r for r in doc["records"] if isinstance(r, Mapping) and r.get("key")])
    ab = session.get("ab") or {}
    started = _num(session.get("started"))
    started = time.time() if started is None else started
    row = {
        "id": sid, "started": started, "kind": _kind(session), "machine_id": mid,
        "mxnet_version": software.get("mxnet_version"),
        "features": _dumps(software.get("features")) if software.get("features") is not None else None,
        "python": software.get("python"), "software": _dumps(software),
        "environment": _dumps(_environment(records)),
        "git_commit": session.get("git_commit"), "ci_run": session.get("ci_run"),
        "fleet_id": session.get("fleet_id"), "shard": session.get("shard"),
        "reference": (ab.get("reference") or {}).get("mxnet_version") if ab else None,
        "complete": 1 if session.get("complete", True) else 0,
        "wall_seconds": _num(session.get("wall_seconds")),
    }
    cells, results, procs = [], [], []
    for rec in records:
        key = str(rec["key"])
        metric = str(rec.get("metric") or "throughput")
        m = METRICS.get(metric)
        higher = m.higher_is_better if m else True
        cells.append((key, metric, str(rec.get("unit") or (m.unit if m else "")), 1 if higher else 0))
        values = rec.get("process_medians") or []
        floor = rec.get("floor") or {}
        results.append((sid, key, str(rec.get("status") or "?"), _num(rec.get("median")), fast_end(values, higher),
                        len(values), _num(floor.get("value")), _num(floor.get("documented")),
                        str(rec["nodeid"]) if rec.get("nodeid") else None))
        for side, runs in (("candidate", rec.get("runs") or []), ("reference", rec.get("reference_runs") or [])):
            for i, run in enumerate(runs):
                figures = dict(run.get("figures") or {})
                if _num(run.get("median")) is not None:
                    figures.setdefault(metric, run["median"])
                procs.append((sid, key, side, i, str(run.get("status") or "?"), _dumps(figures),
                              _dumps(run.get("meta") or {})))
    verdicts = []
    for fkey, v in (session.get("verdicts") or {}).items():
        if not isinstance(v, Mapping):
            continue
        interval = v.get("interval") or (None, None)
        verdicts.append((sid, str(fkey), cell_of(str(fkey)), str(v.get("kind") or "?"), _num(v.get("change")),
                         _num(interval[0]) if interval else None, _num(interval[1]) if interval else None,
                         str(v.get("reason") or "")[:500]))
    took = session.get("test_seconds") or {}
    if not isinstance(took, Mapping):
        took = {}
    durations = [(sid, str(n), float(t)) for n, t in took.items() if _num(t) is not None and t >= 0]
    spreads_doc = session.get("pair_spreads") or {}
    spreads = [(sid, str(f), float(v[0]), int(v[1])) for f, v in
               (spreads_doc.items() if isinstance(spreads_doc, Mapping) else ())
               if isinstance(v, (list, tuple)) and len(v) == 2 and _num(v[0]) is not None and v[0] >= 0
               and isinstance(v[1], int) and not isinstance(v[1], bool) and v[1] > 0]
    facts = {k: v for k, v in machine.items() if k != "id"}
    return SessionRows(row, (mid, _dumps(facts)), cells, results, procs, verdicts, durations, spreads)
