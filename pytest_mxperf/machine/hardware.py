"""Facts about this machine's hardware, read without importing mxnet.

CPU facts come from ``/proc/cpuinfo`` and the process's affinity. GPU facts come from
NVML (``nvml.load()``: ``pynvml`` of nvidia-ml-py),
read in this process without creating a CUDA context; ``nvidia-smi`` is asked only when
nvidia-ml-py is not installed (the ``cpu`` extra on a GPU machine), so that such a machine
is still seen to have GPUs. The fingerprint and the "which published table applies" rules
are built on these facts.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.machine import cuda_devices, nvml, topology
from pytest_mxperf.proc.child_env import child_env

NVIDIA_SMI_QUERY = "index,name,uuid,pci.bus_id,memory.total,driver_version"
#: asked first; nvidia-smi of drivers before R510 does not know the field
NVIDIA_SMI_QUERY_CC = NVIDIA_SMI_QUERY + ",compute_cap"


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


def parse_nvidia_smi(text: str) -> List[Dict[str, Any]]:
    """``nvidia-smi --query-gpu=NVIDIA_SMI_QUERY --format=csv,noheader,nounits`` lines as
    GPU facts with the keys of ``nvml.NVML.static_facts`` that nvidia-smi can give."""
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 6 or not parts[1]:
            continue
        try:
            index = int(parts[0])
        except ValueError:
            continue
        try:
            memory = int(float(parts[4].split()[0]) * 2 ** 20)  # MiB
        except (ValueError, IndexError):
            memory = None
        cc = parts[6] if len(parts) > 6 and re.fullmatch(r"\d+\.\d+", parts[6]) else None
        gpus.append({"index": index, "name": parts[1], "uuid": parts[2] or None,
                     "pci_bus_id": nvml.normalize_bus_id(parts[3]), "memory_total_bytes": memory,
                     "compute_capability": cc, "driver_version": parts[5] or None, "topology": []})
    return gpus


def _nvidia_smi_facts() -> List[Dict[str, Any]]:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    for query in (NVIDIA_SMI_QUERY_CC, NVIDIA_SMI_QUERY):
        try:
            out = subprocess.run([exe, f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=20, env=child_env())
        except (OSError, subprocess.TimeoutExpired):
            return []
        if out.returncode == 0:
            return parse_nvidia_smi(out.stdout)
    return []


@dataclasses.dataclass(frozen=True)
class GpuFacts:
    """The GPUs of this machine: ``gpus`` as ``nvml.NVML.static_facts`` gives them (NVML
    index order), where they came from (``source``: "pynvml", "fake:<path>",
    "nvidia-smi" or "absent") and, without NVML, why (``reason``)."""

    gpus: Tuple[Dict[str, Any], ...]
    source: str
    reason: Optional[str] = None

    def describe(self) -> str:
        if self.source == "absent":
            return f"no GPU facts ({self.reason})"
        return f"{len(self.gpus)} GPU(s) from {self.source}" + (f" ({self.reason})" if self.reason else "")


def read_gpu_facts(env: Optional[Mapping[str, str]] = None, module: Any = None) -> GpuFacts:
    """Read the GPUs' static facts once: NVML (opened and shut down here), else, only when
    nvidia-ml-py is not installed and no fake is set, nvidia-smi."""
    env = os.environ if env is None else env
    nv = nvml.load(module, env)
    if nv.available:
        try:
            return GpuFacts(tuple(nv.static_facts()), nv.source)
        finally:
            nv.close()
    if nv.reason == nvml.NOT_INSTALLED:
        smi = _nvidia_smi_facts()
        if smi:
            return GpuFacts(tuple(smi), "nvidia-smi", nv.reason)
    return GpuFacts((), "absent", nv.reason)


@functools.lru_cache(maxsize=1)
def gpu_facts() -> GpuFacts:
    """``read_gpu_facts()`` of this process, read once (``gpu_facts.cache_clear()`` to
    read again)."""
    return read_gpu_facts()


def gpu_info() -> List[Dict[str, Any]]:
    """The GPUs' static facts (NVML index order); [] when there are none or no way to
    read them."""
    return list(gpu_facts().gpus)


def visible_gpus(env: Optional[Mapping[str, str]] = None,
                 facts: Optional[Sequence[Mapping[str, Any]]] = None) -> List[Dict[str, Any]]:
    """Which GPU is ``gpu:N`` in a worker started from ``env`` (default os.environ): the
    suite's worker CUDA variables laid over it (``cuda_devices.worker_gpu_env``), then
    ``cuda_devices.map_visible``; each entry also carries the GPU's compute capability and
    memory."""
    facts = gpu_info() if facts is None else list(facts)
    base = dict(os.environ if env is None else env)
    order = dict(base)
    order.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # what worker_gpu_env gives a worker
    by_index = {g.get("index"): g for g in facts}
    out = []
    for v in cuda_devices.map_visible(facts, order):
        g = by_index.get(v["nvml_index"]) or {}
        out.append(dict(v, compute_capability=g.get("compute_capability"),
                        memory_total_bytes=g.get("memory_total_bytes")))
    return out


def gpu_for_context(ctx: str, env: Optional[Mapping[str, str]] = None,
                    facts: Optional[Sequence[Mapping[str, Any]]] = None) -> Optional[Dict[str, Any]]:
    """The visible GPU (``visible_gpus`` entry) that MXNet's ``ctx`` ("gpu:1") is, or None."""
    kind, _, idx = ctx.partition(":")
    if kind != "gpu":
        return None
    vis = visible_gpus(env, facts)
    n = int(idx or 0)
    return vis[n] if 0 <= n < len(vis) else None


