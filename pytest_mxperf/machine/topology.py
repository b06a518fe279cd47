"""CPU topology as the process sees it, and the worker environment built from it.

The published advice for MXNet on CPU is one OpenMP thread per *physical* core.
We count physical cores from the kernel's topology (``/sys/devices/system/cpu``),
restricted to the CPUs in this process's affinity mask and to its cgroup CPU quota;
never a blind "vCPUs / 2" (on a VM with one thread per core that halves the machine).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

# the variables recorded beside every result and diffed against the baseline: declared on the
# child side, where a worker reports them as it got them
from pytest_mxperf.workers.protocol import RECORDED_ENV_PREFIXES, recorded_env  # noqa: F401

SYSFS_CPU = Path("/sys/devices/system/cpu")
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


def affinity_cpus() -> Tuple[int, ...]:
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return tuple(range(os.cpu_count() or 1))


def _read(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def physical_cores(cpus: Iterable[int], sysfs: Path = SYSFS_CPU) -> int:
    """Number of distinct (package, core) pairs among ``cpus``; falls back to len(cpus)."""
    cpus = list(cpus)
    seen = set()
    for cpu in cpus:
        topo = sysfs / f"cpu{cpu}" / "topology"
        core = _read(topo / "core_id")
        pkg = _read(topo / "physical_package_id")
        if core is None or pkg is None:
            return len(cpus)
        seen.add((pkg, core))
    return len(seen) or len(cpus)


def parse_cpu_list(text: str) -> Tuple[int, ...]:
    """The CPUs of a kernel CPU list (``0-3,8``: /sys/devices/system/cpu/online, cpuset files)."""
    cpus = set()
    for part in (text or "").replace("\n", ",").split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            cpus.update(range(int(lo), int(hi or lo) + 1))
    return tuple(sorted(cpus))


def cgroup_dirs(controller: str, root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> List[Path]:
    """This process's cgroup directories for ``controller`` ("cpu", "cpuset"), its own first,
    then each ancestor, then the mount itself (where a container sees its own cgroup at the
    root): cgroup v2 (``0::/path`` in /proc/self/cgroup, one hierarchy at ``root``) and v1
    (``N:cpu,cpuacct:/path``, one hierarchy a controller under ``root``)."""
    dirs: List[Path] = []
    for line in (_read(proc_cgroup) or "").splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            mounts = [root]
        elif controller in controllers.split(","):
            mounts = [root / controllers, root / controller]
        else:
            continue
        parts = [x for x in path.split("/") if x]
        dirs += [m.joinpath(*parts[:i]) for m in mounts for i in range(len(parts), 0, -1)]
    dirs += [root / controller, root]
    return list(dict.fromkeys(dirs))


def _quota_in(d: Path) -> Optional[float]:
    """The CPUs a cgroup directory's own quota allows (v2 ``cpu.max``, v1 cfs), None when unlimited."""
    text = _read(d / "cpu.max")
    if text:
        quota, _, period = text.partition(" ")
        try:
            return int(quota) / int(period or 100000) if quota != "max" else None
        except ValueError:
            return None
    try:
        q, p = int(_read(d / "cpu.cfs_quota_us") or -1), int(_read(d / "cpu.cfs_period_us") or 0)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def cgroup_cpu_quota(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> Optional[float]:
    """CPUs allowed by the cgroup quota (v2 ``cpu.max`` or v1 cfs), or None when unlimited:
    the tightest quota of this process's own cgroup and its ancestors (``cgroup_dirs``).
    Own cgroup, not the mount's root: ``systemd-run -p CPUQuota=100%`` on a host sets
    ``cpu.max`` in the unit's cgroup, where the root's says nothing."""
    quotas = [q for q in map(_quota_in, cgroup_dirs("cpu", root, proc_cgroup)) if q is not None]
    return min(quotas) if quotas else None


def machine_cpus(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP, sysfs: Path = SYSFS_CPU
                 ) -> Tuple[int, ...]:
    """The CPUs this process's cpuset allows, whatever its affinity mask: ``taskset`` narrows
    the mask, not the machine. The nearest cgroup's effective cpuset (v2
    ``cpuset.cpus.effective``, v1 ``cpuset.effective_cpus``), else every online CPU, else
    the affinity mask."""
    for d in cgroup_dirs("cpuset", root, proc_cgroup):
        for name in ("cpuset.cpus.effective", "cpuset.effective_cpus"):
            cpus = parse_cpu_list(_read(d / name) or "")
            if cpus:
                return cpus
    return parse_cpu_list(_read(sysfs / "online") or "") or affinity_cpus()


def available_physical_cores(cpus: Optional[Iterable[int]] = None) -> int:
    """Physical cores within the affinity mask (or among ``cpus``), capped by the cgroup quota
    (at least 1)."""
    cores = physical_cores(affinity_cpus() if cpus is None else cpus)
    quota = cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, max(1, math.floor(quota)))
    return max(1, cores)


def describe() -> Dict[str, object]:
    cpus = affinity_cpus()
    return {
        "affinity_cpus": list(cpus),
        "logical_cpus": len(cpus),
        "physical_cores": physical_cores(cpus),
        "cgroup_quota_cpus": cgroup_cpu_quota(),
        "default_threads": available_physical_cores(),
    }


def default_threads(profile: str, num_cpu_contexts: int, cores: Optional[int] = None) -> int:
    """OpenMP threads the suite chooses for a threading profile when the user set none."""
    cores = available_physical_cores() if cores is None else cores
    if profile == "auto":
        return cores
    if profile == "per-context":
        return max(1, cores // max(1, num_cpu_contexts))
    return int(profile)


def worker_env(base: Mapping[str, str], profile: str, num_cpu_contexts: int,
               cores: Optional[int] = None) -> Tuple[Dict[str, str], Dict[str, str]]:
    """The worker's environment: the user's variables win, the suite's defaults fill the gaps.

    Returns (env, defaults_applied).
    """
    env = dict(base)
    defaults: Dict[str, str] = {}
    if "OMP_NUM_THREADS" not in env:
        defaults["OMP_NUM_THREADS"] = str(default_threads(profile, num_cpu_contexts, cores))
    env.update(defaults)
    # MXNet's import-time DeprecationWarnings must not turn into errors in the worker,
    # whatever PYTHONWARNINGS the user exported for their own code.
    env.pop("PYTHONWARNINGS", None)
    return env, defaults
