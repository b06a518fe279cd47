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
* **the load of other processes** while the worker ran (``LoadMeter``): the machine's busy
  time from /proc/stat minus the CPU time of our own waited-for children (the worker), and
  the hypervisor's steal.

``label`` turns these into one of four states, against the machine's quiet speed
(``reference_from`` the probes of the session and the baseline):

* "slowed": another process on this machine took CPU time while the worker ran, or the
  hypervisor stole it. Measured *during* the worker's run; the verdict leaves the process
  out (a neighbour's slowdown is no evidence about MXNet);
* "slow-spell": the probes before and after ran slow, with no process of ours to blame: the
  shared machine itself was in a slow spell. Kept in the statistics, because on the VMs
  here a spell often ends or starts *inside* a worker's run: in one A/B session (1.8.0.post0
  vs 1.9.1, 16 pairs of AlexNet b8) processes between two GEMM probes of 102-109 GFLOP/s
  ran at 86-157 img/s, as fast as the quiet ones (143-165), while quiet-labelled ones ran
  at 95. Leaving such processes out threw away 11 of 16 pairs there and decided nothing.
  Their use is narrower: a slowdown whose current processes ran mostly in a slow spell, when
  the baseline's did not, is not called a regression (``verdict``); in A/B mode both sides
  of a pair share the machine's time, so a spell needs no rule there;
* "quiet", or "unknown" (no probe or no reference).

The probe is never used to divide or correct a throughput figure.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from . import spawn, topology
from .stats import quantile

#: a probe figure (the lower of before / after) below this fraction of the machine's quiet
#: reference means a slow spell (the recorded slow regime is ~0.5 of the fast one)
SLOWED_RATIO = 0.80
#: the labels
QUIET, SLOWED, SPELL, UNKNOWN = "quiet", "slowed", "slow-spell", "unknown"
#: other processes keeping more than this many CPUs busy on average while the worker ran
#: slow it (on 2 vCPUs, half a CPU taken is a quarter of the machine)
OTHER_LOAD_CPUS = 0.5
#: more steal than this fraction of the CPU time while the worker ran: the hypervisor took
#: the CPUs
STEAL_FRAC = 0.05
#: the quiet reference is this quantile of the probes (see ``reference_from``)
REFERENCE_QUANTILE = 0.75
#: what the probe measures: ~0.4 s of timing, ~0.6 s for the whole process
PROBE_SPEC = {"seconds": 0.4, "gemm_n": 512, "stream_mib": 64}
PROBE_TIMEOUT = 60.0
PROBE_MODULE = "pytest_mxperf.workers.calibrate"
FIGURES = (("gemm_gflops", "GEMM probe", "GFLOP/s"), ("stream_gbps", "memory probe", "GB/s"))

# Variables that change threads or their placement: the probe never inherits them.
_THREADING_PREFIXES = ("OMP_", "KMP_", "GOMP_", "MXNET_")
_THREADING_NAMES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS", "NUMEXPR_NUM_THREADS")


#: tests of the parent side set this to {"probe": {...}, "load": {...}} (JSON): the machine
#: state is then taken as given instead of measured, so the gate's decisions can be checked
#: on a machine whose real state a test cannot control
FAKE_ENV = "MXPERF_FAKE_MACHINE_STATE"


def _fake(part: str) -> Optional[Dict[str, Any]]:
    text = os.environ.get(FAKE_ENV)
    if not text:
        return None
    import json
    value = json.loads(text).get(part)
    return dict(value) if isinstance(value, dict) else None


def probe_env(base_env: Mapping[str, str]) -> Dict[str, str]:
    """The probe's fixed environment: the user's threading and affinity variables dropped,
    the threads set to the physical cores available. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
    are kept: some CPUs need them for OpenBLAS to run correctly at all. PYTHONWARNINGS is
    dropped (a test session's ``error`` filter must not turn numpy's warnings into a crash)."""
    env = {k: v for k, v in base_env.items()
           if not k.startswith(_THREADING_PREFIXES) and k not in _THREADING_NAMES}
    n = str(topology.available_physical_cores())
    env.update(OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n)
    env.pop("PYTHONWARNINGS", None)
    return spawn.with_package_path(env)


def run_probe(python: Optional[str] = None, timeout: float = PROBE_TIMEOUT,
              env: Optional[Mapping[str, str]] = None) -> Optional[Dict[str, float]]:
    """One probe process: {"gemm_gflops", "stream_gbps", "seconds" (its timing),
    "process_seconds" (the whole process), "blas_threads" (when known)}, or None when it
    failed.

    The current interpreter by default, never ``--perf-python``: the probe must not depend
    on the MXNet install being measured. ``env`` is the base environment (os.environ by
    default) that ``probe_env`` fixes."""
    fake = _fake("probe")
    if fake is not None:
        return fake
    from .runner import run_process
    out = run_process(spawn.python_command(python, PROBE_MODULE), dict(PROBE_SPEC), timeout=timeout,
                      env=probe_env(os.environ if env is None else env))
    p = out.payload or {}
    try:
        figs = {k: float(p[k]) for k in ("gemm_gflops", "stream_gbps", "seconds")}
    except (KeyError, TypeError, ValueError):
        return None
    if out.status != "ok" or not all(0 < v < float("inf") for v in figs.values()):
        return None
    figs["process_seconds"] = out.wall_seconds
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
        fake = _fake("load")
        if fake is not None:
            return fake
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


