"""A machine's baseline file, one human-readable JSON file per machine fingerprint, and
``Baseline``, the class that owns its format: loading (checked, migrated, refused in one
line), what it holds (per cell key: the values, states, trend, resolution, profile and
install of the recordings a run is compared with) and its document written back.

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
(``process_states``, ``process_probes``: see machine/state.py and judge/machine_states.py), their median and
between-process spread, a summary of all per-round samples, the date, MXNet version and
software facts, the recorded environment and thread pools, peak memory, and bind +
first-batch seconds, and, where kept, the cell's small operator profile (``profile``: the top
operators of one untimed ``mx.profiler`` run, see store/kept_profiles.py) that a later failure is
shown beside: kept for a custom build, which a later session cannot rebuild
(``outcome/finish.keeps_profiles``), or with ``--perf-profile``. ``pool`` is how it is compared: ``replace`` (the default) starts a new
comparison set; ``add`` (``--perf-update-baselines=add``) pools its processes with the
recordings since the last ``replace``, so a baseline can span sessions (and a VM's speed
regimes). The medians of all recorded sessions give the cell's trend in the report.

What the baseline states about itself (additions to schema 1, which older readers ignore):
each recording carries ``resolution``, per judged figure (``{"throughput": {...}}``) the
smallest change this machine can resolve for it (``resolution.Resolution``), computed when it
is recorded over the comparison set it closes: from the spread of the recorded sessions'
medians when it pools several (``add``), else provisional, from the spread of its processes
(``"provisional": true``: how far the machine drifts between sessions is unknown). Files
recorded before resolutions were stored get theirs computed the same way when read
(``Baseline.resolution``). Each recording also carries ``mxnet_requirement`` (e.g.
``"mxnet==1.9.1"``: the MXNet distribution installed for the interpreter that measured it),
and the file the newest one, so that an A/B run can be made against exactly that install
(``Baseline.recorded_requirement``). Keys are sorted and indented so that a change reads well in
``git diff``.

Writes (``baseline_store.py``: read, ``Baseline.add_recordings``, ``Baseline.dumps``) are
atomic (temporary file in the same directory, fsync, ``os.replace``) and serialised with
``filelock.FileLock("<file>.lock")``; ``update`` merges (cells not measured keep their
history). A file that is corrupt, of an unknown or newer schema, or
unreadable raises ``BaselineError`` with a one-line message naming the file and what to do,
and is never overwritten (``update`` refuses too).
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import math
import os
import re
import statistics
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from pytest_mxperf.judge import machine_states, resolution
from pytest_mxperf.model.measurement import METRICS, memory_method

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


# ----------------------------------------------------------------------------- the format

#: schema n -> the function that turns a document of schema n into one of schema n + 1,
#: applied on loading before the document is checked. None yet: schema 1 is the first, and
#: the older forms of schema 1 (recordings without ``figures``, ``metric``, ``resolution``,
#: ``mxnet_requirement``, ``process_states`` or ``process_probes``) are read as they are by
#: ``Baseline``'s accessors; nothing is rewritten.
MIGRATIONS: Dict[int, Callable[[Dict[str, Any]], Dict[str, Any]]] = {}


def _num_or_none(x) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x))


#: what makes two recorded installs the same build (``Baseline.recorded_install``)
INSTALL_IDENTITY = ("name", "version", "libmxnet_sha256")
#: the fields of a recorded install and the types they may have (None: not known)
INSTALL_FIELDS = {"name": str, "version": str, "direct_url": dict, "libmxnet": str, "libmxnet_sha256": str,
                  "numpy_version": str, "features": list}


def _bad_install(inst: Any) -> Optional[str]:
    """Why a recording's ``install`` cannot be trusted (a few words), or None."""
    if inst is None:
        return None
    if not isinstance(inst, dict):
        return "that is not an object"
    for f, kind in INSTALL_FIELDS.items():
        if inst.get(f) is not None and not isinstance(inst.get(f), kind):
            return f"whose {f} is not a {kind.__name__}"
    sha = inst.get("libmxnet_sha256")
    if sha is not None and not re.fullmatch(r"[0-9a-f]{64}", sha):
        return "whose libmxnet_sha256 is not a sha256"
    return None


