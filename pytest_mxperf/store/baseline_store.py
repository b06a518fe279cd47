"""Writing a machine's baseline: a session's cells summarised into recordings
(summarize_cell), added to the file's ``Baseline`` under a file lock and written atomically
(write_recordings: update, promote from a results.json); BaselineStore ties reading
(baselines.py: ``Baseline``, the file format and what a loaded baseline holds) and writing
to one directory."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence

from pytest_mxperf.model.jsonio import atomic_write_text, sweep_temporaries
from pytest_mxperf import __version__
from pytest_mxperf.model.measurement import MEASURING_METHOD, CellMeasurement, memory_method
from pytest_mxperf.model.stats import quantile
from pytest_mxperf.judge import answers as answers_rule
from pytest_mxperf.judge import resolution
from pytest_mxperf.store.baselines import (
    HISTORY,
    LOCK_TIMEOUT,
    Baseline,
    BaselineError,
    PathLike,
    baseline_path,
    default_dir,
    now_iso,
)


def mxnet_requirement(dists: Sequence[Sequence[str]]) -> Optional[str]:
    """``name==version`` of the one MXNet distribution in ``dists`` ((name, version) pairs,
    as installs.installed_mxnet_distributions lists them); None unless exactly one."""
    dists = [d for d in dists if d and len(d) >= 2 and d[0] and d[1]]
    return f"{dists[0][0]}=={dists[0][1]}" if len(dists) == 1 else None


def _median(values: Iterable[Optional[float]]) -> Optional[float]:
    vals = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(vals) if vals else None


def _probe_record(ms: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """What a later session needs to relabel a process: its probes and the load around it."""
    if not ms or not (ms.get("probe_before") or ms.get("probe_after")):
        return None
    return {k: ms.get(k) for k in ("probe_before", "probe_after", "load")}


def startup_of(cell: CellMeasurement) -> Dict[str, Any]:
    """What a recording of ``cell`` says of the setup its processes ran with and how they
    started: the recorded variables (``env``, as its first successful process had them) and
    the medians of ``bind_seconds`` and ``first_batch_seconds``; ``summarize_cell`` records
    these, and the judgement compares them with the baseline's without making the rest."""
    ok = cell.ok_runs
    first = ok[0].meta if ok else None
    return {"env": dict(first.env or {}) if first else {},
            "bind_seconds": _median(r.meta.bind_seconds for r in ok),
            "first_batch_seconds": _median(r.meta.first_batch_seconds for r in ok)}