@dataclasses.dataclass
class MachineState:
    """The machine's state around one worker process, and the evidence for it."""

    state: str  # "quiet" | "slowed" | "unknown"
    reason: str = ""  # one line: the figures that made it slowed / unknown
    probe_before: Optional[Mapping[str, Any]] = None
    probe_after: Optional[Mapping[str, Any]] = None
    load: Optional[Mapping[str, Any]] = None


def _number(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def reference_from(probes: Sequence[Optional[Mapping[str, Any]]]) -> Optional[Dict[str, float]]:
    """The machine's quiet speed from many probes: the REFERENCE_QUANTILE (75th percentile)
    of each figure; None when there are no probes.

    Not the median: on the recorded 2-vCPU EPYC VM a third of the processes ran in the slow
    regime (AlexNet A/A pairs: 8 of 24 at ~95 img/s against ~155; ResNet-50: 4 of 12 at 24
    against ~36), and the GEMM probe moved with them (100 against 215 GFLOP/s). The 75th
    percentile stays inside the fast regime while up to ~70% of the probes are slow, where
    the median already falls between the regimes at 50%. Not the maximum: one lucky probe
    (turbo, an idle neighbour) would set a bar no ordinary quiet probe reaches."""
    out = {}
    for key, _, _ in FIGURES:
        vals = [v for v in (_number((p or {}).get(key)) for p in probes) if v and v > 0]
        if vals:
            out[key] = quantile(vals, REFERENCE_QUANTILE)
    return out or None


def label(probe_before: Optional[Mapping[str, Any]], probe_after: Optional[Mapping[str, Any]],
          load: Optional[Mapping[str, Any]], reference: Optional[Mapping[str, float]]) -> MachineState:
    """Quiet, slowed, slow-spell or unknown for one process (see the module doc).

    Slowed when other processes kept more than OTHER_LOAD_CPUS busy or steal exceeded
    STEAL_FRAC while the worker ran; a slow spell when, short of that, the lower of the
    probes before and after is under SLOWED_RATIO of the reference (GEMM or memory); the
    reason lists every such figure. Unknown when there is no probe (or no reference) and
    the load does not say slowed; quiet otherwise."""
    reasons: List[str] = []
    spell: List[str] = []
    probes = [p for p in (probe_before, probe_after) if p]
    for key, name, unit in FIGURES:
        vals = [v for v in (_number(p.get(key)) for p in probes) if v is not None]
        ref = _number((reference or {}).get(key))
        if vals and ref and min(vals) < SLOWED_RATIO * ref:
            spell.append(f"{name} {min(vals):.0f} {unit} < {100 * SLOWED_RATIO:.0f}% of the machine's {ref:.0f}")
    other = _number((load or {}).get("other_cpus"))
    if other is not None and other > OTHER_LOAD_CPUS:
        reasons.append(f"other processes kept {other:.1f} CPUs busy (> {OTHER_LOAD_CPUS:g})")
    steal = _number((load or {}).get("steal_frac"))
    if steal is not None and steal > STEAL_FRAC:
        reasons.append(f"steal time {100 * steal:.0f}% (> {100 * STEAL_FRAC:.0f}%)")

    def state(s: str, reason: str) -> MachineState:
        return MachineState(s, reason, probe_before, probe_after, load)

    if reasons:
        return state(SLOWED, "; ".join(reasons + spell))
    if spell:
        return state(SPELL, "; ".join(spell))
    if not probes:
        return state("unknown", "no machine probe")
    if not reference:
        return state("unknown", "no quiet reference for the machine probe")
    return state("quiet", "")


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


def spell_depth(runs, reference: Optional[Mapping[str, float]]) -> Optional[float]:
    """How far a slow spell slowed the machine at its worst among ``runs``: the lowest
    ratio of a probe figure (the lower of before / after) to the quiet reference, over the
    processes labelled "slow-spell"; None when none was or nothing can be compared.

    On the recorded VM the GEMM probe moved further than MXNet with the regimes (x0.47
    against ResNet-50's x0.65), so a slowdown deeper than this ratio is more than the
    spell can explain (``verdict``: such a slowdown is judged, not excused)."""
    depth: Optional[float] = None
    for r in runs:
        st = r.meta.get("machine_state") or {}
        if st.get("state") != SPELL:
            continue
        for key, _, _ in FIGURES:
            ref = _number((reference or {}).get(key))
            vals = [v for v in (_number((p or {}).get(key)) for p in (st.get("probe_before"), st.get("probe_after")))
                    if v is not None]
            if ref and vals:
                ratio = min(vals) / ref
                depth = ratio if depth is None else min(depth, ratio)
    return depth


def states(runs) -> list:
    """The machine-state labels of a list of RunResults (None where not labelled)."""
    return [(r.meta.get("machine_state") or {}).get("state") for r in runs]