#: a recorded process's probe record (``process_probes``): its probes' and its load's figures
PROBE_FIGURES = ("gemm_gflops", "stream_gbps", "seconds")
LOAD_FIGURES = ("other_cpus", "steal_frac", "wall_s")
#: a recorded workload's fields and their types
WORKLOAD_FIELDS = {"model": str, "mode": str, "batch_size": int, "dtype": str, "contexts": list}


def _bad_numbers(d: Any, names: Sequence[str]) -> Optional[str]:
    if d is None:
        return None
    if not isinstance(d, dict):
        return "is not an object"
    for f in names:
        v = d.get(f)
        if v is not None and not (_num_or_none(v) and v >= 0):
            return f"has a {f} that is not a finite number >= 0"
    return None


def _bad_probe_record(ms: Any) -> Optional[str]:
    """Why one recorded process's probe record cannot be trusted (a few words), or None."""
    if ms is None:
        return None
    if not isinstance(ms, dict):
        return "that is not an object"
    for part in ("probe_before", "probe_after"):
        why = _bad_numbers(ms.get(part), PROBE_FIGURES)
        if why:
            return f"whose {part} {why}"
        setup = (ms.get(part) or {}).get("setup")
        if setup is not None and not isinstance(setup, dict):
            return f"whose {part} setup is not an object"
    why = _bad_numbers(ms.get("load"), LOAD_FIGURES)
    return f"whose load {why}" if why else None


def _bad_workload(w: Any) -> Optional[str]:
    if not isinstance(w, dict):
        return "is not an object"
    for f, kind in WORKLOAD_FIELDS.items():
        v = w.get(f)
        if v is not None and (not isinstance(v, kind) or isinstance(v, bool)):
            return f"has a {f} that is not a {kind.__name__}"
    if isinstance(w.get("batch_size"), int) and w["batch_size"] < 1:
        return "has a batch_size below 1"
    return None


def _nonfinite(x: Any, where: str = "") -> Optional[str]:
    """Where (``a.b[2]``) the first number that is not finite lies in a JSON value, or None:
    a baseline is JSON, which has none (its writer refuses them), so a file with one was not
    written by this suite."""
    if isinstance(x, float) and not math.isfinite(x):
        return where or "the top level"
    if isinstance(x, dict):
        for k, v in x.items():
            got = _nonfinite(v, f"{where}.{k}" if where else str(k))
            if got:
                return got
    elif isinstance(x, list):
        for i, v in enumerate(x):
            got = _nonfinite(v, f"{where}[{i}]")
            if got:
                return got
    return None


def _where(path: Optional[PathLike]) -> str:
    return f"baseline file {path}" if path is not None else "baseline document"