def hardware_info(env: Optional[Mapping[str, str]] = None):
    """The facts the published-table rules need; ``gpu_names`` in ``gpu:N`` order."""
    return HardwareInfo(cpu_model=str(cpu_info().get("model_name", "unknown CPU")),
                        vcpus=len(topology.affinity_cpus()),
                        gpu_names=tuple(g["name"] for g in visible_gpus(env) if g.get("name")))


def for_contexts(hw: HardwareInfo, contexts: Sequence[str]) -> HardwareInfo:
    """``hw`` with only the GPUs of ``contexts`` ("gpu:0", ...): a cell is held to the
    table of the GPU it runs on, not to every GPU of the machine."""
    idx = sorted({int(c.partition(":")[2] or 0) for c in contexts if c.startswith("gpu")})
    if not idx:
        return hw
    return dataclasses.replace(hw, gpu_names=tuple(hw.gpu_names[i] for i in idx if i < len(hw.gpu_names)))


def summary() -> Dict[str, object]:
    cpu = cpu_info()
    return {"cpu_model": cpu.get("model_name"), "logical_cpus": len(topology.affinity_cpus()),
            "physical_cores": topology.available_physical_cores(),
            "gpus": [g.get("name") or "unknown GPU" for g in gpu_info()]}


def gpu_name(index: int) -> Optional[str]:
    """The name of ``gpu:index`` (as a worker started from os.environ sees it)."""
    g = gpu_for_context(f"gpu:{index}")
    return g.get("name") if g else None


# --------------------------------------------------------------------------- GPU failures

@functools.lru_cache(maxsize=8)
def mxnet_distribution(python: Optional[str] = None) -> Optional[str]:
    """The MXNet distribution installed for ``python`` ("mxnet-cu117", "mxnet"), from its
    metadata (never imports mxnet); None when there is not exactly one or it cannot be
    listed."""
    from pytest_mxperf.proc import distributions
    try:
        dists = distributions.installed_mxnet_distributions(python)
    except distributions.InstallError:
        return None
    return dists[0][0] if len(dists) == 1 else None


