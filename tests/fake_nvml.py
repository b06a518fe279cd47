"""Fake NVML boxes for the tests: specs (the ``$MXPERF_FAKE_NVML`` JSON format, see
``pytest_mxperf/machine/nvml.py``) and pynvml-like modules built from them.

``module(spec)`` is ``pytest_mxperf.machine.nvml.FakeNVML(spec)``: the same function names,
parameters, constants and error classes (``NVMLError_NotSupported``, ...) as nvidia-ml-py's
``pynvml``. The stand-in lives in the package because the plugin's own end-to-end tests
start pytest in a subprocess that finds it through ``$MXPERF_FAKE_NVML``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from pytest_mxperf.machine.nvml import FakeNVML

MIB = 2 ** 20


def uuid(n: int, family: str = "0") -> str:
    """A well-formed, distinct NVML UUID: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    h = hashlib.md5(f"{family}-{n}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def device(name: str, cc: str, memory_mib: int, bus: str, uid: str, *, max_sm: int, max_mem: int,
           power_w: Optional[float], nvlinks: Optional[List[Any]] = None, **extra) -> Dict[str, Any]:
    d: Dict[str, Any] = {
        "name": name, "uuid": uid, "pci_bus_id": bus, "memory_total_bytes": memory_mib * MIB,
        "compute_capability": cc, "max_clocks_mhz": {"sm": max_sm, "mem": max_mem}, "power_limit_w": power_w,
        "volatile": {"memory_used_bytes": 0, "sm_clock_mhz": max_sm // 4, "mem_clock_mhz": max_mem,
                     "gpu_util_pct": 0, "mem_util_pct": 0, "temperature_c": 30, "power_draw_w": 25.0,
                     "throttle_bitmask": 0x1},
    }
    if nvlinks is not None:
        d["nvlinks"] = nvlinks
    d.update(extra)
    return d


def p100_pcie_box(reverse_nvml_order: bool = False) -> Dict[str, Any]:
    """2 x Tesla P100-PCIE-16GB under one host bridge, no NVLink (NVLink queries are
    NotSupported on PCIe P100s). ``reverse_nvml_order``: NVML index 0 is the GPU with the
    higher PCI bus id (NVML does not promise PCI order)."""
    devs = [device("Tesla P100-PCIE-16GB", "6.0", 16280, bus, uuid(i, "p100"), max_sm=1328, max_mem=715,
                   power_w=250.0)
            for i, bus in enumerate(("00000000:04:00.0", "00000000:82:00.0"))]
    if reverse_nvml_order:
        devs.reverse()
    return {"driver_version": "535.104.05", "cuda_driver_version": 12020,
            "topology": [[0, 1, "HOSTBRIDGE"]], "devices": devs}


A100_BUSES = ("00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
              "00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0")
NVSWITCH_BUSES = ("00000000:C4:00.0", "00000000:C5:00.0", "00000000:C6:00.0", "00000000:C7:00.0",
                  "00000000:C8:00.0", "00000000:C9:00.0")


def a100_nvswitch_box() -> Dict[str, Any]:
    """8 x NVIDIA A100-SXM4-40GB (HGX A100): 12 NVLinks per GPU, two to each of six
    NVSwitches; PCIe: pairs behind one switch complex (PXB), GPUs 0-3 on NUMA node 0 and
    4-7 on node 1 (NODE within, SYS across)."""
    links = [{"bus_id": NVSWITCH_BUSES[k // 2], "type": "switch"} for k in range(12)]
    devs = [device("NVIDIA A100-SXM4-40GB", "8.0", 40960, bus, uuid(i, "a100"), max_sm=1410, max_mem=1215,
                   power_w=400.0, nvlinks=copy.deepcopy(links))
            for i, bus in enumerate(A100_BUSES)]
    topo = []
    for i in range(8):
        for j in range(i + 1, 8):
            if i // 2 == j // 2:
                topo.append([i, j, "MULTIPLE"])
            elif i // 4 == j // 4:
                topo.append([i, j, "NODE"])
            else:
                topo.append([i, j, "SYSTEM"])
    return {"driver_version": "535.104.05", "cuda_driver_version": 12020, "topology": topo, "devices": devs}


def a100_pcie_bridged_pair() -> Dict[str, Any]:
    """2 x NVIDIA A100-PCIE-40GB joined by NVLink bridges (12 links GPU to GPU, the remote
    device type not reported: an older driver) on different host bridges."""
    buses = ("00000000:17:00.0", "00000000:65:00.0")
    devs = [device("NVIDIA A100-PCIE-40GB", "8.0", 40960, buses[i], uuid(i, "a1pc"), max_sm=1410, max_mem=1215,
                   power_w=250.0, nvlinks=[buses[1 - i]] * 12)
            for i in range(2)]
    return {"driver_version": "470.57.02", "cuda_driver_version": 11040,
            "topology": [[0, 1, "NODE"]], "devices": devs}


def k80_box() -> Dict[str, Any]:
    """One Tesla K80 board: two GK210 GPUs (compute capability 3.7) behind its own switch."""
    devs = [device("Tesla K80", "3.7", 11441, bus, uuid(i, "k80"), max_sm=875, max_mem=2505, power_w=149.0)
            for i, bus in enumerate(("00000000:05:00.0", "00000000:06:00.0"))]
    return {"driver_version": "470.199.02", "cuda_driver_version": 11040,
            "topology": [[0, 1, "SINGLE"]], "devices": devs}


def h100_box() -> Dict[str, Any]:
    """1 x NVIDIA H100 80GB HBM3 (compute capability 9.0); power draw NotSupported (as on
    some virtualised instances), max clocks refused with a permission error."""
    d = device("NVIDIA H100 80GB HBM3", "9.0", 81559, "00000000:18:00.0", uuid(0, "h100"), max_sm=1980,
               max_mem=2619, power_w=700.0, nvlinks=[], unsupported=["power_draw_w"],
               errors={"max_clocks_mhz": "NO_PERMISSION"})
    return {"driver_version": "535.104.05", "cuda_driver_version": 12020, "devices": [d]}


def module(spec: Dict[str, Any]) -> FakeNVML:
    """A pynvml-like module for ``spec`` (a deep copy: tests may edit their spec)."""
    return FakeNVML(copy.deepcopy(spec))


def scripted(spec: Dict[str, Any], index: int = 0, **volatile: Sequence[Any]) -> Dict[str, Any]:
    """``spec`` with device ``index``'s volatile values replaced by scripts: lists whose
    n-th element is what the n-th read returns (the last repeats), e.g.
    ``scripted(box, gpu_util_pct=[10, 50, 90])``."""
    spec = copy.deepcopy(spec)
    spec["devices"][index]["volatile"].update({k: list(v) for k, v in volatile.items()})
    return spec


def write(spec: Dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(spec, indent=1))
    return path


class Without:
    """A module proxy lacking some functions (an older nvidia-ml-py)."""

    def __init__(self, inner: Any, *missing: str):
        self._inner = inner
        self._missing = set(missing)

    def __getattr__(self, name: str) -> Any:
        if name in self._missing:
            raise AttributeError(name)
        return getattr(self._inner, name)
