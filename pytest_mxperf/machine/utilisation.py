"""How busy a worker kept the machine while it ran, sampled from the parent.

The lecture's first questions ("what is my GPU utilisation? what is my CPU utilisation?")
asked of every worker process. Sampling happens in the parent, in a background thread,
never inside the worker: on a 2-vCPU machine a sampler inside it would take a core from
the very run it watches.

* CPU: ``psutil.Process(pid).cpu_percent`` of the worker (all its threads, OpenMP's
  included) every ``INTERVAL`` seconds, as CPUs busy (1.0 = one CPU);
* GPU: where the worker's contexts are GPUs, NVML's utilisation, memory, clocks and
  throttle reasons of those GPUs (``gpu_sampler.Sampler``; ``gpu:N`` is mapped to its NVML GPU as
  the worker's CUDA sees it, ``cuda_devices.map_visible``), and what the worker's own PID holds
  on them (``"gpu_own_memory"``: NVML's per-process figure, its peak; ``own_gpu_memory_mib``).

Every reading carries its ``time.monotonic()`` (CLOCK_MONOTONIC on Linux: one clock for
all the machine's processes), and a worker with timed rounds reports them as
``timed_windows`` ([start, end] on the same clock). ``with_timed_rounds`` adds what was read
inside those windows (``over_windows``, pure): the import, bind, autotune, warm-up and exit
around 1.5-3 s of timed work are left out, so they no longer make a busy GPU look idle.

* a CPU reading (psutil's average since the previous one) counts when it lies wholly
  inside a window;
* a GPU reading counts when it was read inside a window at least ``NVML_PERIOD_MAX_S``
  long (windows closer than ``WINDOW_GAP_S`` are one). ``nvmlDeviceGetUtilizationRates``
  gives "Utilization information for a device. Each sample period may be between 1 second
  and 1/6 second, depending on the product being queried" (nvml.h, ``nvmlUtilization_t``:
  "Percent of time over the past sample period during which one or more kernels was
  executing on the GPU"): a reading cannot be told apart from the second before it. A process's rounds are one
  window after its untimed warm-up of the same steps, so a reading early in it averages that
  work; a duet's rounds (0.15 s, the partner's turns between them) give none that counts.
* fewer than ``MIN_TIMED_READINGS`` counted readings: "too short to tell", no guess.

The summary goes into each process's result (``meta["utilisation"]``: the whole process's
figures, and under ``"timed"`` the timed rounds') and so into ``results.json``; ``labels``
turns the timed rounds' figures into the words of the report: a GPU cell whose GPUs were
busy less than ``HOST_BOUND_GPU_PCT`` of the timed rounds is input- or host-bound (the GPU
waits for data or for the Python side), a CPU cell whose worker kept fewer than
``UNDERUSED_CPU_SHARE`` of its OpenMP threads busy used the cores it was given poorly. A
kind of worker that marks no timed window (kvstore, input pipeline, multi-device,
convergence, profile, peak, distributed) gets its whole-process figures shown and no label.
Shown, never judged: the throughput is what is judged. The one exception is the worker's
own peak GPU memory, which the runner makes the judged ``gpu_memory_mib`` (a ``growth``
figure) because it is read here, beside the worker.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

INTERVAL = 0.25
TIMELINE_POINTS = 120           # at most this many (seconds, CPUs busy) points are kept
HOST_BOUND_GPU_PCT = 50.0       # mean GPU utilisation below this: input- or host-bound
UNDERUSED_CPU_SHARE = 0.6       # mean CPUs busy below this share of the OpenMP threads
#: the longest period NVML averages utilisation over ("Each sample period may be between 1 second
#: and 1/6 second, depending on the product being queried": nvml.h, nvmlUtilization_t)
NVML_PERIOD_MAX_S = 1.0
MIN_TIMED_READINGS = 4          # fewer counted readings inside the timed rounds: too short to tell
WINDOW_GAP_S = 0.05             # timed windows closer than this are one (a process's rounds touch)


def gpu_indices(contexts: Sequence[str], env: Mapping[str, str], nvml_facade=None) -> List[int]:
    """NVML indices of the GPUs among ``contexts`` ("gpu:N"), as the worker started with
    ``env`` sees them; [] without GPU contexts or NVML."""
    wanted = [c for c in contexts if str(c).startswith("gpu:")]
    if not wanted:
        return []
    from pytest_mxperf.machine import cuda_devices, nvml
    facade = nvml_facade or nvml.load(env=env)
    if not facade.available:
        return []
    visible = {g["mxnet_ctx"]: g.get("nvml_index") for g in cuda_devices.visible_gpus(facade, env)}
    return [visible[c] for c in wanted if visible.get(c) is not None]


class Sampler:
    """CPU (and GPU) utilisation of process ``pid`` between ``start()`` and ``stop()``."""

    def __init__(self, pid: int, gpus: Sequence[int] = (), interval: float = INTERVAL, nvml_facade=None,
                 env: Optional[Mapping[str, str]] = None):
        self.pid = pid
        self.interval = interval
        self._cpu: List[tuple] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._gpu = None
        if gpus:
            from pytest_mxperf.machine import gpu_sampler, nvml
            facade = nvml_facade or nvml.load(env=env)
            self._gpu = gpu_sampler.Sampler(facade, list(gpus), interval=interval, pid=pid)

    def start(self) -> "Sampler":
        self._thread = threading.Thread(target=self._run, name="mxperf-cpu-sampler", daemon=True)
        self._thread.start()
        if self._gpu is not None:
            self._gpu.start()
        return self

    def _run(self) -> None:
        import psutil
        try:
            proc = psutil.Process(self.pid)
            proc.cpu_percent(None)
        except psutil.Error:
            return
        last = time.monotonic()
        while not self._stop.wait(self.interval):
            try:
                busy = proc.cpu_percent(None) / 100.0
            except psutil.Error:  # the worker ended
                return
            now = time.monotonic()  # the reading is psutil's average over (last, now]
            self._cpu.append((last, now, round(busy, 3)))
            last = now

    def stop(self) -> Dict[str, Any]:
        """The whole process's summary, plus ``"readings"`` (every reading with its
        ``time.monotonic()``) for ``with_timed_rounds``, which replaces them by the timed
        rounds' figures once the worker's result names its windows."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        t0 = self._cpu[0][0] if self._cpu else 0.0
        out: Dict[str, Any] = {"interval_s": self.interval,
                               "cpu": summarize_cpu([(round(end - t0, 2), busy) for _, end, busy in self._cpu])}
        readings: Dict[str, Any] = {"cpu": [list(r) for r in self._cpu]}
        if self._gpu is not None:
            self._gpu.stop()
            out["gpus"] = self._gpu.summary()
            out["gpu_own_memory"] = self._gpu.own_memory()
            readings["gpus"] = {i: [] for i in self._gpu.indices or ()}  # a GPU never read is one too
            for i, recs in self._gpu.samples().items():
                readings["gpus"][i] = [[r["t"], r.get("gpu_util_pct"), r.get("mem_util_pct")] for r in recs]
        out["readings"] = readings
        return out