def explain_gpu_failure(texts: Sequence[str], contexts: Sequence[str], env: Optional[Mapping[str, str]],
                        dist_name: Optional[str], facts: Optional[Sequence[Mapping[str, Any]]] = None
                        ) -> Optional[str]:
    """One line for a GPU worker that failed with CUDA's "no kernel image is available"
    (in its message or stderr ``texts``): the GPU's compute capability, the architectures
    the installed wheel carries and which extra covers the GPU (``gpu_arch``); or with
    fusion's "NVRTC Compilation failed" (``nvrtc_failure_message``). None when the failure
    is something else."""
    from pytest_mxperf.machine import gpu_arch
    nvrtc = any(looks_like_nvrtc_failure(t or "") for t in texts)
    if not nvrtc and not any(gpu_arch.looks_like_no_kernel_image(t or "") for t in texts):
        return None
    gpus = [g for g in (gpu_for_context(c, env, facts) for c in contexts if c.startswith("gpu")) if g]
    cc = next((g["compute_capability"] for g in gpus if g.get("compute_capability")), None)
    name = next((g["name"] for g in gpus if g.get("compute_capability") == cc and g.get("name")), None) or \
        ", ".join(contexts)
    if nvrtc:
        return nvrtc_failure_message(texts, name, cc, dist_name)
    if cc is None:
        return (f"CUDA: no kernel image is available for {name}, whose compute capability is unknown here "
                f"(GPU facts: {gpu_facts().describe()}); see the README's GPU generations table")
    if dist_name:
        try:
            return gpu_arch.no_kernel_image_message(cc, name, dist_name)
        except ValueError:
            pass
    wheels = gpu_arch.covering_wheels(cc)
    hint = (f"MXNet {gpu_arch.MXNET_VERSION} wheels that run on it: {', '.join(w.dist for w, _ in wheels)}"
            if wheels else f"no MXNet {gpu_arch.MXNET_VERSION} wheel runs on it; build MXNet from source "
                           f"with MXNET_CUDA_ARCH={gpu_arch.cc_str(cc)}")
    return f"{name} (compute capability {gpu_arch.cc_str(cc)}) has no kernel image in this MXNet build: {hint}"


# MXNet 1.9.1 src/operator/fusion/fused_op.cu (FusedOp::CompileCode), when NVRTC cannot compile
# a fused pointwise kernel for the GPU at hand ("--gpu-architecture=compute_<cc>"):
#   CHECK_EQ(compileResult, NVRTC_SUCCESS)
#       << "NVRTC Compilation failed. Please set environment variable MXNET_USE_FUSION to 0.\n"
#       << GetCompileLog(program);
_NVRTC_RE = re.compile(r"NVRTC Compilation failed", re.IGNORECASE)
_NVRTC_LOG_RE = re.compile(r"nvrtc: error[^\n]*", re.IGNORECASE)


def looks_like_nvrtc_failure(text: str) -> bool:
    """Whether ``text`` (a worker's message or stderr) carries MXNet's fusion failure
    "NVRTC Compilation failed. Please set environment variable MXNET_USE_FUSION to 0."."""
    return bool(text) and bool(_NVRTC_RE.search(text))


def nvrtc_failure_message(texts: Sequence[str], gpu_name: str, cc: Optional[str], dist_name: Optional[str]) -> str:
    """One line for a worker whose pointwise fusion failed to compile at run time: which GPU,
    NVRTC's own complaint when the log has one, and the two fixes (MXNET_USE_FUSION=0; an
    MXNet build whose CUDA's NVRTC knows the GPU)."""
    log = next((m.group(0).strip() for t in texts for m in [_NVRTC_LOG_RE.search(t or "")] if m), None)
    where = f"{gpu_name} (compute capability {cc})" if cc else gpu_name
    build = f"{dist_name}'s" if dist_name else "this MXNet build's"
    knows = f"compute capability {cc}" if cc else "this GPU"
    said = f" ({log})" if log else ""
    return (f"NVRTC Compilation failed on {where}: MXNet's pointwise fusion compiles its fused kernels at run "
            f"time with {build} NVRTC, which could not compile for this GPU{said}; set MXNET_USE_FUSION=0 "
            f"(pointwise operators then run unfused), or use an MXNet wheel whose CUDA's NVRTC knows {knows}")