def _checked(doc: Any, path: Optional[PathLike]) -> Dict[str, Any]:
    """The document of a schema this code reads, migrated to SCHEMA_VERSION and checked;
    BaselineError (one line) otherwise."""
    where = _where(path)
    fix = (f"restore it from version control (git checkout -- {path}) or delete it and re-record with "
           "--perf-update-baselines" if path is not None else "re-record it with --perf-update-baselines")

    def bad(what: str) -> BaselineError:  # one line, whatever the file's keys hold
        what = what.replace("\r", "\\r").replace("\n", "\\n")
        return BaselineError(f"{where} is malformed ({what}); {fix}")

    if not isinstance(doc, dict):
        raise bad("top level is not an object")
    schema = doc.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise bad("no integer 'schema' field")
    if schema > SCHEMA_VERSION:
        raise BaselineError(f"{where} has schema {schema}, newer than this pytest-mxperf "
                            f"understands ({SCHEMA_VERSION}); upgrade pytest-mxperf or use another --perf-baselines-dir")
    if schema < 1:
        raise BaselineError(f"{where} has unknown schema {schema}; delete it and re-record "
                            "with --perf-update-baselines")
    while schema < SCHEMA_VERSION:
        doc = dict(MIGRATIONS[schema](doc), schema=schema + 1)
        schema += 1
    cells = doc.get("cells", {})
    if not isinstance(cells, dict):
        raise bad("'cells' is not an object")
    odd = _nonfinite(doc)
    if odd:
        raise bad(f"a number that is not finite at {odd[:120]}")
    for key, entry in cells.items():
        if not isinstance(entry, dict):
            raise bad(f"cell {key!r} is not an object")
        why = _bad_workload(entry.get("workload", {}))
        if why:
            raise bad(f"cell {key!r} workload {why}")
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
            why = _bad_install(rec.get("install"))
            if why:
                raise bad(f"cell {key!r} has an install {why}")
            probes = rec.get("process_probes")
            if probes is not None and not isinstance(probes, list):
                raise bad(f"cell {key!r} has process_probes that are not a list")
            for ms in probes or []:
                why = _bad_probe_record(ms)
                if why:
                    raise bad(f"cell {key!r} has a process probe {why}")
            states = rec.get("process_states")
            if states is not None and (not isinstance(states, list)
                                       or not all(st is None or isinstance(st, str) for st in states)):
                raise bad(f"cell {key!r} has process_states that are not a list of labels")
            env = rec.get("env")
            if isinstance(env, dict) and not all(isinstance(v, str) for v in env.values()):
                raise bad(f"cell {key!r} has an env whose values are not all strings")
            for f in ("answers",):
                if rec.get(f) is not None and not isinstance(rec.get(f), list):
                    raise bad(f"cell {key!r} has {f} that are not a list")
            for f in ("suite",):
                if rec.get(f) is not None and not isinstance(rec.get(f), dict):
                    raise bad(f"cell {key!r} has a {f} that is not an object")
            for f in ("date", "mxnet_version", "metric", "unit"):
                if rec.get(f) is not None and not isinstance(rec.get(f), str):
                    raise bad(f"cell {key!r} has a {f} that is not a string")
    if not isinstance(doc.get("machine", {}), dict):
        raise bad("'machine' is not an object")
    if doc.get("mxnet_requirement") is not None and not isinstance(doc.get("mxnet_requirement"), str):
        raise bad("'mxnet_requirement' is not a string")
    return doc


def _rec_values(rec: Mapping[str, Any], metric: Optional[str], key: str,
                processes: Optional[str] = None) -> List[float]:
    """One recording of cell ``key``: its per-process values of ``metric`` (None = the cell's
    primary figure). Its memory figure only when it was read the way this suite reads that
    cell's when its processes are had as ``processes`` (None: as the recording's were;
    ``measurement.memory_method``): a recording whose memory counted the mapped libraries,
    or what earlier cells in its process had freed, gives none, and the session's memory goes
    unjudged for it rather than compared unlike with like."""
    if metric is None or metric == rec.get("metric"):
        return list(rec["process_medians"])
    suite = rec.get("suite") or {}
    if metric == "peak_rss_mib" and suite.get("memory") != memory_method(key, processes or suite.get("processes")):
        return []
    figs = rec.get("figures") or {}
    if metric in figs:
        return list(figs[metric])
    return []


def _primary(rec: Mapping[str, Any]) -> str:
    return rec.get("metric") or "throughput"


def _judged_by_processes(rec: Mapping[str, Any]) -> List[str]:
    names = [_primary(rec)] + sorted((rec.get("figures") or {}).keys())
    return [n for n in dict.fromkeys(names) if n in METRICS and METRICS[n].rule == "processes"]