def summarize_cell(cell: CellMeasurement, software: Optional[Mapping[str, Any]] = None,
                   date: Optional[str] = None, source: str = "measured", pool: str = "replace",
                   requirement: Optional[str] = None, install: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """One recording (history entry) from a CellMeasurement's successful processes;
    ``requirement``: the MXNet distribution that measured it (``mxnet==1.9.1``); ``install``:
    which build that was (``distributions.install_identity`` and its features)."""
    ok = cell.ok_runs
    rounds = sorted(s for r in ok for s in r.samples)  # sorted once: the quantiles below sort it again in O(n)
    first = ok[0].meta if ok else None
    primary = cell.primary
    started = startup_of(cell)
    rec: Dict[str, Any] = {
        "date": date or now_iso(),
        "source": source,
        "pool": pool,
        "metric": primary.name,
        "unit": primary.unit,
        "process_medians": [round(float(r.value(primary.name)), 6) for r in ok],
        "figures": {m.name: [round(float(v), 6) for v in cell.values(m.name)]
                    for m in cell.metrics() if m.name != primary.name},
        # machine state while each process ran (aligned with process_medians), for the
        # verdict's busy-machine screen; the probe figures let a later session relabel them
        "process_states": [r.state for r in ok],
        "process_probes": [_probe_record(r.machine_state or None) for r in ok],
        "median": cell.median_or_none,
        "spread": cell.spread,
        "rounds": ({"n": len(rounds), "median": statistics.median(rounds), "q1": quantile(rounds, 0.25),
                    "q3": quantile(rounds, 0.75), "min": min(rounds), "max": max(rounds)} if rounds else None),
        "mxnet_version": (first.mxnet_version if first else None) or (software or {}).get("mxnet_version"),
        "mxnet_requirement": requirement,
        "install": dict(install) if install else None,
        "software": dict(software) if software else None,
        "env": started["env"],
        # which suite measured it, and how (a change of method changes the figure, not MXNet)
        "suite": {"version": __version__, "method": MEASURING_METHOD,
                  "memory": memory_method(cell.workload.key(), cell.sharing), "processes": cell.sharing},
        "env_defaults_applied": dict(first.env_defaults_applied or {}) if first else {},
        "threads": dict(first.threads) if first and first.threads is not None else None,
        "peak_rss_bytes": max((r.meta.peak_rss_bytes for r in ok if r.meta.peak_rss_bytes is not None), default=None),
        "bind_seconds": started["bind_seconds"],
        "first_batch_seconds": started["first_batch_seconds"],
        "cpu_utilization": _median(r.meta.cpu_utilization for r in ok),
        # what the cell computed (one record a seed: the judge pairs them by seed)
        "answers": list(answers_rule.by_seed(r.answers for r in ok if r.answers).values()) or None,
        "n_processes": len(ok),
        "n_failed": len(cell.runs) - len(ok),
    }
    return rec


def _lock(path: Path):
    from filelock import FileLock
    return FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT)


