"""The baseline store: one human-readable JSON file per machine fingerprint.

``<baselines dir>/<machine id>.json``::

    {
      "schema": 1,
      "machine_id": "intel-xeon-processor-2c-4a84bda4",
      "machine": {...fingerprint "hardware" of the last recording...},
      "updated": "2026-11-22T02:40:00+00:00",
      "cells": {
        "score/resnet50_v2/b8/cpu:0/float32/threads=auto": {
          "workload": {...Workload.to_dict()...},
          "history": [ {recording}, ... ]        # oldest first, at most HISTORY (5) kept
        }, ...
      }
    }

A recording (one session) holds the per-process values of the cell's primary figure in
``process_medians`` (the unit of replication, what verdicts use; its ``metric`` and
``unit`` say what they are), the per-process values of its other figures in ``figures``
(e.g. peak memory, latency p50), each process's machine-state label and calibration probe
(``process_states``, ``process_probes``: see machine_state.py), their median and
between-process spread, a summary of all per-round samples, the date, MXNet version and
software facts, the recorded environment and thread pools, peak memory, and bind +
first-batch seconds, and the cell's small operator profile (``profile``: the top operators of
one untimed ``mx.profiler`` run, see profiles.py) that a later failure is shown beside. ``pool`` is how it is compared: ``replace`` (the default) starts a new
comparison set; ``add`` (``--perf-update-baselines=add``) pools its processes with the
recordings since the last ``replace``, so a baseline can span sessions (and a VM's speed
regimes). The medians of all recorded sessions give the cell's trend in the report.

What the baseline states about itself (additions to schema 1, which older readers ignore):
each recording carries ``resolution``, per judged figure (``{"throughput": {...}}``) the
smallest change this machine can resolve for it (``verdict.Resolution``), computed when it
is recorded over the comparison set it closes: from the spread of the recorded sessions'
medians when it pools several (``add``), else provisional, from the spread of its processes
(``"provisional": true``: how far the machine drifts between sessions is unknown). Files
recorded before resolutions were stored get theirs computed the same way when read
(``cell_resolution``). Each recording also carries ``mxnet_requirement`` (e.g.
``"mxnet==1.9.1"``: the MXNet distribution installed for the interpreter that measured it),
and the file the newest one, so that an A/B run can be made against exactly that install
(``recorded_requirement``). Keys are sorted and indented so that a change reads well in
``git diff``.

Writes are atomic (temporary file in the same directory, fsync, ``os.replace``) and
serialised with ``filelock.FileLock("<file>.lock")``; ``update`` merges (cells not
measured keep their history). A file that is corrupt, of an unknown or newer schema, or
unreadable raises ``BaselineError`` with a one-line message naming the file and what to do,
and is never overwritten (``update`` refuses too).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import statistics
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from pytest_mxperf.judge import resolution
from pytest_mxperf.model.measurement import METRICS

SCHEMA_VERSION = 1
HISTORY = 5
LOCK_TIMEOUT = 120.0
DEFAULT_DIRNAME = "baselines"

PathLike = Union[str, os.PathLike]


class BaselineError(Exception):
    """A baseline file that cannot be used (one-line message naming the file and the fix)."""


def default_dir() -> Path:
    """``./baselines`` relative to the current directory (the plugin passes its rootdir's)."""
    return Path.cwd() / DEFAULT_DIRNAME


def baseline_path(machine_id: str, baselines_dir: Optional[PathLike] = None) -> Path:
    from pytest_mxperf.machine.fingerprint import validate_machine_name
    try:
        validate_machine_name(machine_id)
    except ValueError as exc:
        raise BaselineError(str(exc)) from None
    return Path(baselines_dir if baselines_dir is not None else default_dir()) / f"{machine_id}.json"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ----------------------------------------------------------------------------- loading

def _num_or_none(x) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x))


