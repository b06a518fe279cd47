"""Was the machine slowed while a worker ran? Evidence that an MXNet change cannot move.

On shared VMs the machine itself changes speed: one cell's consecutive processes measured
36, 35, then 24, 24, 24 img/s at full CPU utilisation with no steal time
(``vm-regimes-amd-epyc-2vcpu.json`` in the shared data), and a neighbour can take CPUs or
memory bandwidth. A worker's own CPU utilisation cannot tell that apart from a slower
MXNet: a less parallel kernel lowers it exactly as a busy machine does. So the suite
measures the machine, not the worker:

* **a calibration probe** (``workers/calibrate.py``: numpy's BLAS GEMM and a memory copy
  larger than the caches), run right before and right after each worker as *its own
  process* with a fixed environment (``probe_env``). A probe inside the worker would
  inherit the very thread and affinity settings whose change it must tell apart, and would
  compete with the timed part on 2 cores. On the VM above the GEMM probe moved 100-215
  GFLOP/s with the regimes while ResNet-50 moved 28-44 img/s;
* **the machine, not the setup.** The session's setup must not move the probe, or a setup
  that slows MXNet would slow the probe too and be filed as the machine's slow spell (seen:
  a session under a setup that halved MXNet's parallelism, AlexNet b8 -48%, its GEMM probe
  at 82 GFLOP/s against 153, "unresolved: 67% of the processes ran in a slow spell"): one
  thread's GEMM, as the probe of a session under ``taskset -c 0`` inherited its one-CPU mask
  and threads for it, and one under a quota it saw got one thread (about half of two threads'
  GEMM: docs/how-it-measures.md, "What a run does", *The machine is measured too*). So the
  probe drops every threading, affinity and BLAS variable (``probe_env``); it runs on the machine's CPUs
  (``topology.machine_cpus``: the cpuset's, not the affinity mask ``taskset`` narrowed,
  which a child inherits and OpenBLAS sizes its threads by) with threads for their physical
  cores (``probe_threads``); and what it cannot escape, a cgroup CPU quota (read from this
  process's own cgroup) and the BLAS variables it keeps, it records as its ``setup``
  (``probe_setup``), so that ``judge/machine_states.py`` holds it only to probes of the
  same setup;
* **the load of other processes** while the worker ran (``LoadMeter``): the machine's busy
  time from /proc/stat minus the CPU time of our own waited-for children (the worker), and
  the hypervisor's steal.

What these figures mean for a process (quiet, slowed, slow spell) is
``judge/machine_states.py``'s. The probe is never used to divide or correct a throughput figure.
"""

from __future__ import annotations

import os
import resource
import time
from typing import Any, Callable, Dict, Mapping, Optional

from pytest_mxperf.machine import topology
from pytest_mxperf.proc import spawn

#: what the probe measures: ~0.4 s of timing, ~0.6 s for the whole process
PROBE_SPEC = {"seconds": 0.4, "gemm_n": 512, "stream_mib": 64}
PROBE_TIMEOUT = 60.0
PROBE_MODULE = "pytest_mxperf.workers.calibrate"
FIGURES = (("gemm_gflops", "GEMM probe", "GFLOP/s"), ("stream_gbps", "memory probe", "GB/s"))

# Variables that change threads, their placement or the BLAS kernels: the probe never
# inherits them, but for KEPT_BLAS_VARIABLES (some CPUs need them for OpenBLAS to run
# correctly at all), which its setup records instead.
_THREADING_PREFIXES = ("OMP_", "KMP_", "GOMP_", "MXNET_", "OPENBLAS_", "GOTO", "MKL_", "BLIS_")
_THREADING_NAMES = ("NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")
KEPT_BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def probe_threads() -> int:
    """The probe's threads: the physical cores of the machine's CPUs (``topology.machine_cpus``:
    the cpuset's, whatever ``taskset`` left the session), capped by the cgroup quota."""
    return topology.available_physical_cores(topology.machine_cpus())


def probe_env(base_env: Mapping[str, str]) -> Dict[str, str]:
    """The probe's fixed environment: the user's threading, affinity and BLAS variables
    dropped, the threads set to ``probe_threads``. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are
    kept (``KEPT_BLAS_VARIABLES``). PYTHONWARNINGS is dropped (a test session's ``error``
    filter must not turn numpy's warnings into a crash)."""
    env = {k: v for k, v in base_env.items()
           if k in KEPT_BLAS_VARIABLES or not (k.startswith(_THREADING_PREFIXES) or k in _THREADING_NAMES)}
    n = str(probe_threads())
    env.update(OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n)
    env.pop("PYTHONWARNINGS", None)
    return spawn.with_package_path(env)


def probe_setup(cpus: Optional[int], env: Mapping[str, str]) -> Dict[str, Any]:
    """What a probe ran on, as far as the session's setup can move its figures: ``cpus`` (how
    many CPUs it ran on, its affinity widened to the machine's), ``quota_cpus`` (the cgroup
    CPU quota, which it cannot escape; None when unlimited), ``env`` (the kept BLAS
    variables it ran with). ``judge/machine_states.py`` compares only probes of one setup."""
    return {"cpus": cpus, "quota_cpus": topology.cgroup_cpu_quota(),
            "env": {k: env[k] for k in KEPT_BLAS_VARIABLES if k in env}}


