"""A stand-in NVML for the tests, never a GPU: ``FakeNVML`` has the same function names,
parameters, constants and error classes (``NVMLError_NotSupported``, ...) as nvidia-ml-py's
``pynvml``, built from a spec; ``module(spec)`` is one. End-to-end tests, which start pytest
in a subprocess, put ``tests/fake_pynvml/`` first on ``PYTHONPATH``: its ``pynvml`` is a
FakeNVML of the spec that ``$MXPERF_FAKE_NVML`` names (``use_in_subprocesses``).

The spec (JSON in ``$MXPERF_FAKE_NVML``)::

    {"driver_version": "535.104.05",
     "cuda_driver_version": 12020,            # as nvmlSystemGetCudaDriverVersion returns it
     "init_error": "DRIVER_NOT_LOADED",       # optional: nvmlInit raises this NVML error
     "topology": [[0, 1, "HOSTBRIDGE"]],      # common PCIe ancestor per pair (NVML level name,
                                              # nvidia-smi name or number); default SYSTEM
     "devices": [
       {"name": "Tesla P100-PCIE-16GB", "uuid": "GPU-...", "pci_bus_id": "00000000:04:00.0",
        "memory_total_bytes": 17071734784, "compute_capability": "6.0",
        "max_clocks_mhz": {"sm": 1328, "mem": 715}, "power_limit_w": 250,
        "nvlinks": ["00000000:05:00.0", {"bus_id": "00000000:C4:00.0", "type": "switch"}],
                                              # remote end of each active link; absent: no NVLink
        "volatile": {"memory_used_bytes": 0, "sm_clock_mhz": 405, "mem_clock_mhz": 715,
                     "gpu_util_pct": [0, 50, 100], "mem_util_pct": 0, "temperature_c": 31,
                     "power_draw_w": 27.5, "throttle_bitmask": 1},
                                              # a list = successive reads (the last repeats)
                                              # {"phase_file": path, "values": {"timed": 95},
                                              #  "default": 0} = by the phase a stand-in worker
                                              # wrote there (``phase_value``)
        "processes": [{"pid": 4242, "used_bytes": 1073741824}],   # compute processes on it
        "processes_dir": "/tmp/x",            # and those stand-in workers registered there: a
                                              # file <pid>.json {"gpu": index, "used_bytes": n}
                                              # each, counted while that pid lives; both add to
                                              # memory_used_bytes (the device-wide figure)
        "unsupported": ["power_draw_w"],      # fact names whose NVML call is NotSupported
        "errors": {"temperature_c": "GPU_IS_LOST"}}]}   # fact name -> NVML error raised

Fact names for ``unsupported`` / ``errors``: name, uuid, pci_bus_id, memory_total_bytes,
compute_capability, max_clocks_mhz, power_limit_w, nvlinks, topology, handle (``errors``
only: nvmlDeviceGetHandleByIndex fails) and the ``volatile`` names. A fact set to null is
NotSupported too. Error names are NVML_ERROR_* without the prefix (NOT_SUPPORTED,
NO_PERMISSION, GPU_IS_LOST, DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, FUNCTION_NOT_FOUND, ...).
"""

from __future__ import annotations

import copy
import threading
from collections import Counter
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.machine.nvml import (LEVEL_NAMES, NVML_CLOCK_MEM, NVML_CLOCK_SM, NVML_ERROR_FUNCTION_NOT_FOUND,
                                         NVML_ERROR_NOT_SUPPORTED, NVML_TEMPERATURE_GPU, normalize_bus_id)

# NVML return codes the stand-in raises (nvml.h; pynvml's NVML_ERROR_* have the same values)
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999

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


def phase_value(script: Mapping[str, Any]) -> Any:
    """A reading that follows a stand-in worker's phase: the phase it last wrote to
    ``script["phase_file"]`` ("" before it wrote one) looked up in ``script["values"]``
    (``script["default"]`` otherwise). Each read appends the phase it saw to
    ``<phase_file>.reads``, so the worker can stay in a phase until it was read there n
    times (tests/stub_worker.py): readings are then driven by count, not by the clock."""
    try:
        phase = Path(script["phase_file"]).read_text().strip()
    except OSError:
        phase = ""
    with open(str(script["phase_file"]) + ".reads", "a") as fh:
        fh.write(phase + "\n")
    return (script.get("values") or {}).get(phase, script.get("default"))


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


