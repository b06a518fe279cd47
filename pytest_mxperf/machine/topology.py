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
from typing import Dict, Iterable, Mapping, Optional, Tuple

SYSFS_CPU = Path("/sys/devices/system/cpu")

# Variables that change how MXNet (or its OpenMP / BLAS runtimes) behaves. They are
# passed to the worker when the user set them, recorded beside every result, and
# diffed against the baseline.
RECORDED_ENV_PREFIXES = ("OMP_", "KMP_", "MXNET_", "OPENBLAS_", "MKL_", "MKLDNN_", "DNNL_", "GOMP_",
                         "CUDA_", "NCCL_", "DMLC_", "NVIDIA_TF32_OVERRIDE")  # the last: TF32 off (tensor_math.py)


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


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> Optional[float]:
    """CPUs allowed by the cgroup quota (v2 ``cpu.max`` or v1 cfs), or None when unlimited."""
    text = _read(root / "cpu.max")
    if text:
        quota, _, period = text.partition(" ")
        if quota != "max":
            try:
                return int(quota) / int(period or 100000)
            except ValueError:
                return None
        return None
    q = _read(root / "cpu" / "cpu.cfs_quota_us") or _read(root / "cpu.cfs_quota_us")
    p = _read(root / "cpu" / "cpu.cfs_period_us") or _read(root / "cpu.cfs_period_us")
    try:
        if q is not None and p is not None and int(q) > 0:
            return int(q) / int(p)
    except ValueError:
        pass
    return None


def available_physical_cores() -> int:
    """Physical cores within the affinity mask, capped by the cgroup quota (at least 1)."""
    cores = physical_cores(affinity_cpus())
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


def recorded_env(env: Mapping[str, str]) -> Dict[str, str]:
    return {k: v for k, v in sorted(env.items()) if k.startswith(RECORDED_ENV_PREFIXES)}


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
