"""Facts about this machine's hardware, read without importing mxnet.

CPU facts come from ``/proc/cpuinfo`` and the process's affinity; GPU facts from
``nvidia-smi`` when it exists (MXNet itself cannot name a GPU). The fingerprint and the
"which published table applies" rules are built on these facts.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from . import topology

NVIDIA_SMI_QUERY = "name,memory.total,driver_version"


@dataclasses.dataclass(frozen=True)
class HardwareInfo:
    """The facts the published-table rules need (tables.select_floor)."""

    cpu_model: str
    vcpus: int  # logical CPUs available to the process
    gpu_names: Tuple[str, ...] = ()


CPUINFO_FIELDS = {"vendor_id": "vendor", "model name": "model_name", "cpu family": "family", "model": "model",
                  "stepping": "stepping", "cache size": "cache_size", "cpu MHz": "mhz"}


def parse_cpuinfo(text: str) -> Dict[str, object]:
    """The first processor block's identity fields and the flags, from /proc/cpuinfo text."""
    info: Dict[str, object] = {}
    for line in text.splitlines():
        if not line.strip():
            if info:
                break
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "flags":
            info["flags"] = value.split()
        elif key in CPUINFO_FIELDS:
            info[CPUINFO_FIELDS[key]] = value
    return info


@functools.lru_cache(maxsize=1)
def cpu_info() -> Dict[str, object]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:  # pragma: no cover - not Linux
        text = ""
    info = parse_cpuinfo(text)
    if "model_name" not in info:
        import platform
        info["model_name"] = platform.processor() or "unknown CPU"
    return info


def parse_nvidia_smi(text: str) -> List[Dict[str, str]]:
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0]:
            gpus.append({"name": parts[0], "memory_total": parts[1], "driver": parts[2]})
    return gpus


@functools.lru_cache(maxsize=1)
def gpu_info() -> List[Dict[str, str]]:
    """GPUs as nvidia-smi reports them; [] when there is no nvidia-smi or it fails."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi(out.stdout) if out.returncode == 0 else []


def hardware_info():
    """The facts the published-table rules need."""
    return HardwareInfo(cpu_model=str(cpu_info().get("model_name", "unknown CPU")),
                        vcpus=len(topology.affinity_cpus()),
                        gpu_names=tuple(g["name"] for g in gpu_info()))


def summary() -> Dict[str, object]:
    cpu = cpu_info()
    return {"cpu_model": cpu.get("model_name"), "logical_cpus": len(topology.affinity_cpus()),
            "physical_cores": topology.available_physical_cores(),
            "gpus": [g["name"] for g in gpu_info()]}


def gpu_name(index: int) -> Optional[str]:
    gpus = gpu_info()
    return gpus[index]["name"] if 0 <= index < len(gpus) else None