def _validate(doc: Any, path: Path) -> Dict[str, Any]:
    fix = "restore it from version control (git checkout -- FILE) or delete it and re-record with --perf-update-baselines"

    def bad(what: str) -> BaselineError:
        return BaselineError(f"baseline file {path} is malformed ({what}); {fix.replace('FILE', str(path))}")

    if not isinstance(doc, dict):
        raise bad("top level is not an object")
    schema = doc.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise bad("no integer 'schema' field")
    if schema > SCHEMA_VERSION:
        raise BaselineError(f"baseline file {path} has schema {schema}, newer than this pytest-mxperf "
                            f"understands ({SCHEMA_VERSION}); upgrade pytest-mxperf or use another --perf-baselines-dir")
    if schema < 1:
        raise BaselineError(f"baseline file {path} has unknown schema {schema}; delete it and re-record "
                            "with --perf-update-baselines")
    cells = doc.get("cells", {})
    if not isinstance(cells, dict):
        raise bad("'cells' is not an object")
    for key, entry in cells.items():
        if not isinstance(entry, dict):
            raise bad(f"cell {key!r} is not an object")
        if not isinstance(entry.get("workload", {}), dict):
            raise bad(f"cell {key!r} has no workload object")
        hist = entry.get("history", [])
        if not isinstance(hist, list):
            raise bad(f"cell {key!r} history is not a list")
        for rec in hist:
            if not isinstance(rec, dict):
                raise bad(f"cell {key!r} has a recording that is not an object")
            pm = rec.get("process_medians", [])
            if not isinstance(pm, list) or not all(_num_or_none(v) and v is not None for v in pm):
                raise bad(f"cell {key!r} has non-numeric process_medians")
            cs = rec.get("process_cpu_share")
            if cs is not None and (not isinstance(cs, list) or not all(_num_or_none(v) for v in cs)):
                raise bad(f"cell {key!r} has non-numeric process_cpu_share")
            figs = rec.get("figures")
            if figs is not None and (not isinstance(figs, dict) or not all(
                    isinstance(v, list) and all(_num_or_none(x) and x is not None for x in v) for v in figs.values())):
                raise bad(f"cell {key!r} has figures that are not lists of numbers")
            if rec.get("pool") not in (None, "replace", "add"):
                raise bad(f"cell {key!r} has an unknown pool {rec.get('pool')!r}")
            for f in ("median", "peak_rss_bytes", "bind_seconds", "first_batch_seconds"):
                if not _num_or_none(rec.get(f)):
                    raise bad(f"cell {key!r} has a non-numeric {f}")
            for f in ("env", "software", "spread", "rounds", "threads", "profile", "resolution"):
                if rec.get(f) is not None and not isinstance(rec.get(f), dict):
                    raise bad(f"cell {key!r} has a {f} that is not an object")
            if rec.get("mxnet_requirement") is not None and not isinstance(rec.get("mxnet_requirement"), str):
                raise bad(f"cell {key!r} has an mxnet_requirement that is not a string")
    if not isinstance(doc.get("machine", {}), dict):
        raise bad("'machine' is not an object")
    if doc.get("mxnet_requirement") is not None and not isinstance(doc.get("mxnet_requirement"), str):
        raise bad("'mxnet_requirement' is not a string")
    return doc