# --------------------------------------------------------------------------- the stand-in pynvml

class _Struct:
    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"_Struct({self.__dict__!r})"


_ERROR_STRINGS = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized", NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported", NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_NOT_FOUND: "Not Found", NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found", NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}
_ERROR_CODES = {"UNINITIALIZED": NVML_ERROR_UNINITIALIZED, "INVALID_ARGUMENT": NVML_ERROR_INVALID_ARGUMENT,
                "NOT_SUPPORTED": NVML_ERROR_NOT_SUPPORTED, "NO_PERMISSION": NVML_ERROR_NO_PERMISSION,
                "NOT_FOUND": NVML_ERROR_NOT_FOUND, "DRIVER_NOT_LOADED": NVML_ERROR_DRIVER_NOT_LOADED,
                "LIBRARY_NOT_FOUND": NVML_ERROR_LIBRARY_NOT_FOUND,
                "FUNCTION_NOT_FOUND": NVML_ERROR_FUNCTION_NOT_FOUND, "GPU_IS_LOST": NVML_ERROR_GPU_IS_LOST,
                "UNKNOWN": NVML_ERROR_UNKNOWN}


class FakeNVMLError(Exception):
    """Shaped like pynvml.NVMLError: ``.value`` is the NVML return code, str() its text."""

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _ERROR_STRINGS.get(self.value, f"NVML error {self.value}")


def _error_class(code_name: str, code: int) -> type:
    name = "NVMLError_" + "".join(part.capitalize() for part in code_name.split("_"))
    return type(name, (FakeNVMLError,), {"__init__": lambda self, *a: FakeNVMLError.__init__(self, code)})