class Baseline:
    """One machine's baseline file: the only code that knows its document's layout.

    Made by ``load`` (a file: checked, migrated, refused in one line), ``from_doc`` (a
    document in memory, checked the same way) or ``new``; read through the accessors below,
    which take a cell key (and a figure: ``metric``, default the cell's primary one); changed
    by ``add_recordings`` and ``stamp``; written back through ``to_doc`` / ``dumps``
    (``baseline_store.write_recordings`` does that under the file's lock). A recording (one
    session of one cell: ``baseline_store.summarize_cell``) is returned as its dict.
    """

    def __init__(self, doc: Dict[str, Any], path: Optional[PathLike] = None):
        """``doc``: a checked document of SCHEMA_VERSION (use ``load``, ``from_doc`` or ``new``)."""
        self._doc = doc
        self.path: Optional[Path] = Path(path) if path is not None else None

    # -- making one

    @classmethod
    def new(cls, machine_id: str, path: Optional[PathLike] = None) -> "Baseline":
        """An empty baseline for ``machine_id`` (what its first recording starts from)."""
        return cls({"schema": SCHEMA_VERSION, "machine_id": machine_id, "cells": {}}, path)

    @classmethod
    def from_doc(cls, doc: Any, path: Optional[PathLike] = None) -> "Baseline":
        """A baseline from a document in memory (copied), checked and migrated like a file."""
        try:
            return cls(_checked(copy.deepcopy(doc), path), path)
        except RecursionError:
            raise BaselineError(f"{_where(path)} is malformed (nested too deeply); delete it and re-record") from None

    @classmethod
    def load(cls, path: PathLike) -> "Baseline":
        """Load, migrate and check one baseline file. Raises BaselineError (one line) for any problem."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise BaselineError(f"baseline file {path} does not exist; record one with "
                                "--perf-update-baselines") from None
        except OSError as exc:
            raise BaselineError(f"cannot read baseline file {path} ({exc.strerror or exc.__class__.__name__}); "
                                "check that it is a readable file") from None
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            detail = str(exc).splitlines()[0][:120] if str(exc) else exc.__class__.__name__
            raise BaselineError(f"baseline file {path} is corrupt (not valid JSON: {detail}); restore it from "
                                f"version control (git checkout -- {path}) or delete it and re-record with "
                                "--perf-update-baselines") from None
        try:
            return cls(_checked(doc, path), path)
        except RecursionError:
            raise BaselineError(f"baseline file {path} is malformed (nested too deeply); delete it and "
                                "re-record") from None

    # -- writing it back

    def to_doc(self) -> Dict[str, Any]:
        """The document (a copy), as the file holds it."""
        return copy.deepcopy(self._doc)

    def dumps(self) -> str:
        """The file's text: keys sorted and indented, so that a change reads well in ``git diff``."""
        return json.dumps(self._doc, indent=1, sort_keys=True, allow_nan=False) + "\n"

    def add_recordings(self, recordings: Mapping[str, Mapping[str, Any]], workloads: Mapping[str, Mapping[str, Any]],
                       history: int = HISTORY) -> None:
        """Append each recording to its cell's history (keeping the newest ``history``) and
        state the resolution of the comparison set it closes (``resolution``); other cells
        untouched."""
        cells = self._doc.setdefault("cells", {})
        for key, rec in recordings.items():
            entry = cells.setdefault(key, {"workload": dict(workloads.get(key, {})), "history": []})
            if workloads.get(key):
                entry["workload"] = dict(workloads[key])
            entry.setdefault("history", []).append(dict(rec))
            if history > 0:
                entry["history"] = entry["history"][-history:]
            self._annotate_resolution(key)

    def stamp(self, machine_id: str, machine: Any = None, requirement: Optional[str] = None) -> None:
        """The file's own facts after a recording: schema, machine id, the fingerprint's
        ``hardware`` part, the MXNet requirement it was measured with, the date."""
        doc = self._doc
        doc["schema"] = SCHEMA_VERSION
        doc["machine_id"] = machine_id
        if machine:
            doc["machine"] = dict(machine.get("hardware", machine)) if isinstance(machine, Mapping) else machine
        if requirement:
            doc["mxnet_requirement"] = requirement
        doc["updated"] = now_iso()

    def _annotate_resolution(self, key: str) -> None:
        """Store the resolution of every figure of cell ``key`` judged by the processes rule
        with its newest recording (over the comparison set that recording closes)."""
        hist = self.recordings(key)
        if not hist or not hist[-1].get("process_medians"):
            return
        newest = hist[-1]
        out = {}
        for name in _judged_by_processes(newest):
            res = self.computed_resolution(key, None if name == _primary(newest) else name)
            if res is not None:
                out[name] = res.to_dict(METRICS[name].higher_is_better)
        newest["resolution"] = out

    # -- the file's own facts

    @property
    def machine_id(self) -> Optional[str]:
        return self._doc.get("machine_id")

    @property
    def machine(self) -> Dict[str, Any]:
        """The fingerprint's ``hardware`` part of the last recording."""
        return dict(self._doc.get("machine") or {})

    @property
    def mxnet_requirement(self) -> Optional[str]:
        """The MXNet requirement of the newest recording, as the file states it."""
        return self._doc.get("mxnet_requirement")

    @property
    def updated(self) -> Optional[str]:
        return self._doc.get("updated")

    # -- its cells

    def _cells(self) -> Mapping[str, Any]:
        return self._doc.get("cells") or {}

    def keys(self) -> List[str]:
        """The keys of the cells it holds, in file order."""
        return list(self._cells())

    def workload(self, key: str) -> Dict[str, Any]:
        """Cell ``key``'s workload (``Workload.to_dict()``), {} when unknown."""
        return dict((self._cells().get(key) or {}).get("workload") or {})

    def recordings(self, key: str) -> List[Dict[str, Any]]:
        """Every recording of cell ``key``, oldest first (at most HISTORY are kept)."""
        return list((self._cells().get(key) or {}).get("history") or [])

    def _measured(self, key: str) -> List[Dict[str, Any]]:
        return [r for r in self.recordings(key) if r.get("process_medians")]

    def comparison_set(self, key: str) -> List[Dict[str, Any]]:
        """The recordings a run of ``key`` is compared with: the newest one, and the ones before
        it back to the last that started a pool (``pool`` "replace" or unset)."""
        out: List[Dict[str, Any]] = []
        for rec in reversed(self._measured(key)):
            out.insert(0, rec)
            if rec.get("pool") != "add":
                break
        return out

    def latest(self, key: str) -> Optional[Dict[str, Any]]:
        """The newest recording of cell ``key`` that has per-process medians, or None."""
        recs = self.comparison_set(key)
        return recs[-1] if recs else None

    def recorded_env(self, key: str) -> Optional[Dict[str, str]]:
        """The variables a baseline records (threading, MXNet, oneDNN, ...; those the suite set
        among them) that cell ``key``'s comparison set was measured with, as they were: what its
        recorded setup runs with. None when nothing is recorded, or when its pooled recordings
        ran with different values (there is no one recorded setup)."""
        envs = [rec.get("env") for rec in self.comparison_set(key)]
        if not envs or not all(isinstance(e, dict) for e in envs):
            return None
        if any(e != envs[-1] for e in envs):
            return None
        return {str(k): str(v) for k, v in envs[-1].items()}

    def recorded_suite(self, key: str) -> Optional[Dict[str, Any]]:
        """Which pytest-mxperf (its version and measuring method) recorded cell ``key``'s newest
        recording; None when it was recorded before the suite said."""
        rec = self.latest(key)
        suite = rec.get("suite") if rec else None
        return dict(suite) if isinstance(suite, dict) else None

    def values(self, key: str, metric: Optional[str] = None,
               processes: Optional[str] = None) -> Optional[List[float]]:
        """Per-process values of ``metric`` (default: the primary figure) over the comparison
        set; a memory figure only from recordings that read it as this suite reads it for
        processes had as ``processes`` (``CellMeasurement.sharing``; None: as recorded)."""
        out = [v for rec in self.comparison_set(key) for v in _rec_values(rec, metric, key, processes)]
        return out or None

    def states(self, key: str, reference: Optional[Mapping[str, Any]] = None) -> Optional[List[Optional[str]]]:
        """Machine-state labels aligned with ``values(key)`` (None where unknown): as recorded,
        or, given a session's probe ``reference`` (``machine_states.reference_from``),
        relabelled against it where the recording kept its processes' probes. None when the
        cell has no comparison set."""
        recs = self.comparison_set(key)
        if not recs:
            return None
        out: List[Optional[str]] = []
        for rec in recs:
            n = len(rec["process_medians"])
            probes = rec.get("process_probes")
            states = rec.get("process_states")
            if reference and isinstance(probes, list) and len(probes) == n:
                out.extend(machine_states.label(ms.get("probe_before"), ms.get("probe_after"), ms.get("load"),
                                                reference).state if isinstance(ms, dict) else None for ms in probes)
            elif isinstance(states, list) and len(states) == n:
                out.extend(states)
            else:
                out.extend([None] * n)
        return out

    def process_probes(self) -> Iterator[Dict[str, Any]]:
        """Every recorded process's probe record (``probe_before``, ``probe_after``, ``load``),
        over all cells and recordings: what a session's machine-state reference includes."""
        for key in self.keys():
            for rec in self.recordings(key):
                for ms in rec.get("process_probes") or []:
                    if isinstance(ms, dict):
                        yield ms

    def session_medians(self, key: str, metric: Optional[str] = None) -> List[float]:
        """The cell's median in each recorded session (oldest first): its trend."""
        return [statistics.median(v) for v in (_rec_values(r, metric, key) for r in self._measured(key)) if v]

    def answers(self, key: str) -> Tuple[List[Dict[str, Any]], Optional[str]]:
        """The answer records (``workers/answers.py``) of the newest recording in cell ``key``'s
        comparison set that kept them, and the MXNet version that computed them; ([], None)
        when none did (recorded before answers were kept)."""
        for rec in reversed(self.comparison_set(key)):
            got = [a for a in rec.get("answers") or [] if isinstance(a, dict)]
            if got:
                return got, rec.get("mxnet_version")
        return [], None

    def profile(self, key: str) -> Optional[Dict[str, Any]]:
        """The newest operator profile (``kept_profiles.summary``, with its recording's
        ``date``) kept with the recordings a run of ``key`` is compared with, or None."""
        for rec in reversed(self.comparison_set(key)):
            prof = rec.get("profile")
            if isinstance(prof, dict) and isinstance(prof.get("operators"), list):
                return dict(prof, date=rec.get("date"))
        return None

    # -- resolution

    def comparison_sessions(self, key: str, metric: Optional[str] = None) -> List[List[float]]:
        """Per recording of the comparison set (oldest first), the per-process values of
        ``metric`` (default: the primary figure) of the processes not labelled "slowed" when
        they were recorded."""
        out = []
        for rec in self.comparison_set(key):
            values = _rec_values(rec, metric, key)
            states = rec.get("process_states")
            if isinstance(states, list) and len(states) == len(values):
                values = [v for v, st in zip(values, states) if st != "slowed"]
            out.append(values)
        return out

    def computed_resolution(self, key: str, metric: Optional[str] = None) -> Optional["resolution.Resolution"]:
        """The resolution of a figure computed from the recordings it is compared with (see
        ``resolution.Resolution``); None when they hold fewer than two processes."""
        return resolution.resolution_of(self.comparison_sessions(key, metric))

    def resolution(self, key: str, metric: Optional[str] = None) -> Optional["resolution.Resolution"]:
        """The resolution the baseline states for a figure of cell ``key`` (default: its primary
        figure): stored with the newest recording of its comparison set, or, for a file recorded
        before resolutions were stored (or one whose entry is unusable), computed the same way
        from its recordings."""
        recs = self.comparison_set(key)
        if not recs:
            return None
        newest = recs[-1]
        name = metric or _primary(newest)
        stored = (newest.get("resolution") or {}).get(name) if isinstance(newest.get("resolution"), dict) else None
        return resolution.Resolution.from_dict(stored) or self.computed_resolution(
            key, None if name == _primary(newest) else name)

    def resolution_summary(self, keys: Optional[Iterable[str]] = None) -> Dict[str, Any]:
        """What the baseline says about this machine's resolution, over the primary figures of
        ``keys`` (default: every cell): {"cells", "provisional" (cells whose resolution rests on
        one session), "sessions" (most pooled sessions of a cell), "median", "largest" (fraction),
        "largest_key"}."""
        keys = list(keys) if keys is not None else sorted(self._cells())
        values, provisional, sessions, largest = [], 0, 0, (None, -1.0)
        for key in keys:
            recs = self.comparison_set(key)
            res = self.resolution(key)
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

    # -- the recorded install

    def recorded_requirements(self, keys: Optional[Iterable[str]] = None) -> Dict[str, List[str]]:
        """requirement (e.g. "mxnet==1.9.1") -> the cells (of ``keys``, default all) whose
        comparison sets were recorded with it. Recordings made before requirements were stored
        say nothing and are left out."""
        keys = list(keys) if keys is not None else sorted(self._cells())
        out: Dict[str, List[str]] = {}
        for key in keys:
            for req in dict.fromkeys(r.get("mxnet_requirement") for r in self.comparison_set(key)):
                if isinstance(req, str) and req:
                    out.setdefault(req, []).append(key)
        return out

    def recorded_install(self, keys: Optional[Iterable[str]] = None) -> Optional[Dict[str, Any]]:
        """Which build of MXNet the comparison sets of ``keys`` (default: every cell) were
        recorded with (``distributions.install_identity``: name, version, the sha256 of its
        libmxnet, where pip took it from, numpy's version, its features); None when no
        recording says (recorded before installs were). Raises BaselineError (one line) when
        they say different builds (pooled recordings of different installs)."""
        keys = list(keys) if keys is not None else sorted(self._cells())
        seen: Dict[tuple, Dict[str, Any]] = {}
        for key in keys:
            for rec in self.comparison_set(key):
                inst = rec.get("install")
                if isinstance(inst, dict):
                    seen.setdefault(tuple(str(inst.get(f)) for f in INSTALL_IDENTITY), inst)
        return self._only_one(seen, "build of MXNet", lambda i: f"{i.get('name')} {i.get('version')} (libmxnet "
                                                              f"{str(i.get('libmxnet_sha256'))[:12]})")

    def _only_one(self, seen: Dict[tuple, Dict[str, Any]], what: str, said: Callable[[Dict[str, Any]], str]
                  ) -> Optional[Dict[str, Any]]:
        """The one record ``seen`` holds (a copy), None for none; BaselineError (one line naming
        each, ``said``) for several: pooled recordings of more than one ``what``."""
        if len(seen) > 1:
            raise BaselineError(f"baseline {self.path or self.machine_id or ''} was recorded with more than one "
                                f"{what}: {', '.join(map(said, seen.values()))}; re-record it with "
                                "--perf-update-baselines")
        return dict(next(iter(seen.values()))) if seen else None

    def recorded_release(self, keys: Optional[Iterable[str]] = None) -> Optional[Dict[str, Any]]:
        """What the comparison sets of ``keys`` (default: every cell) say of the MXNet that
        measured them when they name no install (recorded before installs were): {"mxnet_version",
        "features" (a list, or None when not recorded), "cuda_runtime", "numpy_version"} from
        their software facts; None when none says a version. Raises BaselineError (one line)
        when they say different releases or builds."""
        keys = list(keys) if keys is not None else sorted(self._cells())
        seen: Dict[tuple, Dict[str, Any]] = {}
        for key in keys:
            for rec in self.comparison_set(key):
                soft = rec.get("software") if isinstance(rec.get("software"), dict) else {}
                version = soft.get("mxnet_version") or rec.get("mxnet_version")
                if not isinstance(version, str) or not version:
                    continue
                features = soft.get("features")
                got = {"mxnet_version": version,
                       "features": sorted(str(f) for f in features) if isinstance(features, list) else None,
                       "cuda_runtime": soft.get("cuda_runtime") if isinstance(soft.get("cuda_runtime"), str) else None,
                       "numpy_version": soft.get("numpy_version") if isinstance(soft.get("numpy_version"), str)
                       else None}
                seen.setdefault((version, tuple(got["features"] or ()), got["cuda_runtime"]), got)
        return self._only_one(seen, "MXNet release or build", lambda r: f"mxnet {r['mxnet_version']} "
                              f"({', '.join(r['features'] or ['features not recorded'])})")

    def recorded_requirement(self, keys: Optional[Iterable[str]] = None) -> Optional[str]:
        """The MXNet requirement the baseline of ``keys`` (default: every cell) was measured
        with, e.g. "mxnet==1.9.1", for an A/B run against exactly that install; None when it
        was recorded before requirements were stored. Raises BaselineError (one line) when the
        cells were recorded with different installs."""
        reqs = self.recorded_requirements(keys)
        if len(reqs) > 1:
            parts = ", ".join(f"{r} ({len(k)} cell(s), e.g. {k[0]})" for r, k in sorted(reqs.items()))
            raise BaselineError(f"baseline {self.path or self.machine_id or ''} was recorded with more than "
                                f"one MXNet install: {parts}; select cells of one, or re-record them")
        return next(iter(reqs), None)