def load_path(path: PathLike) -> Dict[str, Any]:
    """Load and validate one baseline file. Raises BaselineError (one line) for any problem."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise BaselineError(f"baseline file {path} does not exist; record one with --perf-update-baselines") from None
    except OSError as exc:
        raise BaselineError(f"cannot read baseline file {path} ({exc.strerror or exc.__class__.__name__}); "
                            "check that it is a readable file") from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        detail = str(exc).splitlines()[0][:120] if str(exc) else exc.__class__.__name__
        raise BaselineError(f"baseline file {path} is corrupt (not valid JSON: {detail}); restore it from version "
                            f"control (git checkout -- {path}) or delete it and re-record with --perf-update-baselines"
                            ) from None
    try:
        return _validate(doc, path)
    except RecursionError:
        raise BaselineError(f"baseline file {path} is malformed (nested too deeply); delete it and re-record") from None


def load(machine_id: str, baselines_dir: Optional[PathLike] = None) -> Optional[Dict[str, Any]]:
    """The baseline document for ``machine_id``, or None when there is no file yet."""
    path = baseline_path(machine_id, baselines_dir)
    if not path.exists() and not path.is_symlink():
        return None
    return load_path(path)


def latest_recording(doc: Optional[Mapping[str, Any]], key: str) -> Optional[Dict[str, Any]]:
    """The newest recording of cell ``key`` that has per-process medians, or None."""
    recs = comparison_set(doc, key)
    return recs[-1] if recs else None


def _history(doc: Optional[Mapping[str, Any]], key: str) -> List[Dict[str, Any]]:
    if not doc:
        return []
    entry = (doc.get("cells") or {}).get(key) or {}
    return [r for r in entry.get("history") or [] if r.get("process_medians")]


def comparison_set(doc: Optional[Mapping[str, Any]], key: str) -> List[Dict[str, Any]]:
    """The recordings a run of ``key`` is compared with: the newest one, and the ones before
    it back to the last that started a pool (``pool`` "replace" or unset)."""
    hist = _history(doc, key)
    out: List[Dict[str, Any]] = []
    for rec in reversed(hist):
        out.insert(0, rec)
        if rec.get("pool") != "add":
            break
    return out


def _rec_values(rec: Mapping[str, Any], metric: Optional[str]) -> List[float]:
    """One recording's per-process values of ``metric`` (None = the cell's primary figure).
    A recording made before ``figures`` existed gives its peak memory as one value."""
    if metric is None or metric == rec.get("metric"):
        return list(rec["process_medians"])
    figs = rec.get("figures") or {}
    if metric in figs:
        return list(figs[metric])
    if metric == "peak_rss_mib" and isinstance(rec.get("peak_rss_bytes"), (int, float)):
        return [rec["peak_rss_bytes"] / 2 ** 20]
    return []


def baseline_values(doc: Optional[Mapping[str, Any]], key: str, metric: Optional[str] = None
                    ) -> Optional[List[float]]:
    """Per-process values of ``metric`` (default: the primary figure) over the comparison set."""
    out = [v for rec in comparison_set(doc, key) for v in _rec_values(rec, metric)]
    return out or None


def baseline_states(doc: Optional[Mapping[str, Any]], key: str) -> Optional[List[Optional[str]]]:
    """Machine-state labels aligned with ``baseline_values(doc, key)`` (None where unknown)."""
    recs = comparison_set(doc, key)
    if not recs:
        return None
    out: List[Optional[str]] = []
    for rec in recs:
        st = rec.get("process_states")
        n = len(rec["process_medians"])
        out.extend(st if isinstance(st, list) and len(st) == n else [None] * n)
    return out


def session_medians(doc: Optional[Mapping[str, Any]], key: str, metric: Optional[str] = None) -> List[float]:
    """The cell's median in each recorded session (oldest first): its trend."""
    return [statistics.median(v) for v in (_rec_values(r, metric) for r in _history(doc, key)) if v]


# ----------------------------------------------------------------------------- resolution

def comparison_sessions(doc: Optional[Mapping[str, Any]], key: str, metric: Optional[str] = None
                        ) -> List[List[float]]:
    """Per recording of the comparison set (oldest first), the per-process values of
    ``metric`` (default: the primary figure) of the processes not labelled "slowed" when
    they were recorded."""
    out = []
    for rec in comparison_set(doc, key):
        values = _rec_values(rec, metric)
        states = rec.get("process_states")
        if isinstance(states, list) and len(states) == len(values):
            values = [v for v, st in zip(values, states) if st != "slowed"]
        out.append(values)
    return out


def compute_resolution(doc: Optional[Mapping[str, Any]], key: str, metric: Optional[str] = None
                       ) -> Optional["resolution.Resolution"]:
    """The resolution of a figure from the recordings it is compared with (see
    ``verdict.Resolution``); None when they hold fewer than two processes."""
    return resolution.resolution_of(comparison_sessions(doc, key, metric))


def _primary(rec: Mapping[str, Any]) -> str:
    return rec.get("metric") or "throughput"


def cell_resolution(doc: Optional[Mapping[str, Any]], key: str, metric: Optional[str] = None
                    ) -> Optional["resolution.Resolution"]:
    """The resolution the baseline states for a figure of cell ``key`` (default: its primary
    figure): stored with the newest recording of its comparison set, or, for a file recorded
    before resolutions were stored (or one whose entry is unusable), computed the same way
    from its recordings."""
    recs = comparison_set(doc, key)
    if not recs:
        return None
    newest = recs[-1]
    name = metric or _primary(newest)
    stored = (newest.get("resolution") or {}).get(name) if isinstance(newest.get("resolution"), dict) else None
    return resolution.Resolution.from_dict(stored) or compute_resolution(doc, key, None if name == _primary(newest)
                                                                  else name)