class FakeNVML:
    """A stand-in for the ``pynvml`` module built from a dict (the ``$MXPERF_FAKE_NVML``
    format of the module doc): the same function names and parameters as nvidia-ml-py,
    the same error classes (``NVMLError``, ``NVMLError_NotSupported``, ... with the same
    ``.value`` codes) and constants. Volatile values given as lists advance one element
    per read of that value on that GPU (the last one repeats), so a test drives the state
    by the number of samples taken, never by time. Thread-safe."""

    NVMLError = FakeNVMLError
    NVML_CLOCK_GRAPHICS = 0
    NVML_CLOCK_SM = NVML_CLOCK_SM
    NVML_CLOCK_MEM = NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = NVML_TEMPERATURE_GPU
    NVML_FEATURE_DISABLED = 0
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_MAX_LINKS = 18
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
    NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
    NVML_TOPOLOGY_INTERNAL = 0
    NVML_TOPOLOGY_SINGLE = 10
    NVML_TOPOLOGY_MULTIPLE = 20
    NVML_TOPOLOGY_HOSTBRIDGE = 30
    NVML_TOPOLOGY_NODE = 40
    NVML_TOPOLOGY_SYSTEM = 50

    def __init__(self, spec: Mapping[str, Any]):
        if not isinstance(spec, Mapping) or not isinstance(spec.get("devices", []), list):
            raise ValueError("a fake NVML spec is an object with a 'devices' list")
        self.spec = spec
        self.devices: List[Mapping[str, Any]] = list(spec.get("devices", []))
        for n, d in enumerate(self.devices):
            if not isinstance(d, Mapping) or not d.get("name"):
                raise ValueError(f"fake NVML device {n} needs at least a 'name'")
        self.initialized = False
        self.init_count = 0
        self.reads: Counter = Counter()  # (function name, device index) -> calls
        self._lock = threading.Condition()
        self._topology: Dict[Tuple[int, int], int] = {}
        for row in spec.get("topology", []) or []:
            a, b, level = row
            code = LEVEL_NAMES[str(level).upper()] if isinstance(level, str) else int(level)
            self._topology[(int(a), int(b))] = self._topology[(int(b), int(a))] = code
        for code_name, code in _ERROR_CODES.items():
            cls = _error_class(code_name, code)
            setattr(self, cls.__name__, cls)

    @classmethod
    def from_json_file(cls, path: str) -> "FakeNVML":
        return cls(json.loads(Path(path).read_text()))

    # -- plumbing
    def _raise(self, code: Any) -> None:
        code = _ERROR_CODES[str(code).upper()] if isinstance(code, str) else int(code)
        name = next(n for n, c in _ERROR_CODES.items() if c == code) if code in _ERROR_CODES.values() else None
        if name is not None:
            raise getattr(self, "NVMLError_" + "".join(p.capitalize() for p in name.split("_")))()
        raise FakeNVMLError(code)

    def _check_init(self) -> None:
        if not self.initialized:
            self._raise("UNINITIALIZED")

    def _dev(self, handle: Any) -> Tuple[int, Mapping[str, Any]]:
        self._check_init()
        if not isinstance(handle, _Struct) or not 0 <= getattr(handle, "index", -1) < len(self.devices):
            self._raise("INVALID_ARGUMENT")
        return handle.index, self.devices[handle.index]

    def _fact(self, handle: Any, key: str, fn_name: str, default: Any = None) -> Any:
        """The value of fact ``key`` for the device of ``handle``, honouring its
        ``unsupported`` / ``errors`` lists and stepping list values per read."""
        i, d = self._dev(handle)
        if key in (d.get("unsupported") or ()):
            self._raise("NOT_SUPPORTED")
        if key in (d.get("errors") or {}):
            self._raise(d["errors"][key])
        vol = d.get("volatile") or {}
        value = vol[key] if key in vol else d.get(key, default)
        if isinstance(value, dict) and "phase_file" in value:
            value = phase_value(value)
        with self._lock:
            n = self.reads[(fn_name, i)]
            if isinstance(value, list):
                value = value[min(n, len(value) - 1)] if value else default
        if value is None:
            self._raise("NOT_SUPPORTED")
        return value

    def _count(self, fn_name: str, index: int) -> None:
        with self._lock:
            self.reads[(fn_name, index)] += 1
            self._lock.notify_all()

    def wait_reads(self, fn_name: str, index: int, n: int, timeout: float = 60.0) -> bool:
        """Block until ``fn_name`` was called ``n`` times for device ``index`` (a hang guard
        for tests; not a performance threshold)."""
        with self._lock:
            return self._lock.wait_for(lambda: self.reads[(fn_name, index)] >= n, timeout)

    # -- init
    def nvmlInit(self):
        if self.spec.get("init_error"):
            self._raise(self.spec["init_error"])
        self.initialized = True
        self.init_count += 1

    def nvmlShutdown(self):
        self._check_init()
        self.initialized = False

    # -- system
    def nvmlSystemGetDriverVersion(self):
        self._check_init()
        if self.spec.get("driver_version") is None:
            self._raise("NOT_SUPPORTED")
        return str(self.spec["driver_version"])

    def nvmlSystemGetCudaDriverVersion(self):
        self._check_init()
        if self.spec.get("cuda_driver_version") is None:
            self._raise("NOT_SUPPORTED")
        return int(self.spec["cuda_driver_version"])

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self.nvmlSystemGetCudaDriverVersion()

    # -- devices
    def nvmlDeviceGetCount(self):
        self._check_init()
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index):
        self._check_init()
        if not 0 <= int(index) < len(self.devices):
            self._raise("INVALID_ARGUMENT")
        d = self.devices[int(index)]
        if "handle" in (d.get("errors") or {}):
            self._raise(d["errors"]["handle"])
        return _Struct(index=int(index))

    def nvmlDeviceGetName(self, handle):
        return str(self._fact(handle, "name", "nvmlDeviceGetName"))

    def nvmlDeviceGetUUID(self, handle):
        return str(self._fact(handle, "uuid", "nvmlDeviceGetUUID"))

    def nvmlDeviceGetPciInfo(self, handle):
        bus = str(self._fact(handle, "pci_bus_id", "nvmlDeviceGetPciInfo"))
        return _Struct(busId=bus, busIdLegacy=bus)

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        i, d = self._dev(handle)
        total = int(self._fact(handle, "memory_total_bytes", "nvmlDeviceGetMemoryInfo"))
        used = int(self._fact(handle, "memory_used_bytes", "nvmlDeviceGetMemoryInfo", 0))
        used += sum(p["used_bytes"] or 0 for p in self._processes(i, d))
        self._count("nvmlDeviceGetMemoryInfo", i)
        return _Struct(total=total, used=min(used, total), free=max(0, total - used))

    @staticmethod
    def _processes(i: int, d: Mapping[str, Any]) -> List[Dict[str, Any]]:
        """The compute processes on device ``i``: its spec's ``processes`` and the live ones
        registered in its ``processes_dir``."""
        out = [{"pid": int(p["pid"]), "used_bytes": p.get("used_bytes")} for p in d.get("processes") or ()]
        folder = d.get("processes_dir")
        if folder and os.path.isdir(folder):
            for name in sorted(os.listdir(folder)):
                if not name.endswith(".json"):
                    continue
                try:
                    entry = json.loads(Path(folder, name).read_text())
                    pid = int(name[:-5])
                    os.kill(pid, 0)  # only processes that are still there
                except (OSError, ValueError):
                    continue
                if int(entry.get("gpu", 0)) == i:
                    out.append({"pid": pid, "used_bytes": entry.get("used_bytes")})
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        """As nvidia-ml-py's: a list of structs with ``pid`` and ``usedGpuMemory`` (None when
        NVML does not report it)."""
        i, d = self._dev(handle)
        if "processes" in (d.get("unsupported") or ()):
            self._raise("NOT_SUPPORTED")
        self._count("nvmlDeviceGetComputeRunningProcesses", i)
        return [_Struct(pid=p["pid"], usedGpuMemory=p["used_bytes"], gpuInstanceId=0xFFFFFFFF,
                        computeInstanceId=0xFFFFFFFF) for p in self._processes(i, d)]

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        cc = self._fact(handle, "compute_capability", "nvmlDeviceGetCudaComputeCapability")
        if isinstance(cc, (list, tuple)):
            major, minor = cc
        else:
            major, _, minor = str(cc).partition(".")
        return (int(major), int(minor or 0))

    def nvmlDeviceGetMaxClockInfo(self, handle, type):
        clocks = self._fact(handle, "max_clocks_mhz", "nvmlDeviceGetMaxClockInfo")
        key = {self.NVML_CLOCK_SM: "sm", self.NVML_CLOCK_MEM: "mem", self.NVML_CLOCK_GRAPHICS: "graphics"}.get(type)
        if key is None:
            self._raise("INVALID_ARGUMENT")
        if clocks.get(key) is None:
            self._raise("NOT_SUPPORTED")
        return int(clocks[key])

    def nvmlDeviceGetClockInfo(self, handle, type):
        i, _ = self._dev(handle)
        key = {self.NVML_CLOCK_SM: "sm_clock_mhz", self.NVML_CLOCK_MEM: "mem_clock_mhz"}.get(type)
        if key is None:
            self._raise("INVALID_ARGUMENT")
        value = int(self._fact(handle, key, "nvmlDeviceGetClockInfo/" + key))
        self._count("nvmlDeviceGetClockInfo/" + key, i)
        return value

    def nvmlDeviceGetEnforcedPowerLimit(self, handle):
        return int(round(float(self._fact(handle, "power_limit_w", "nvmlDeviceGetEnforcedPowerLimit")) * 1000))

    def nvmlDeviceGetPowerManagementLimit(self, handle):
        return self.nvmlDeviceGetEnforcedPowerLimit(handle)

    def nvmlDeviceGetPowerUsage(self, handle):
        i, _ = self._dev(handle)
        value = int(round(float(self._fact(handle, "power_draw_w", "nvmlDeviceGetPowerUsage")) * 1000))
        self._count("nvmlDeviceGetPowerUsage", i)
        return value

    def nvmlDeviceGetTemperature(self, handle, sensor):
        i, _ = self._dev(handle)
        if sensor != self.NVML_TEMPERATURE_GPU:
            self._raise("INVALID_ARGUMENT")
        value = int(self._fact(handle, "temperature_c", "nvmlDeviceGetTemperature"))
        self._count("nvmlDeviceGetTemperature", i)
        return value

    def nvmlDeviceGetUtilizationRates(self, handle):
        i, _ = self._dev(handle)
        gpu = int(self._fact(handle, "gpu_util_pct", "nvmlDeviceGetUtilizationRates"))
        mem = int(self._fact(handle, "mem_util_pct", "nvmlDeviceGetUtilizationRates", 0))
        self._count("nvmlDeviceGetUtilizationRates", i)
        return _Struct(gpu=gpu, memory=mem)

    def _clock_reasons(self, handle) -> int:
        i, _ = self._dev(handle)
        value = int(self._fact(handle, "throttle_bitmask", "clock_reasons"))
        self._count("clock_reasons", i)
        return value

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self._clock_reasons(handle)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self._clock_reasons(handle)

    def _link(self, device, link) -> Any:
        _, d = self._dev(device)
        if "nvlinks" in (d.get("unsupported") or ()) or d.get("nvlinks") is None:
            self._raise("NOT_SUPPORTED")
        links = d["nvlinks"]
        if not 0 <= int(link) < self.NVML_NVLINK_MAX_LINKS:
            self._raise("INVALID_ARGUMENT")
        if int(link) >= len(links):
            self._raise("NOT_SUPPORTED")
        entry = links[int(link)]
        return entry if isinstance(entry, Mapping) else {"bus_id": entry}

    def nvmlDeviceGetNvLinkState(self, device, link):
        entry = self._link(device, link)
        return self.NVML_FEATURE_ENABLED if entry.get("active", True) else self.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device, link):
        bus = str(self._link(device, link)["bus_id"])
        return _Struct(busId=bus, busIdLegacy=bus)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        entry = self._link(handle, link)
        if "type" in entry:
            return {"gpu": 0, "ibmnpu": 1, "switch": 2}.get(str(entry["type"]).lower(), 0xFF)
        buses = {normalize_bus_id(d.get("pci_bus_id")) for d in self.devices}
        return 0 if normalize_bus_id(entry["bus_id"]) in buses else 0xFF

    def nvmlDeviceGetTopologyCommonAncestor(self, device1, device2):
        i, d = self._dev(device1)
        j, _ = self._dev(device2)
        if "topology" in (d.get("unsupported") or ()):
            self._raise("NOT_SUPPORTED")
        if i == j:
            return self.NVML_TOPOLOGY_INTERNAL
        return self._topology.get((i, j), self.NVML_TOPOLOGY_SYSTEM)


FAKE_ENV = "MXPERF_FAKE_NVML"
#: what a GPU runner may export that changes which GPUs a session sees
GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
PYNVML_DIR = Path(__file__).resolve().parent / "fake_pynvml"


def use_in_process(monkeypatch, spec_path) -> None:
    """This process's ``import pynvml`` gives the stand-in of ``spec_path`` (until the test ends),
    whatever GPUs a runner's ``CUDA_VISIBLE_DEVICES`` names (it would change what the session sees)."""
    for name in GPU_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML.from_json_file(str(spec_path)))


def use_in_subprocesses(monkeypatch, spec_path) -> None:
    """Processes started from now on import the stand-in ``pynvml`` of ``spec_path``, with no
    inherited ``CUDA_VISIBLE_DEVICES`` (a GPU runner that exports it would change their outcome)."""
    for name in GPU_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(FAKE_ENV, str(spec_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(PYNVML_DIR), os.environ.get("PYTHONPATH")) if p))
    # a session's children get only the variables the suite lets through: this one by name
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{os.environ.get('PYTEST_ADDOPTS', '')} --perf-pass-env {FAKE_ENV}".strip())