def run_probe(python: Optional[str] = None, timeout: float = PROBE_TIMEOUT,
              env: Optional[Mapping[str, str]] = None) -> Optional[Dict[str, Any]]:
    """One probe process: {"gemm_gflops", "stream_gbps", "seconds" (its timing),
    "process_seconds" (the whole process), "setup" (``probe_setup``), "blas_threads" (when
    known)}, or None when it failed.

    The current interpreter by default, never ``--perf-python``: the probe must not depend
    on the MXNet install being measured. ``env`` is the base environment (os.environ by
    default) that ``probe_env`` fixes. It runs on the machine's CPUs
    (``topology.machine_cpus``), whatever the session's affinity mask."""
    from pytest_mxperf.proc.worker import run_process
    penv = probe_env(os.environ if env is None else env)
    out = run_process(spawn.python_command(python, PROBE_MODULE), dict(PROBE_SPEC, cpus=list(topology.machine_cpus())),
                      timeout=timeout, env=penv)
    p = out.payload or {}
    try:
        figs: Dict[str, Any] = {k: float(p[k]) for k in ("gemm_gflops", "stream_gbps", "seconds")}
    except (KeyError, TypeError, ValueError):
        return None
    if out.status != "ok" or not all(0 < v < float("inf") for v in figs.values()):
        return None
    figs["process_seconds"] = out.wall_seconds
    figs["setup"] = probe_setup(p["cpus"] if isinstance(p.get("cpus"), int) else None, penv)
    if isinstance(p.get("blas_threads"), int):
        figs["blas_threads"] = p["blas_threads"]
    return figs


def parse_proc_stat(text: str) -> Dict[str, int]:
    """The aggregate ``cpu`` line of /proc/stat, in clock ticks: busy (user, nice, system,
    irq, softirq; guest time is already inside user), idle (with iowait), steal, total."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            v = [int(x) for x in parts[1:]] + [0] * 10
            user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
            busy = user + nice + system + irq + softirq
            return {"busy": busy, "idle": idle + iowait, "steal": steal, "total": busy + idle + iowait + steal}
    raise ValueError("no aggregate 'cpu' line in /proc/stat")


def _read_proc_stat() -> str:
    with open("/proc/stat") as fh:
        return fh.read()


def own_cpu_seconds() -> float:
    """CPU seconds of our waited-for children and of this process itself (its supervision
    of the worker is not another process's load either)."""
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    s = resource.getrusage(resource.RUSAGE_SELF)
    return c.ru_utime + c.ru_stime + s.ru_utime + s.ru_stime


class LoadMeter:
    """CPU time used by *other* processes while ours ran, and steal.

    ``start()`` before the worker, ``stop()`` after it was waited for (its CPU time is then
    in RUSAGE_CHILDREN). ``reader`` (the text of /proc/stat), ``own_cpu``, ``clock`` and
    ``hz`` are injectable for tests."""

    def __init__(self, reader: Callable[[], str] = _read_proc_stat,
                 own_cpu: Callable[[], float] = own_cpu_seconds,
                 clock: Callable[[], float] = time.monotonic, hz: Optional[int] = None):
        self.reader, self.own_cpu, self.clock = reader, own_cpu, clock
        self.hz = hz or os.sysconf("SC_CLK_TCK")
        self._start: Optional[tuple] = None

    def _snapshot(self) -> tuple:
        return parse_proc_stat(self.reader()), self.own_cpu(), self.clock()

    def start(self) -> None:
        try:
            self._start = self._snapshot()
        except (OSError, ValueError):
            self._start = None

    def stop(self) -> Optional[Dict[str, float]]:
        """{"wall_s", "other_cpus" (average CPUs busy with work that was not ours, floored
        at 0), "steal_frac" (of all CPU time)}, or None when /proc/stat was unreadable."""
        if self._start is None:
            return None
        try:
            st1, own1, t1 = self._snapshot()
        except (OSError, ValueError):
            return None
        st0, own0, t0 = self._start
        wall = t1 - t0
        if wall <= 0:
            return None
        busy = (st1["busy"] - st0["busy"]) / self.hz
        total = st1["total"] - st0["total"]
        other = max(0.0, busy - (own1 - own0))
        return {"wall_s": wall, "other_cpus": other / wall,
                "steal_frac": (st1["steal"] - st0["steal"]) / total if total > 0 else 0.0}


def wait_for_quiet(threshold: float, max_wait: float, window: float = 2.0) -> tuple:
    """Wait (up to ``max_wait`` s) until a ``window`` of /proc/stat shows other processes
    keeping fewer than ``threshold`` CPUs busy; returns (seconds waited, last reading).
    For benchmark scripts that would rather start on a quiet machine."""
    t0 = time.monotonic()
    while True:
        meter = LoadMeter()
        meter.start()
        time.sleep(window)
        other = (meter.stop() or {}).get("other_cpus")
        waited = time.monotonic() - t0
        if other is None or other < threshold or waited >= max_wait:
            return waited, other