def _judged_by_processes(rec: Mapping[str, Any]) -> List[str]:
    names = [_primary(rec)] + sorted((rec.get("figures") or {}).keys())
    return [n for n in dict.fromkeys(names) if n in METRICS and METRICS[n].rule == "processes"]


def annotate_resolution(doc: Dict[str, Any], key: str) -> None:
    """Store the resolution of every figure of cell ``key`` judged by the processes rule
    with its newest recording (over the comparison set that recording closes)."""
    hist = ((doc.get("cells") or {}).get(key) or {}).get("history") or []
    if not hist or not hist[-1].get("process_medians"):
        return
    newest = hist[-1]
    out = {}
    for name in _judged_by_processes(newest):
        res = compute_resolution(doc, key, None if name == _primary(newest) else name)
        if res is not None:
            out[name] = res.to_dict(METRICS[name].higher_is_better)
    newest["resolution"] = out


def resolution_summary(doc: Optional[Mapping[str, Any]], keys: Optional[Iterable[str]] = None
                       ) -> Dict[str, Any]:
    """What the baseline says about this machine's resolution, over the primary figures of
    ``keys`` (default: every cell): {"cells", "provisional" (cells whose resolution rests on
    one session), "sessions" (most pooled sessions of a cell), "median", "largest" (fraction),
    "largest_key"}."""
    doc = doc or {}
    keys = list(keys) if keys is not None else sorted((doc.get("cells") or {}))
    values, provisional, sessions, largest = [], 0, 0, (None, -1.0)
    for key in keys:
        recs = comparison_set(doc, key)
        res = cell_resolution(doc, key)
        if res is None or not recs:
            continue
        metric = METRICS.get(_primary(recs[-1]))
        frac = res.fraction(metric.higher_is_better if metric else True)
        values.append(frac)
        provisional += res.provisional
        sessions = max(sessions, res.sessions)
        if frac > largest[1]:
            largest = (key, frac)
    return {"cells": len(values), "provisional": provisional, "sessions": sessions,
            "median": statistics.median(values) if values else None,
            "largest": largest[1] if values else None, "largest_key": largest[0]}


# ----------------------------------------------------------------------------- the recorded install

def recorded_requirements(doc: Optional[Mapping[str, Any]], keys: Optional[Iterable[str]] = None
                          ) -> Dict[str, List[str]]:
    """requirement (e.g. "mxnet==1.9.1") -> the cells (of ``keys``, default all) whose
    comparison sets were recorded with it. Recordings made before requirements were stored
    say nothing and are left out."""
    doc = doc or {}
    keys = list(keys) if keys is not None else sorted((doc.get("cells") or {}))
    out: Dict[str, List[str]] = {}
    for key in keys:
        for req in dict.fromkeys(r.get("mxnet_requirement") for r in comparison_set(doc, key)):
            if isinstance(req, str) and req:
                out.setdefault(req, []).append(key)
    return out


def recorded_requirement(doc: Optional[Mapping[str, Any]], keys: Optional[Iterable[str]] = None,
                         path: Any = None) -> Optional[str]:
    """The MXNet requirement the baseline of ``keys`` (default: every cell) was measured
    with, e.g. "mxnet==1.9.1", for an A/B run against exactly that install; None when it
    was recorded before requirements were stored. Raises BaselineError (one line) when the
    cells were recorded with different installs."""
    reqs = recorded_requirements(doc, keys)
    if len(reqs) > 1:
        parts = ", ".join(f"{r} ({len(k)} cell(s), e.g. {k[0]})" for r, k in sorted(reqs.items()))
        raise BaselineError(f"baseline {path or (doc or {}).get('machine_id') or ''} was recorded with more than "
                            f"one MXNet install: {parts}; select cells of one, or re-record them")
    return next(iter(reqs), None)


def baseline_profile(doc: Optional[Mapping[str, Any]], key: str) -> Optional[Dict[str, Any]]:
    """The newest operator profile (``kept_profiles.summary``) kept with the recordings a run of
    ``key`` is compared with, or None."""
    for rec in reversed(comparison_set(doc, key)):
        prof = rec.get("profile")
        if isinstance(prof, dict) and isinstance(prof.get("operators"), list):
            return dict(prof, date=rec.get("date"))
    return None