def own_gpu_memory_mib(summary: Optional[Mapping[str, Any]]) -> Optional[float]:
    """The worker's own peak GPU memory in MiB from ``Sampler.stop()``'s summary (NVML's
    figure for its PID: ``gpu_sampler.Sampler.own_memory``); None when its GPUs were not
    sampled or NVML never gave that figure."""
    own = (summary or {}).get("gpu_own_memory") or {}
    peak = own.get("peak_bytes")
    return peak / 2 ** 20 if isinstance(peak, int) and not isinstance(peak, bool) else None


def summarize_cpu(samples: Sequence[tuple]) -> Dict[str, Any]:
    """{"samples", "mean_cpus", "max_cpus", "timeline"} from (seconds, CPUs busy) samples."""
    busy = [b for _, b in samples]
    if not busy:
        return {"samples": 0}
    step = max(1, -(-len(samples) // TIMELINE_POINTS))
    return {"samples": len(busy), "mean_cpus": round(sum(busy) / len(busy), 3), "max_cpus": max(busy),
            "timeline": [list(s) for s in samples[::step]]}


def merged_windows(windows: Any) -> List[List[float]]:
    """The worker's ``timed_windows`` as sorted [start, end] pairs, those closer than
    ``WINDOW_GAP_S`` joined; anything that is not a pair of numbers with end >= start is
    left out ([] when there is nothing usable)."""
    pairs = []
    for w in windows if isinstance(windows, (list, tuple)) else ():
        if (isinstance(w, (list, tuple)) and len(w) == 2
                and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in w) and w[1] >= w[0]):
            pairs.append([float(w[0]), float(w[1])])
    out: List[List[float]] = []
    for a, b in sorted(pairs):
        if out and a - out[-1][1] < WINDOW_GAP_S:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def over_windows(cpu_readings: Sequence[Sequence[float]], gpu_readings: Mapping[Any, Sequence[Sequence[Any]]],
                 windows: Any, interval: float = INTERVAL) -> Dict[str, Any]:
    """The utilisation of the timed rounds only, from timestamped readings (pure).

    ``cpu_readings``: (start, end, CPUs busy), psutil's average over (start, end];
    ``gpu_readings``: {NVML index: [(t, GPU %, memory %), ...]} read at t; ``windows``: the
    worker's ``timed_windows`` ([start, end], the same clock). A CPU reading counts when
    (start, end] lies inside a window; a GPU reading when t lies inside a window at least
    ``NVML_PERIOD_MAX_S`` long (the module's docstring says why). Returns {"windows",
    "seconds", "cpu", "gpus"}: per part the counted ``samples`` and, with at least
    ``MIN_TIMED_READINGS`` of them, the means and maxima, else ``too_short`` saying why."""
    merged = merged_windows(windows)
    long_ones = [w for w in merged if w[1] - w[0] >= NVML_PERIOD_MAX_S]

    def inside(a: float, b: float, among: Sequence[List[float]]) -> bool:
        return any(w0 <= a and b <= w1 for w0, w1 in among)

    seconds = sum(b - a for a, b in merged)
    cpu = [float(busy) for a, b, busy in cpu_readings if busy is not None and inside(a, b, merged)]
    out: Dict[str, Any] = {"windows": len(merged), "seconds": round(seconds, 3)}
    if len(cpu) >= MIN_TIMED_READINGS:
        out["cpu"] = {"samples": len(cpu), "mean_cpus": round(sum(cpu) / len(cpu), 3), "max_cpus": max(cpu)}
    else:
        out["cpu"] = {"samples": len(cpu),
                      "too_short": f"{len(cpu)} CPU readings (one every {interval:g} s) lie wholly inside "
                                   f"{seconds:.2f} s of timed rounds; {MIN_TIMED_READINGS} are needed"}
    gpus = []
    for index in sorted(gpu_readings):
        counted = [r for r in gpu_readings[index] if r[1] is not None and inside(r[0], r[0], long_ones)]
        g: Dict[str, Any] = {"index": int(index), "samples": len(counted)}
        if len(counted) >= MIN_TIMED_READINGS:
            util = [float(r[1]) for r in counted]
            mem = [float(r[2]) for r in counted if r[2] is not None]
            g.update(gpu_util_mean_pct=round(sum(util) / len(util), 2), gpu_util_max_pct=max(util),
                     mem_util_mean_pct=round(sum(mem) / len(mem), 2) if mem else None)
        else:
            g["too_short"] = (f"{len(counted)} NVML readings inside timed windows of at least "
                              f"{NVML_PERIOD_MAX_S:g} s ({seconds:.2f} s timed in {len(merged)} window(s)); "
                              f"NVML averages utilisation over a sample period of 1/6 s to 1 s, "
                              f"{MIN_TIMED_READINGS} readings are needed")
        gpus.append(g)
    out["gpus"] = gpus
    return out


def with_timed_rounds(usage: Optional[Mapping[str, Any]], windows: Any) -> Optional[Dict[str, Any]]:
    """``Sampler.stop()``'s summary as a new dict for the process's result: its readings
    replaced by ``"timed"`` (``over_windows`` of the worker's ``timed_windows``), or by
    nothing when the worker marked no window (its whole-process figures stay)."""
    if not usage:
        return None
    out = {k: v for k, v in usage.items() if k != "readings"}
    readings = usage.get("readings") or {}
    if merged_windows(windows):
        out["timed"] = over_windows(readings.get("cpu") or (), readings.get("gpus") or {}, windows,
                                    usage.get("interval_s") or INTERVAL)
    return out


def cpus_busy(summary: Optional[Mapping[str, Any]]) -> Optional[float]:
    """Mean CPUs busy: over the timed rounds when they tell, else over the whole process."""
    if not summary:
        return None
    timed = (summary.get("timed") or {}).get("cpu") or {}
    if timed.get("mean_cpus") is not None:
        return timed["mean_cpus"]
    return (summary.get("cpu") or {}).get("mean_cpus")


def labels(summary: Optional[Mapping[str, Any]], threads: Optional[int] = None) -> List[str]:
    """What the report says of one process's utilisation over its timed rounds (empty when
    nothing stands out, or when the worker marked no timed window)."""
    if not summary:
        return []
    out = []
    timed = summary.get("timed")
    throttled = {g.get("index"): g.get("slowdown_reasons_seen") for g in summary.get("gpus") or []}
    for g in (timed or {}).get("gpus") or []:
        mean = g.get("gpu_util_mean_pct")
        if g.get("too_short"):
            out.append(f"GPU {g.get('index')}: timed rounds too short to tell whether input- or host-bound "
                       f"({g['too_short']})")
        elif mean is not None and mean < HOST_BOUND_GPU_PCT:
            out.append(f"GPU {g.get('index')} busy {mean:.0f}% of the timed rounds (mean of {g.get('samples')} "
                       "readings inside them): input- or host-bound, the GPU waits for data or for the host")
    for index, reasons in throttled.items():
        if reasons:
            out.append(f"GPU {index} throttled: {', '.join(reasons)}")
    cpu = (timed or {}).get("cpu") or {}
    if timed is not None and not summary.get("gpus") and threads and cpu.get("mean_cpus") is not None \
            and cpu["mean_cpus"] < UNDERUSED_CPU_SHARE * threads:
        out.append(f"the worker kept {cpu['mean_cpus']:.2f} CPUs busy on average over its timed rounds with "
                   f"{threads} OpenMP threads: a serial part, waiting, or threads bound to fewer cores")
    return out


def describe(summary: Optional[Mapping[str, Any]]) -> Optional[str]:
    """One short line: CPUs busy and each GPU's mean utilisation over the timed rounds (and
    the whole process's GPU figure beside them), or over the whole process when the worker
    marked no timed window."""
    if not summary:
        return None
    whole = []
    cpu = summary.get("cpu") or {}
    if cpu.get("mean_cpus") is not None:
        whole.append(f"CPUs busy {cpu['mean_cpus']:.2f} (max {cpu['max_cpus']:.2f})")
    for g in summary.get("gpus") or []:
        if g.get("gpu_util_mean_pct") is not None:
            whole.append(f"GPU {g.get('index')} {g['gpu_util_mean_pct']:.0f}% busy, memory "
                         f"{g.get('mem_util_mean_pct') or 0:.0f}%")
    timed = summary.get("timed")
    if timed is None:
        return f"whole process (no timed window marked): {', '.join(whole)}" if whole else None
    parts = []
    tcpu = timed.get("cpu") or {}
    parts.append(f"CPUs busy {tcpu['mean_cpus']:.2f} (max {tcpu['max_cpus']:.2f})"
                 if tcpu.get("mean_cpus") is not None else "CPUs: too short to tell")
    for g in timed.get("gpus") or []:
        parts.append(f"GPU {g.get('index')} {g['gpu_util_mean_pct']:.0f}% busy, memory "
                     f"{g.get('mem_util_mean_pct') or 0:.0f}%" if g.get("gpu_util_mean_pct") is not None
                     else f"GPU {g.get('index')}: too short to tell")
    whole_gpus = [f"GPU {g.get('index')} {g['gpu_util_mean_pct']:.0f}%" for g in summary.get("gpus") or []
                  if g.get("gpu_util_mean_pct") is not None]
    return (f"timed rounds ({timed.get('seconds', 0.0):.2f} s): {', '.join(parts)}"
            + (f"; whole process: {', '.join(whole_gpus)}" if whole_gpus else ""))
