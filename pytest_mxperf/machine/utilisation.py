"""How busy a worker kept the machine while it ran, sampled from the parent.

The lecture's first questions ("what is my GPU utilisation? what is my CPU utilisation?")
asked of every worker process. Sampling happens in the parent, in a background thread,
never inside the worker: on a 2-vCPU machine a sampler inside it would take a core from
the very run it watches.

* CPU: ``psutil.Process(pid).cpu_percent`` of the worker (all its threads, OpenMP's
  included) every ``INTERVAL`` seconds, as CPUs busy (1.0 = one CPU);
* GPU: where the worker's contexts are GPUs, NVML's utilisation, memory, clocks and
  throttle reasons of those GPUs (``gpu_sampler.Sampler``; ``gpu:N`` is mapped to its NVML GPU as
  the worker's CUDA sees it, ``cuda_devices.map_visible``).

The summary goes into each process's result (``meta["utilisation"]``) and so into
``results.json``; ``labels`` turns it into the words of the report: a GPU cell whose GPUs
were busy less than ``HOST_BOUND_GPU_PCT`` of the time is input- or host-bound (the GPU
waits for data or for the Python side), a CPU cell whose worker kept fewer than
``UNDERUSED_CPU_SHARE`` of its OpenMP threads busy used the cores it was given poorly.
Shown, never judged: the throughput is what is judged.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

INTERVAL = 0.25
TIMELINE_POINTS = 120           # at most this many (seconds, CPUs busy) points are kept
HOST_BOUND_GPU_PCT = 50.0       # mean GPU utilisation below this: input- or host-bound
UNDERUSED_CPU_SHARE = 0.6       # mean CPUs busy below this share of the OpenMP threads


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
            self._gpu = gpu_sampler.Sampler(facade, list(gpus), interval=interval)

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
        t0 = time.monotonic()
        while not self._stop.wait(self.interval):
            try:
                busy = proc.cpu_percent(None) / 100.0
            except psutil.Error:  # the worker ended
                return
            self._cpu.append((round(time.monotonic() - t0, 2), round(busy, 3)))

    def stop(self) -> Dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        out: Dict[str, Any] = {"interval_s": self.interval, "cpu": summarize_cpu(self._cpu)}
        if self._gpu is not None:
            self._gpu.stop()
            out["gpus"] = self._gpu.summary()
        return out


def summarize_cpu(samples: Sequence[tuple]) -> Dict[str, Any]:
    """{"samples", "mean_cpus", "max_cpus", "timeline"} from (seconds, CPUs busy) samples."""
    busy = [b for _, b in samples]
    if not busy:
        return {"samples": 0}
    step = max(1, -(-len(samples) // TIMELINE_POINTS))
    return {"samples": len(busy), "mean_cpus": round(sum(busy) / len(busy), 3), "max_cpus": max(busy),
            "timeline": [list(s) for s in samples[::step]]}


def labels(summary: Optional[Mapping[str, Any]], threads: Optional[int] = None) -> List[str]:
    """What the report says of one process's utilisation (empty when nothing stands out)."""
    if not summary:
        return []
    out = []
    for g in summary.get("gpus") or []:
        mean = g.get("gpu_util_mean_pct")
        if mean is not None and mean < HOST_BOUND_GPU_PCT:
            out.append(f"GPU {g.get('index')} busy {mean:.0f}% of the time (mean over {g.get('samples')} samples): "
                       "input- or host-bound, the GPU waits for data or for the host")
        if g.get("slowdown_reasons_seen"):
            out.append(f"GPU {g.get('index')} throttled: {', '.join(g['slowdown_reasons_seen'])}")
    cpu = summary.get("cpu") or {}
    if not summary.get("gpus") and threads and cpu.get("mean_cpus") is not None \
            and cpu.get("samples", 0) >= 4 and cpu["mean_cpus"] < UNDERUSED_CPU_SHARE * threads:
        out.append(f"the worker kept {cpu['mean_cpus']:.2f} CPUs busy on average with {threads} OpenMP threads: "
                   "a serial part, waiting, or threads bound to fewer cores")
    return out


def describe(summary: Optional[Mapping[str, Any]]) -> Optional[str]:
    """One short line: CPUs busy, and each GPU's mean utilisation."""
    if not summary:
        return None
    parts = []
    cpu = summary.get("cpu") or {}
    if cpu.get("mean_cpus") is not None:
        parts.append(f"CPUs busy {cpu['mean_cpus']:.2f} (max {cpu['max_cpus']:.2f})")
    for g in summary.get("gpus") or []:
        if g.get("gpu_util_mean_pct") is not None:
            parts.append(f"GPU {g.get('index')} {g['gpu_util_mean_pct']:.0f}% busy, memory "
                         f"{g.get('mem_util_mean_pct') or 0:.0f}%")
    return ", ".join(parts) or None
