"""Machine fingerprint: which hardware a figure was measured on, and its baseline file's name.

``machine_fingerprint()`` returns::

    {"id": "intel-xeon-processor-2c-1a2b3c4d",   # names baselines/<id>.json
     "hardware": {...},                           # everything that goes into the hash
     "volatile": {...},                           # noise evidence (clock, load, steal), never hashed
     "name_source": "auto" | "override"}

What is hashed: CPU vendor, model string, family/model/stepping (the model string alone
is not enough: cloud VMs often say just "Intel(R) Xeon(R) Processor"), the ISA flags that
change MXNet kernels (avx, avx2, fma, f16c, avx512*, amx*, avx_vnni, ...), cache sizes,
physical and logical cores *available to this process* (affinity mask, cgroup quota),
total memory rounded to GiB, and the kind of GPUs (``nvml.fingerprint_part``: per GPU
model its name, memory in GiB, compute capability, count and GPU-to-GPU links).

Recorded, not hashed: ``"gpus"``, every GPU's static NVML facts (UUID, PCI bus id,
driver and CUDA driver version, maximum clocks, power limit, topology), read in this
process without a CUDA context (``hardware.gpu_facts``); ``"volatile"["gpus"]``, their
volatile state (memory in use, current clocks, temperature, ...).

What is not hashed: software (MXNet version, build features, CUDA/cuDNN, GPU driver) —
callers record it beside each figure, so an MXNet upgrade is compared against the same
hardware's baseline and shows up in the verdict's environment diff instead of silently
starting a new baseline — and volatile state (clock MHz, load average, steal time).

``--perf-machine NAME`` maps to ``machine_fingerprint(override_name=NAME)``: NAME becomes
the id verbatim after validation (a safe file-name slug, see ``validate_machine_name``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

from pytest_mxperf.machine import hardware, nvml, topology
from pytest_mxperf.machine.state import parse_proc_stat

# ISA extensions that select different MXNet / oneDNN kernels.
_ISA_EXACT = {"sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx_vnni_int8",
              "avx_ifma", "avx_ne_convert", "amx_bf16", "amx_tile", "amx_int8", "amx_fp16",
              "amx_complex", "vaes", "vpclmulqdq", "gfni", "sha_ni"}
_ISA_PREFIXES = ("avx512", "amx")
# arm64 equivalents (/proc/cpuinfo "Features")
_ISA_ARM = {"asimd", "asimdhp", "asimddp", "sve", "sve2", "bf16", "i8mm", "sme"}

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,79}$")
SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu{cpu}/cache")


def validate_machine_name(name: str) -> str:
    """Return ``name`` if it is a safe baseline file slug, else raise ValueError (one line).

    Allowed: 1-80 characters of lowercase letters, digits, '.', '_' and '-', starting with a
    letter or digit (so no path separators, no '..', no hidden files).
    """
    if not isinstance(name, str) or not NAME_RE.match(name) or name.endswith(".") or ".." in name:
        raise ValueError(
            f"bad --perf-machine name {name!r}: use 1-80 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (it names baselines/<name>.json)")
    return name


def isa_flags(flags) -> List[str]:
    """The subset of CPU flags that matter for kernel selection, sorted."""
    out = set()
    for f in flags or ():
        f = str(f).lower()
        if f in _ISA_EXACT or f in _ISA_ARM or f.startswith(_ISA_PREFIXES):
            out.add(f)
    return sorted(out)


def cache_sizes(cpu: int = 0, root: Optional[Path] = None) -> Dict[str, str]:
    """{"L1d": "48K", "L1i": "64K", "L2": "2048K", "L3": "491520K"} from sysfs ({} if absent)."""
    base = Path(str(root)) if root is not None else Path(str(SYSFS_CACHE).format(cpu=cpu))
    out: Dict[str, str] = {}
    try:
        entries = sorted(base.glob("index*"))
    except OSError:
        return out
    for d in entries:
        try:
            level = (d / "level").read_text().strip()
            typ = (d / "type").read_text().strip()
            size = (d / "size").read_text().strip()
        except OSError:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(typ, "")
        out[f"L{level}{suffix}"] = size
    return out


def total_memory_gib() -> Optional[int]:
    try:
        import psutil
        return int(round(psutil.virtual_memory().total / 2 ** 30))
    except Exception:  # pragma: no cover
        try:
            return int(round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30))
        except (ValueError, OSError, AttributeError):
            return None


def hardware_facts() -> Dict[str, Any]:
    """Everything that identifies the hardware (the hashed part of the fingerprint)."""
    cpu = hardware.cpu_info()
    cpus = topology.affinity_cpus()
    quota = topology.cgroup_cpu_quota()
    gpus = hardware.gpu_info()
    return {
        "cpu_vendor": str(cpu.get("vendor", "unknown")),
        "cpu_model": str(cpu.get("model_name", "unknown CPU")),
        "cpu_family": str(cpu.get("family", "")),
        "cpu_model_number": str(cpu.get("model", "")),
        "cpu_stepping": str(cpu.get("stepping", "")),
        "isa": isa_flags(cpu.get("flags")),
        "cache": cache_sizes(cpus[0] if cpus else 0) or {"cpuinfo": str(cpu.get("cache_size", ""))},
        "logical_cpus": len(cpus),
        "physical_cores": topology.physical_cores(cpus),
        "available_cores": topology.available_physical_cores(),
        "cgroup_quota_cpus": quota,
        "memory_gib": total_memory_gib(),
        "gpus": nvml.fingerprint_part(gpus),
        "gpu_count": len(gpus),
    }


def volatile_facts() -> Dict[str, Any]:
    """Noise evidence recorded beside figures: clock, load average, steal time. Never hashed."""
    out: Dict[str, Any] = {}
    cpu = hardware.parse_cpuinfo(_read("/proc/cpuinfo") or "")
    if "mhz" in cpu:
        try:
            out["cpu_mhz"] = float(cpu["mhz"])
        except ValueError:
            pass
    try:
        out["loadavg"] = list(os.getloadavg())
    except (OSError, AttributeError):  # pragma: no cover
        pass
    stat = _read("/proc/stat")
    if stat:
        out.update(steal_since_boot(stat))
    gpus = gpu_volatile_facts()
    if gpus:
        out["gpus"] = gpus
    return out


def gpu_volatile_facts(env=None, module=None) -> List[Dict[str, Any]]:
    """The GPUs' volatile NVML facts now (memory in use, clocks, temperature, throttle
    reasons); [] without NVML. Noise evidence: never hashed, never in an environment diff."""
    nv = nvml.load(module, env)
    if not nv.available:
        return []
    try:
        return nv.volatile_facts()
    finally:
        nv.close()


def steal_since_boot(text: str) -> Dict[str, Any]:
    """Steal time since boot from /proc/stat's aggregate ``cpu`` line (``state.parse_proc_stat``):
    jiffies and fraction of the total; {} without such a line."""
    try:
        st = parse_proc_stat(text)
    except ValueError:
        return {}
    return {"steal_jiffies": st["steal"], "steal_fraction": st["steal"] / st["total"] if st["total"] else 0.0}


def _read(path: str) -> Optional[str]:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def slugify(text: str) -> str:
    text = re.sub(r"\((r|tm|c)\)", " ", text.lower())
    text = re.sub(r"\b(cpu|@|with|radeon graphics)\b", " ", text)
    text = re.sub(r"[0-9.]+\s*ghz", " ", text)
    text = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    return text[:48].strip("-") or "machine"


def fingerprint_hash(hw: Dict[str, Any]) -> str:
    blob = json.dumps(hw, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def machine_id(hw: Dict[str, Any]) -> str:
    """``<cpu model slug>-<available cores>c[-<n>x<gpu slug>]-<hash8>``, e.g. intel-xeon-processor-2c-1a2b3c4d."""
    parts = [slugify(hw.get("cpu_model", "cpu")), f"{hw.get('available_cores', 0)}c"]
    gpus = hw.get("gpus") or []
    if gpus:
        first = gpus[0].get("name") or "gpu"
        count = sum(int(g.get("count", 1)) for g in gpus)
        parts.append(f"{count}x{slugify(first.replace('NVIDIA', ''))}")
    parts.append(fingerprint_hash(hw))
    return "-".join(parts)


def machine_fingerprint(override_name: Optional[str] = None) -> Dict[str, Any]:
    """This machine's fingerprint: {"id", "hardware", "volatile", "name_source"}.

    ``override_name`` (``--perf-machine``) becomes the id after ``validate_machine_name``
    (ValueError with a one-line message when it is not a safe slug). The hardware facts are
    still recorded, so a shared name across different hardware can be spotted.
    """
    if override_name is not None:
        validate_machine_name(override_name)
    hw = hardware_facts()
    facts = hardware.gpu_facts()
    return {
        "id": override_name if override_name is not None else machine_id(hw),
        "hardware": hw,
        "gpus": [{k: v for k, v in g.items() if k not in nvml.VOLATILE_KEYS} for g in facts.gpus],
        "gpu_facts_source": facts.describe(),
        "volatile": volatile_facts(),
        "name_source": "override" if override_name is not None else "auto",
    }