def write_recordings(machine_id: str, recordings: Mapping[str, Mapping[str, Any]],
                     workloads: Mapping[str, Mapping[str, Any]], machine: Optional[Mapping[str, Any]] = None,
                     baselines_dir: Optional[PathLike] = None, history: int = HISTORY,
                     requirement: Optional[str] = None) -> Path:
    """Add prepared recordings to ``<dir>/<machine_id>.json`` under the lock, atomically:
    the file is read (``Baseline.load``), changed (``add_recordings``, ``stamp``) and
    written (``dumps``) while the lock is held."""
    path = baseline_path(machine_id, baselines_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _lock(path):
        if path.exists() or path.is_symlink():
            baseline = Baseline.load(path)  # refuses (BaselineError) to touch a corrupt / newer file
        else:
            baseline = Baseline.new(machine_id, path)
        baseline.add_recordings(recordings, workloads, history)
        baseline.stamp(machine_id, machine, requirement)
        sweep_temporaries(path)  # what a writer killed before its rename left
        atomic_write_text(path, baseline.dumps())
    return path


def update(machine_id: str, cells: Sequence[CellMeasurement], machine: Optional[Mapping[str, Any]] = None,
           software: Optional[Mapping[str, Any]] = None, *, baselines_dir: Optional[PathLike] = None,
           history: int = HISTORY, date: Optional[str] = None, pool: str = "replace",
           profiles: Optional[Mapping[str, Mapping[str, Any]]] = None, requirement: Optional[str] = None,
           install: Optional[Mapping[str, Any]] = None) -> Path:
    """Record measured cells into the machine's baseline file (``--perf-update-baselines``).

    Merges: cells not in ``cells`` keep their history; a measured cell gets one new recording
    (oldest dropped beyond ``history``). Cells without any successful process are skipped.
    ``machine`` is the fingerprint (its ``hardware`` part is stored); ``software`` the
    session's software facts (mxnet_version, features, cuda, cudnn, gpu_driver).
    ``profiles``: a small operator profile per cell key (``kept_profiles.summary``), kept in the
    recording as ``profile`` so that a later failure has a profile to set beside its own.
    ``requirement``: the MXNet distribution that measured the cells (``mxnet==1.9.1``), kept
    in each recording and in the file (``recorded_requirement``); ``install``: which build of it
    (``Baseline.recorded_install``), in each recording. Every recording states
    the resolution of its comparison set (``resolution``).
    Returns the file's path. Raises BaselineError for an existing unusable file.
    """
    recs, wls = {}, {}
    for cell in cells:
        if not cell.ok_runs:
            continue
        key = cell.workload.key()
        recs[key] = summarize_cell(cell, software, date, pool=pool, requirement=requirement, install=install)
        if profiles and profiles.get(key):
            recs[key]["profile"] = dict(profiles[key])
        wls[key] = cell.workload.to_dict()
    return write_recordings(machine_id, recs, wls, machine, baselines_dir, history, requirement)


def promote(results_json_path: PathLike, *, baselines_dir: Optional[PathLike] = None,
            machine_id: Optional[str] = None, history: int = HISTORY) -> Dict[str, Any]:
    """Record a CI run's results.json into the baseline without measuring again.

    The machine id is ``machine_id`` (``--machine``) or the one stored in the results file.
    Returns {"path", "machine_id", "promoted": [keys], "skipped": [keys]}.
    Raises BaselineError (bad baseline file) or results.ResultsError (bad results file).
    """
    from pytest_mxperf.store.kept_profiles import kept_summaries
    from pytest_mxperf.store.results import Results
    res = Results.load(results_json_path)
    mid = machine_id or res.machine_id
    if not mid:
        raise BaselineError(f"results file {results_json_path} names no machine id; pass --machine NAME")
    software, date = res.software, res.date
    kept = kept_summaries(res.profiles)  # a --perf-profile run's, per cell key
    recs, wls, skipped = {}, {}, []
    for cell in res.cells():
        key = cell.workload.key()
        if not cell.ok_runs:
            skipped.append(key)
            continue
        recs[key] = summarize_cell(cell, software, date, source=f"promoted from {Path(results_json_path).name}")
        if key in kept:
            recs[key]["profile"] = kept[key]
        wls[key] = cell.workload.to_dict()
    path = write_recordings(mid, recs, wls, res.machine, baselines_dir, history)
    return {"path": path, "machine_id": mid, "promoted": sorted(recs), "skipped": sorted(skipped)}


class BaselineStore:
    """The baselines of one directory: ``<dir>/<machine id>.json`` per machine."""

    def __init__(self, directory: Optional[PathLike] = None):
        self.directory = Path(directory) if directory is not None else default_dir()

    def path(self, machine_id: str) -> Path:
        return baseline_path(machine_id, self.directory)

    def load(self, machine_id: str) -> Optional[Baseline]:
        """The machine's baseline, or None when there is no file yet; BaselineError (one
        line) for a file that cannot be used."""
        path = self.path(machine_id)
        if not path.exists() and not path.is_symlink():
            return None
        return Baseline.load(path)

    def update(self, machine_id: str, cells: Sequence[CellMeasurement], **kw) -> Path:
        return update(machine_id, cells, baselines_dir=self.directory, **kw)

    def promote(self, results_json_path: PathLike, **kw) -> Dict[str, Any]:
        return promote(results_json_path, baselines_dir=self.directory, **kw)

    def recorded_requirement(self, machine_id: str, keys: Optional[Iterable[str]] = None) -> Optional[str]:
        """The MXNet requirement this machine's baseline (of ``keys``, default every cell) was
        measured with, e.g. "mxnet==1.9.1" (what ``--perf-reference baseline`` runs the A/B
        against); None when there is no baseline file or it was recorded before requirements
        were stored. Raises BaselineError (one line) for an unusable file, or cells recorded
        with different installs."""
        baseline = self.load(machine_id)
        return baseline.recorded_requirement(keys) if baseline is not None else None

    def resolution(self, machine_id: str, key: str, metric: Optional[str] = None) -> Optional[resolution.Resolution]:
        """The resolution this machine's baseline states for a figure of cell ``key``."""
        baseline = self.load(machine_id)
        return baseline.resolution(key, metric) if baseline is not None else None
