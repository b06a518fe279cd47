"""GPU facts from NVML, read in the pytest (parent) process without creating a CUDA context.

NVML (``libnvidia-ml``, the library behind ``nvidia-smi``) is not CUDA: querying it creates
no CUDA context, allocates no GPU memory and does not touch the device state a worker will
measure. This module never imports mxnet; it talks to NVML through ``pynvml``, the module
of the ``nvidia-ml-py`` package (installed by every CUDA extra of this project).

``load()`` returns a facade, ``NVML``:

* real: ``import pynvml`` + ``nvmlInit()``;
* absent: pynvml not importable or ``nvmlInit`` failed; ``reason`` says why in one line
  ("nvidia-ml-py not installed", "NVML: Driver Not Loaded", ...) and every query answers
  with no GPUs.

What it reads:

* ``static_facts()``: per GPU its NVML index, name, UUID, PCI bus id, memory, compute
  capability, driver and CUDA driver version, maximum clocks, power limit and its links to
  every other GPU (``"NVLINK"`` or the PCIe path as ``nvidia-smi topo -m`` names it). These
  are recorded with every result; ``fingerprint_part`` keeps the subset that identifies the
  *kind* of hardware.
* ``volatile_facts()``: memory in use, current clocks, utilisation, temperature, power draw
  and clock throttle reasons. Noise evidence only: never part of a machine id nor of an
  environment diff (``VOLATILE_KEYS``). ``gpu_sampler.Sampler`` reads them in a background
  thread while a worker runs.

Which NVML device is MXNet's ``gpu:N`` in a worker, and the CUDA variables the suite gives
its workers, are ``cuda_devices.py``'s; sampling the volatile facts while a worker runs is
``gpu_sampler.py``'s.

A field NVML does not support on a GPU (``NVMLError_NotSupported``: power on some boards,
NVLink on PCIe cards, ...) is ``None``; any other NVML error on a field is ``None`` too and
is named in the GPU's ``field_errors``.

The tests read a stand-in ``pynvml`` module that speaks the same API
(``tests/fake_nvml.py``): no GPU ran them.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
)

NOT_INSTALLED = "nvidia-ml-py not installed"

# NVML return codes (nvml.h; pynvml's NVML_ERROR_* have the same values)
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_FUNCTION_NOT_FOUND = 13

#: clock throttle ("clocks event") reason bits, nvml.h nvmlClocksThrottleReason*
THROTTLE_REASONS: Tuple[Tuple[int, str], ...] = (
    (0x0001, "gpu_idle"),
    (0x0002, "applications_clocks_setting"),
    (0x0004, "sw_power_cap"),
    (0x0008, "hw_slowdown"),
    (0x0010, "sync_boost"),
    (0x0020, "sw_thermal_slowdown"),
    (0x0040, "hw_thermal_slowdown"),
    (0x0080, "hw_power_brake_slowdown"),
    (0x0100, "display_clock_setting"),
    (0x0200, "board_limit"),
    (0x0400, "reliability"),
)
#: reasons that mean something outside the workload slowed the GPU down (heat, the board,
#: an external power brake). ``sw_power_cap`` is not among them: a power-limited card (a
#: T4 at 70 W) sits at its cap under any heavy load, so it is the normal state, shown but
#: not evidence of interference.
SLOWDOWN_REASONS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                              "hw_power_brake_slowdown", "board_limit", "reliability"})

#: nvmlDeviceGetTopologyCommonAncestor levels -> the names of ``nvidia-smi topo -m``
TOPOLOGY_LEVELS: Dict[int, str] = {
    0: "INTERNAL",  # NVML_TOPOLOGY_INTERNAL: two GPUs of one board (NVML's example: Tesla K80)
    10: "PIX",      # NVML_TOPOLOGY_SINGLE: at most one PCIe switch between them
    20: "PXB",      # NVML_TOPOLOGY_MULTIPLE: several PCIe switches, no host bridge
    30: "PHB",      # NVML_TOPOLOGY_HOSTBRIDGE: through a PCIe host bridge (the CPU)
    40: "NODE",     # NVML_TOPOLOGY_NODE (= CPU): host bridges within one NUMA node
    50: "SYS",      # NVML_TOPOLOGY_SYSTEM: across NUMA nodes (SMP interconnect)
}
LEVEL_NAMES = {"INTERNAL": 0, "SINGLE": 10, "MULTIPLE": 20, "HOSTBRIDGE": 30, "NODE": 40, "CPU": 40,
                "SYSTEM": 50, "PIX": 10, "PXB": 20, "PHB": 30, "SYS": 50}

NVLINK_DEVICE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch", 0xFF: "unknown"}

#: the volatile part of a GPU's facts: noise evidence, never hashed, never diffed
VOLATILE_KEYS = frozenset({
    "memory_free_bytes", "memory_used_bytes", "sm_clock_mhz", "mem_clock_mhz", "gpu_util_pct",
    "mem_util_pct", "temperature_c", "power_draw_w", "throttle_bitmask", "throttle_reasons",
    "field_errors",
})

#: every pynvml function this module calls (tests check each exists in nvidia-ml-py with
#: the same parameters, and in the tests' stand-in)
PYNVML_FUNCTIONS = (
    "nvmlInit", "nvmlShutdown", "nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion",
    "nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo", "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTemperature", "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemotePciInfo",
    "nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlDeviceGetTopologyCommonAncestor",
    "nvmlDeviceGetComputeRunningProcesses",
)

# pynvml constants (same values in nvml.h), used when a module lacks one
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
NVML_NVLINK_MAX_LINKS = 18  # older pynvml had 6 or 12; newer has 36: the module's value wins


# --------------------------------------------------------------------------- small helpers

def decode_cuda_version(value: Optional[int]) -> Optional[str]:
    """12020 -> "12.2", 11040 -> "11.4" (nvmlSystemGetCudaDriverVersion's encoding:
    1000 * major + 10 * minor)."""
    if value is None:
        return None
    value = int(value)
    return f"{value // 1000}.{(value % 1000) // 10}"


def decode_throttle_reasons(mask: Optional[int]) -> List[str]:
    """Names of the bits set in a clock throttle reasons bitmask, in bit order; a bit this
    module does not know becomes ``unknown_0x...``."""
    if mask is None:
        return []
    mask = int(mask)
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_REASONS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(f"unknown_{bit:#x}")
            rest &= ~bit
        bit <<= 1
    return names


def topology_name(level: Any) -> Optional[str]:
    """An NVML topology level (number or NVML / nvidia-smi name) as nvidia-smi names it."""
    if level is None:
        return None
    if isinstance(level, str):
        key = level.strip().upper().replace("NVML_TOPOLOGY_", "")
        if key not in LEVEL_NAMES:
            raise ValueError(f"unknown NVML topology level {level!r}")
        level = LEVEL_NAMES[key]
    return TOPOLOGY_LEVELS.get(int(level), f"LEVEL{int(level)}")


def normalize_bus_id(bus_id: Any) -> Optional[str]:
    """"0000:04:00.0" / "00000000:04:00.0" / b"..." -> "00000000:04:00.0" (NVML's form,
    upper-case hex); anything unparsable is returned stripped and upper-cased."""
    if bus_id is None:
        return None
    text = _text(bus_id).strip()
    m = re.fullmatch(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])", text)
    if not m:
        return text.upper() or None
    domain, bus, dev, fn = m.groups()
    return f"{int(domain or '0', 16):08X}:{int(bus, 16):02X}:{int(dev, 16):02X}.{fn}"


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def error_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # pragma: no cover - a broken __str__
        text = ""
    return text or type(exc).__name__


def _is_not_supported(exc: BaseException) -> bool:
    return getattr(exc, "value", None) == NVML_ERROR_NOT_SUPPORTED or \
        type(exc).__name__ == "NVMLError_NotSupported"


# --------------------------------------------------------------------------- the facade

class NVML:
    """NVML as this suite uses it. ``available`` is False when NVML could not be loaded
    (``reason`` says why); then every query answers with no GPUs."""

    def __init__(self, module: Any = None, reason: Optional[str] = None, source: str = "absent"):
        self._nv = module
        self.reason = reason
        self.source = source  # "pynvml" | "fake:<path>" | "module" | "absent"
        self._handles: Dict[int, Any] = {}
        self._uuids: Dict[int, Optional[str]] = {}
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self._nv is not None

    def describe(self) -> str:
        if not self.available:
            return f"no NVML ({self.reason})"
        return f"NVML via {self.source}"

    def close(self) -> None:
        """nvmlShutdown (once); the facade is absent afterwards."""
        nv, self._nv = self._nv, None
        if nv is not None:
            self.reason = "NVML shut down"
            try:
                nv.nvmlShutdown()
            except Exception:
                pass

    def __enter__(self) -> "NVML":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- access
    def device_count(self) -> int:
        if not self.available:
            return 0
        try:
            return int(self._nv.nvmlDeviceGetCount())
        except Exception:
            return 0

    def _handle(self, index: int) -> Any:
        with self._lock:
            if index not in self._handles:
                self._handles[index] = self._nv.nvmlDeviceGetHandleByIndex(index)
            return self._handles[index]

    def _uuid(self, index: int) -> Optional[str]:
        with self._lock:
            known = index in self._uuids
        if not known:
            try:
                uuid = _text(self._nv.nvmlDeviceGetUUID(self._handle(index)))
            except Exception:
                uuid = None
            with self._lock:
                self._uuids[index] = uuid
        return self._uuids[index]

    @staticmethod
    def _field(errors: Dict[str, str], key: str, fn: Callable, *args) -> Any:
        """fn(*args); None when NVML does not support it (or any other failure, which is
        named in ``errors``)."""
        try:
            return fn(*args)
        except Exception as exc:  # NVMLError and its subclasses, AttributeError of an old pynvml
            if not _is_not_supported(exc):
                errors[key] = error_text(exc)
            return None

    def _call(self, names: Sequence[str], *args) -> Tuple[Any, Optional[BaseException]]:
        """The first of ``names`` the module has, called; (value, None) or (None, error)."""
        last: Optional[BaseException] = None
        for name in names:
            fn = getattr(self._nv, name, None)
            if fn is None:
                continue
            try:
                return fn(*args), None
            except Exception as exc:
                last = exc
                if getattr(exc, "value", None) != NVML_ERROR_FUNCTION_NOT_FOUND:
                    return None, exc
        return None, last

    def _const(self, name: str, default: int) -> int:
        return int(getattr(self._nv, name, default))

    # -- static facts
    def static_facts(self) -> List[Dict[str, Any]]:
        """One dict per GPU, in NVML index order (see the module doc); [] without NVML."""
        if not self.available:
            return []
        nv = self._nv
        sys_errors: Dict[str, str] = {}
        driver = _text(self._field(sys_errors, "driver_version", nv.nvmlSystemGetDriverVersion))
        raw_cuda, err = self._call(("nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2"))
        if err is not None and not _is_not_supported(err):
            sys_errors["cuda_driver_version"] = error_text(err)
        cuda = decode_cuda_version(raw_cuda)
        clock_sm = self._const("NVML_CLOCK_SM", NVML_CLOCK_SM)
        clock_mem = self._const("NVML_CLOCK_MEM", NVML_CLOCK_MEM)

        gpus: List[Dict[str, Any]] = []
        handles: List[Any] = []
        for i in range(self.device_count()):
            errors: Dict[str, str] = dict(sys_errors)
            try:
                h = self._handle(i)
            except Exception as exc:  # e.g. NVMLError_NoPermission, GpuIsLost
                gpus.append({"index": i, "name": None, "uuid": None, "pci_bus_id": None,
                             "field_errors": {"handle": error_text(exc)}, "topology": []})
                handles.append(None)
                continue
            handles.append(h)
            pci = self._field(errors, "pci_bus_id", nv.nvmlDeviceGetPciInfo, h)
            mem = self._field(errors, "memory_total_bytes", nv.nvmlDeviceGetMemoryInfo, h)
            cc = self._field(errors, "compute_capability", nv.nvmlDeviceGetCudaComputeCapability, h)
            power, perr = self._call(("nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit"), h)
            if perr is not None and not _is_not_supported(perr):
                errors["power_limit_w"] = error_text(perr)
            uuid = _text(self._field(errors, "uuid", nv.nvmlDeviceGetUUID, h))
            with self._lock:
                self._uuids[i] = uuid
            gpus.append({
                "index": i,
                "name": _text(self._field(errors, "name", nv.nvmlDeviceGetName, h)),
                "uuid": uuid,
                "pci_bus_id": normalize_bus_id(getattr(pci, "busId", None)) if pci is not None else None,
                "memory_total_bytes": int(mem.total) if mem is not None else None,
                "compute_capability": f"{int(cc[0])}.{int(cc[1])}" if cc is not None else None,
                "driver_version": driver,
                "cuda_driver_version": cuda,
                "max_sm_clock_mhz": self._field(errors, "max_sm_clock_mhz", nv.nvmlDeviceGetMaxClockInfo, h, clock_sm),
                "max_mem_clock_mhz": self._field(errors, "max_mem_clock_mhz", nv.nvmlDeviceGetMaxClockInfo, h,
                                                 clock_mem),
                "power_limit_w": round(power / 1000.0, 1) if power is not None else None,
                "topology": [],
                "field_errors": errors,
            })
        self._fill_topology(gpus, handles)
        for g in gpus:
            if not g.get("field_errors"):
                g.pop("field_errors", None)
        return gpus

    def _nvlinks(self, h: Any) -> List[Tuple[Optional[str], str]]:
        """(remote PCI bus id, remote type) of each active NVLink of one GPU; [] when it
        has none or NVML does not support NVLink queries on it."""
        nv = self._nv
        out: List[Tuple[Optional[str], str]] = []
        enabled = self._const("NVML_FEATURE_ENABLED", 1)
        for link in range(self._const("NVML_NVLINK_MAX_LINKS", NVML_NVLINK_MAX_LINKS)):
            try:
                active = nv.nvmlDeviceGetNvLinkState(h, link)
            except Exception:  # NotSupported (no NVLink) or InvalidArgument (past its links)
                continue
            if active != enabled:
                continue
            try:
                remote = normalize_bus_id(getattr(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link), "busId", None))
            except Exception:
                remote = None
            kind, _ = self._call(("nvmlDeviceGetNvLinkRemoteDeviceType",), h, link)
            out.append((remote, NVLINK_DEVICE_TYPES.get(kind, "unknown") if kind is not None else "unknown"))
        return out

    def _fill_topology(self, gpus: List[Dict[str, Any]], handles: List[Any]) -> None:
        nv = self._nv
        links = [self._nvlinks(h) if h is not None else [] for h in handles]
        bus_of = [g.get("pci_bus_id") for g in gpus]
        gpu_buses = {b for b in bus_of if b}
        on_switch = [any(kind == "switch" for _, kind in ls) for ls in links]
        for i, g in enumerate(gpus):
            if handles[i] is None:
                continue
            for j, peer in enumerate(gpus):
                if i == j or handles[j] is None:
                    continue
                direct = sum(1 for remote, kind in links[i]
                             if remote and remote == bus_of[j] and kind in ("gpu", "unknown"))
                level = None
                try:
                    level = topology_name(nv.nvmlDeviceGetTopologyCommonAncestor(handles[i], handles[j]))
                except Exception:
                    pass
                entry: Dict[str, Any] = {"peer_index": peer["index"], "peer_uuid": peer.get("uuid"), "pcie": level}
                if direct:
                    entry.update(link="NVLINK", nvlinks=direct, via="direct")
                elif on_switch[i] and on_switch[j]:
                    n = sum(1 for remote, kind in links[i] if kind == "switch" and remote not in gpu_buses)
                    entry.update(link="NVLINK", nvlinks=n, via="nvswitch")
                else:
                    entry.update(link=level, nvlinks=0, via=None)
                g["topology"].append(entry)

    # -- volatile facts
    def volatile_facts(self, indices: Optional[Iterable[int]] = None) -> List[Dict[str, Any]]:
        """Per GPU (all, or the NVML ``indices``): memory free/used, SM and memory clocks,
        utilisation, temperature, power draw, throttle reasons. Keys: "index", "uuid" and
        ``VOLATILE_KEYS``."""
        if not self.available:
            return []
        nv = self._nv
        clock_sm = self._const("NVML_CLOCK_SM", NVML_CLOCK_SM)
        clock_mem = self._const("NVML_CLOCK_MEM", NVML_CLOCK_MEM)
        sensor = self._const("NVML_TEMPERATURE_GPU", NVML_TEMPERATURE_GPU)
        out = []
        for i in (range(self.device_count()) if indices is None else indices):
            errors: Dict[str, str] = {}
            rec: Dict[str, Any] = {"index": i, "uuid": None}
            try:
                h = self._handle(i)
            except Exception as exc:
                rec["field_errors"] = {"handle": error_text(exc)}
                out.append(rec)
                continue
            rec["uuid"] = self._uuid(i)
            mem = self._field(errors, "memory_used_bytes", nv.nvmlDeviceGetMemoryInfo, h)
            util = self._field(errors, "gpu_util_pct", nv.nvmlDeviceGetUtilizationRates, h)
            power = self._field(errors, "power_draw_w", nv.nvmlDeviceGetPowerUsage, h)
            mask, merr = self._call(("nvmlDeviceGetCurrentClocksEventReasons",
                                     "nvmlDeviceGetCurrentClocksThrottleReasons"), h)
            if merr is not None and not _is_not_supported(merr):
                errors["throttle_reasons"] = error_text(merr)
            rec.update({
                "memory_free_bytes": int(mem.free) if mem is not None else None,
                "memory_used_bytes": int(mem.used) if mem is not None else None,
                "sm_clock_mhz": self._field(errors, "sm_clock_mhz", nv.nvmlDeviceGetClockInfo, h, clock_sm),
                "mem_clock_mhz": self._field(errors, "mem_clock_mhz", nv.nvmlDeviceGetClockInfo, h, clock_mem),
                "gpu_util_pct": int(util.gpu) if util is not None else None,
                "mem_util_pct": int(util.memory) if util is not None else None,
                "temperature_c": self._field(errors, "temperature_c", nv.nvmlDeviceGetTemperature, h, sensor),
                "power_draw_w": round(power / 1000.0, 1) if power is not None else None,
                "throttle_bitmask": int(mask) if mask is not None else None,
                "throttle_reasons": decode_throttle_reasons(mask),
            })
            if errors:
                rec["field_errors"] = errors
            out.append(rec)
        return out

    # -- memory: each process's own
    def process_memory(self, indices: Iterable[int]) -> Optional[Dict[int, Optional[int]]]:
        """{pid: bytes} of the compute processes on the GPUs ``indices``, summed over them
        (nvmlDeviceGetComputeRunningProcesses' ``usedGpuMemory``: what that process holds,
        its CUDA context and its allocator's pool included). A process whose figure NVML
        does not report (``usedGpuMemory`` None: NVML_VALUE_NOT_AVAILABLE, e.g. under WDDM
        or without the rights to see it) maps to None. None when NVML cannot list them.
        PIDs are as NVML sees them: in a container without the host's PID namespace they
        are the host's, and a worker's own PID is then not among them."""
        if not self.available:
            return None
        out: Dict[int, Optional[int]] = {}
        for i in indices:
            try:
                procs = self._nv.nvmlDeviceGetComputeRunningProcesses(self._handle(i))
            except Exception:
                return None
            for p in procs or ():
                pid = int(p.pid)
                used = getattr(p, "usedGpuMemory", None)
                if used is None or pid in out and out[pid] is None:
                    out[pid] = None
                else:
                    out[pid] = (out.get(pid) or 0) + int(used)
        return out

    def own_memory(self, pid: int, indices: Iterable[int]) -> Tuple[str, Optional[int]]:
        """What worker ``pid`` and its descendants hold on the GPUs ``indices``, in bytes, from
        ``process_memory``: ``own_bytes``'s (status, bytes)."""
        if not self.available:
            return "unlisted", None
        return own_bytes(self.process_memory(indices), process_tree(pid))


#: what ``own_memory`` reads, as results.json names it
OWN_MEMORY_SOURCE = ("NVML nvmlDeviceGetComputeRunningProcesses: usedGpuMemory of the worker's PID and its "
                     "descendants (its CUDA context and MXNet's pool)")

#: why ``own_bytes`` gave no figure, by its status
OWN_MEMORY_MISSING = {
    "unlisted": "NVML could not list the GPU's compute processes",
    "absent": "NVML listed no compute process with the worker's PID (a container without the host's PID "
              "namespace, where NVML reports host PIDs; or the worker held no GPU memory yet)",
    "not-reported": "NVML lists the worker without its figure (usedGpuMemory not available: some virtualised, "
                    "WDDM or MIG setups, or no right to see it)",
}


def process_tree(pid: int) -> List[int]:
    """``pid`` and its descendants (just ``pid`` when psutil cannot say)."""
    try:
        import psutil
        return [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except Exception:  # noqa: BLE001 - psutil.Error: the process ended; ImportError
        return [pid]


def own_bytes(per_pid: Optional[Mapping[int, Optional[int]]], pids: Iterable[int]) -> Tuple[str, Optional[int]]:
    """What the processes ``pids`` (a worker and its descendants) hold, from
    ``NVML.process_memory``'s {pid: bytes}: ("ok", their sum); else (status, None), status one
    of ``OWN_MEMORY_MISSING``: NVML could not list the processes (``per_pid`` None),
    none of ``pids`` is listed, or one is listed without its figure. Pure."""
    if per_pid is None:
        return "unlisted", None
    mine = [per_pid[p] for p in pids if p in per_pid]
    if not mine:
        return "absent", None
    if any(v is None for v in mine):
        return "not-reported", None
    return "ok", int(sum(int(v) for v in mine))


# --------------------------------------------------------------------------- loading

def load(module: Any = None, env: Optional[Mapping[str, str]] = None) -> NVML:
    """The NVML facade: ``module`` when given (a pynvml-like object), else ``pynvml`` of
    nvidia-ml-py. Never raises: a failure gives an absent facade whose ``reason`` says why.
    ``env`` is accepted for the callers that pass their environment; NVML reads none."""
    source = "module"
    if module is None:
        try:
            import pynvml as module  # nvidia-ml-py
        except ImportError:
            return NVML(None, NOT_INSTALLED, "absent")
        except Exception as exc:  # noqa: BLE001 - a broken install
            return NVML(None, f"nvidia-ml-py could not be imported: {error_text(exc)}", "absent")
        source = "pynvml"
    try:
        module.nvmlInit()
    except Exception as exc:
        return NVML(None, f"NVML: {error_text(exc)}", "absent")
    return NVML(module, None, source)


# --------------------------------------------------------------------------- fingerprint

def _gib(n: Any) -> Optional[int]:
    return int(round(int(n) / 2 ** 30)) if n is not None else None


def fingerprint_part(static_facts: Sequence[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The GPU part of the machine fingerprint: the hardware *kind*, not the cards.

    One dict per kind of GPU: name, memory in GiB (rounded: the exact byte count moves
    with driver versions and reserved memory), compute capability, how many, and the links
    from each such GPU to the others (``{"NVLINK": 7}``, ``{"PHB": 1}``). UUIDs, PCI bus
    ids, NVML indices, drivers, clocks and power limits are left out: replacing a card by
    the same model keeps the machine id, a driver upgrade shows up as a change of the
    recorded environment instead. (ECC on/off changes the memory some boards report, and
    with it the id: it changes performance too.)
    """
    per_gpu = []
    for g in static_facts:
        links = Counter(str(t.get("link")) for t in g.get("topology") or ())
        per_gpu.append({"name": g.get("name") or "unknown GPU", "memory_gib": _gib(g.get("memory_total_bytes")),
                        "compute_capability": g.get("compute_capability"),
                        "links": dict(sorted(links.items()))})
    groups = Counter(json.dumps(p, sort_keys=True) for p in per_gpu)
    return [dict(json.loads(key), count=n) for key, n in sorted(groups.items())]
