"""GPU readings while a worker runs, in a background thread (``Sampler``): NVML's volatile
facts (utilisation, memory in use, clocks, temperature, power, throttle reasons), noise
evidence summarised per GPU and never part of a machine id nor of an environment diff; and,
given the worker's PID, the GPU memory that process holds (``NVML.own_memory``), whose peak
(``own_memory``) is the worker's judged ``gpu_memory_mib``."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Iterable, List, Optional

from pytest_mxperf.machine.nvml import NVML, OWN_MEMORY_MISSING, OWN_MEMORY_SOURCE, SLOWDOWN_REASONS, error_text


class Sampler:
    """Samples ``volatile_facts`` of the NVML ``indices`` (default: all GPUs) every
    ``interval`` seconds in a background thread, between ``start()`` and ``stop()``.

    The first sample is taken as soon as the thread starts. The thread never raises: a
    failed sample is counted (``errors``, ``last_error``) and sampling goes on. ``stop()``
    joins the thread. Without NVML it does nothing and ``summary()`` is [].

    Each sample carries ``"t"``: ``time.monotonic()`` just before it was read (CLOCK_MONOTONIC,
    the clock of the worker's ``timed_windows``), so that ``utilisation.over_windows`` can keep
    the samples read inside a worker's timed rounds.

    With ``pid`` (the worker's), each sample also reads what that process and its descendants
    hold on the ``indices`` GPUs (``NVML.own_memory``: nvmlDeviceGetComputeRunningProcesses'
    usedGpuMemory of their PIDs), after the volatile facts; ``own_memory()`` keeps the peak.
    """

    def __init__(self, nvml: NVML, indices: Optional[Iterable[int]] = None, interval: float = 0.2,
                 join_timeout: float = 30.0, pid: Optional[int] = None):
        self.nvml = nvml
        self.indices = list(indices) if indices is not None else None
        self.pid = pid
        self._own: Dict[str, int] = {}           # readings by own_bytes' status
        self._own_peak: Optional[int] = None     # bytes, the largest "ok" reading
        self.interval = float(interval)
        self.join_timeout = join_timeout
        self.errors = 0
        self.last_error: Optional[str] = None
        self.stopped_cleanly: Optional[bool] = None
        self._samples: Dict[int, List[Dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "Sampler":
        if self._thread is not None:
            raise RuntimeError("Sampler already started")
        if not self.nvml.available:
            return self
        self._thread = threading.Thread(target=self._run, name="mxperf-nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> "Sampler":
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.join_timeout)
            self.stopped_cleanly = not self._thread.is_alive()
        return self

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        while True:
            self.sample_once()
            if self._stop.wait(self.interval):
                return

    def sample_once(self) -> None:
        """Take one sample now (what the thread does every ``interval``); never raises."""
        t = time.monotonic()
        try:
            facts = self.nvml.volatile_facts(self.indices)
        except BaseException as exc:  # noqa: B902 - nothing may escape the thread
            self._failed(exc)
            return
        with self._lock:
            for rec in facts:
                self._samples.setdefault(rec["index"], []).append(dict(rec, t=t))
        if self.pid is not None:
            self._sample_own()

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self.errors += 1
            self.last_error = error_text(exc)

    def _sample_own(self) -> None:
        indices = self.indices if self.indices is not None else range(self.nvml.device_count())
        try:
            status, used = self.nvml.own_memory(self.pid, indices)
        except BaseException as exc:  # noqa: B902 - nothing may escape the thread
            self._failed(exc)
            return
        with self._lock:
            self._own[status] = self._own.get(status, 0) + 1
            if used is not None and (self._own_peak is None or used > self._own_peak):
                self._own_peak = used

    def own_memory(self) -> Optional[Dict[str, Any]]:
        """The worker's own GPU memory over the samples (None without ``pid``): ``pid``,
        ``peak_bytes`` (the largest reading; None when NVML gave none), ``readings`` (by
        ``nvml.own_bytes``' status: "ok", "absent", "not-reported", "unlisted"), ``source``,
        and when there is no figure ``why`` (the most frequent reason)."""
        if self.pid is None:
            return None
        with self._lock:
            counts, peak = dict(self._own), self._own_peak
        out: Dict[str, Any] = {"pid": self.pid, "peak_bytes": peak, "readings": counts, "source": OWN_MEMORY_SOURCE}
        if peak is None:
            missing = sorted(((n, s) for s, n in counts.items() if s in OWN_MEMORY_MISSING), reverse=True)
            out["why"] = OWN_MEMORY_MISSING[missing[0][1]] if missing else "NVML was never read while it ran"
        return out

    @property
    def n_samples(self) -> int:
        with self._lock:
            return max((len(v) for v in self._samples.values()), default=0)

    def samples(self) -> Dict[int, List[Dict[str, Any]]]:
        with self._lock:
            return {k: list(v) for k, v in self._samples.items()}

    def summary(self) -> List[Dict[str, Any]]:
        """Per GPU: samples, mean/max GPU and memory utilisation, max memory used, min/max
        SM clock, max temperature and power draw, the throttle reasons seen (and those of
        them in ``SLOWDOWN_REASONS``), plus the sampler's failed samples."""
        out = []
        for index, recs in sorted(self.samples().items()):
            def vals(key: str) -> List[float]:
                return [r[key] for r in recs if r.get(key) is not None]

            def mean(xs: List[float]) -> Optional[float]:
                return round(sum(xs) / len(xs), 2) if xs else None

            util, mutil, used = vals("gpu_util_pct"), vals("mem_util_pct"), vals("memory_used_bytes")
            sm, temp, power = vals("sm_clock_mhz"), vals("temperature_c"), vals("power_draw_w")
            seen = sorted({name for r in recs for name in r.get("throttle_reasons") or ()})
            out.append({
                "index": index, "uuid": next((r.get("uuid") for r in recs if r.get("uuid")), None),
                "samples": len(recs),
                "gpu_util_mean_pct": mean(util), "gpu_util_max_pct": max(util, default=None),
                "mem_util_mean_pct": mean(mutil), "mem_util_max_pct": max(mutil, default=None),
                "memory_used_max_bytes": max(used, default=None),
                "sm_clock_min_mhz": min(sm, default=None), "sm_clock_max_mhz": max(sm, default=None),
                "temperature_max_c": max(temp, default=None), "power_draw_max_w": max(power, default=None),
                "throttle_reasons_seen": seen,
                "slowdown_reasons_seen": [r for r in seen if r in SLOWDOWN_REASONS],
                "sample_errors": self.errors,
            })
        return out
