"""Which GPUs each MXNet 1.9.1 CUDA wheel has kernels for. Pure data and functions.

A CUDA wheel carries, for each of MXNet's own CUDA kernels, machine code (SASS, a
"cubin") for a list of GPU architectures and, optionally, PTX that the driver compiles
("JIT") for a GPU the list does not cover. The rules, from the CUDA C++ Programming Guide
(binary and PTX compatibility):

* SASS built for ``sm_XY`` runs on a GPU of compute capability ``X.Z`` only when ``Z >= Y``:
  same major version, equal or higher minor. ``sm_80`` runs on 8.0, 8.6, 8.9; ``sm_86``
  runs on 8.6 and 8.9 but not on 8.0; no SASS ever runs on another major version
  (``sm_86`` does not run on 9.0, ``sm_70`` does not run on 8.0).
* PTX built for ``compute_XY`` is JIT-compiled by the driver for any GPU of compute
  capability ``X.Y`` or higher, of any major version (at the first launch; cached in
  ``CUDA_CACHE_PATH``).
* A GPU with neither gets ``cudaErrorNoKernelImageForDevice`` ("no kernel image is
  available for execution on the device") at its first kernel launch.

What the 1.9.1 wheels were built with: ``MXNET_CUDA_ARCH`` of
``config/distribution/linux_<variant>.cmake`` (``tools/staticbuild/build_lib_cmake.sh``
passes that file to cmake). CMakeLists.txt hands it to ``CUDA_SELECT_NVCC_ARCH_FLAGS``
(``cmake/upstream/select_compute_arch.cmake``), which emits
``-gencode arch=compute_XY,code=sm_XY`` for each ``X.Y`` and adds PTX
(``code=compute_XY``) only for entries written ``X.Y+PTX``. No 1.9.1 config has a
``+PTX`` entry, so **no MXNet 1.9.1 wheel embeds PTX**: a GPU of a newer major version than
the newest listed arch (Hopper 9.0 and later) is not supported by any of them.

Sources (apache/mxnet):

* tag ``1.9.1`` (commit 3f8f3be, 2022-04-21): linux_cu100/101/102/110/112.cmake. The
  ``mxnet-cu101``, ``-cu102``, ``-cu110`` and ``-cu112`` 1.9.1 wheels (PyPI, May 2022).
  ``mxnet-cu100`` has no 1.9.1 wheel (its last release is 1.9.0).
* branch ``v1.9.x`` at commit 71dab74 ("Refactor CD to support newer cuda versions
  (11.0-11.7) (#21123)", 2022-08-18) added linux_cu111/113/114/115/116/117.cmake; the
  ``mxnet-cu111`` and ``-cu113`` ... ``-cu117`` 1.9.1 wheels were published from that
  branch in August 2022. The files of the tag are unchanged there (same arch lists).

Only MXNet's own kernels are covered here. The CUDA wheels do not bundle cuDNN, cuBLAS,
NCCL or the CUDA runtime: MXNet's ``tools/pip/setup.py`` packs only libmxnet,
libgfortran and libopenblas, and ``libmxnet.so`` loads the CUDA 11.x runtime libraries,
cuDNN 8 and NCCL 2 from the machine (``import mxnet`` fails with "OSError: libcudnn.so.8:
cannot open shared object file" without them; apache/mxnet issues #20279, #20218,
#21074). Those libraries carry their own arch lists. MXNet's runtime-compiled fused
operators (NVRTC, ``MXNET_USE_FUSION``) compile for the GPU at hand, but only as far as
the machine's NVRTC knows the architecture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

MXNET_VERSION = "1.9.1"

CC = Tuple[int, int]


def parse_cc(cc) -> CC:
    """"8.6" / "86" / "sm_86" / "compute_86" / (8, 6) -> (8, 6)."""
    if isinstance(cc, (tuple, list)) and len(cc) == 2:
        return int(cc[0]), int(cc[1])
    text = str(cc).strip().lower()
    m = re.fullmatch(r"(\d+)\.(\d+)", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+)(\d)", text)
    if m:
        return int(m.group(1)), int(m.group(2))
    raise ValueError(f"not a compute capability: {cc!r}")


def cc_str(cc) -> str:
    major, minor = parse_cc(cc)
    return f"{major}.{minor}"


def _arch_code(cc: CC) -> str:
    return f"{cc[0]}{cc[1]}"


# CUDA_SELECT_NVCC_ARCH_FLAGS' named architectures: (SASS list, PTX if "+PTX")
_NAMED_ARCHS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    "Fermi": (("2.0", "2.1(2.0)"), ()),
    "Kepler+Tegra": (("3.2",), ()),
    "Kepler+Tesla": (("3.7",), ()),
    "Kepler": (("3.0", "3.5"), ("3.5",)),
    "Maxwell+Tegra": (("5.3",), ()),
    "Maxwell": (("5.0", "5.2"), ("5.2",)),
    "Pascal": (("6.0", "6.1"), ("6.1",)),
    "Volta": (("7.0",), ("7.0",)),
    "Turing": (("7.5",), ("7.5",)),
}


def parse_mxnet_cuda_arch(value: str) -> Tuple[Tuple[CC, ...], Tuple[CC, ...]]:
    """(SASS archs, PTX archs) that MXNet's CMake builds for an ``MXNET_CUDA_ARCH`` value,
    as ``CUDA_SELECT_NVCC_ARCH_FLAGS`` of 1.9.1 reads it: ``X.Y`` -> SASS only,
    ``X.Y(Z.W)`` -> SASS for X.Y from compute Z.W, ``X.Y+PTX`` / ``Name+PTX`` -> also PTX,
    names (Kepler, Maxwell, ...) -> their lists. "Auto" / "Common" / "All" depend on the
    build machine or CUDA version and are refused (ValueError)."""
    sass: List[CC] = []
    ptx: List[CC] = []
    for item in re.split(r"[;\s]+", value.strip()):
        if not item:
            continue
        add_ptx = item.endswith("+PTX")
        name = item[:-4] if add_ptx else item
        m = re.fullmatch(r"(\d\.\d)(?:\((\d\.\d)\))?", name)
        if m:
            # X.Y(Z.W)+PTX: CMake's regex takes every number of "XY(ZW)" as PTX, so both
            bins, ptxs = [m.group(1)], [m.group(1)] + ([m.group(2)] if m.group(2) else [])
        elif name in _NAMED_ARCHS:
            bins = [b.split("(")[0] for b in _NAMED_ARCHS[name][0]]
            ptxs = list(_NAMED_ARCHS[name][1]) or bins
        else:
            raise ValueError(f"MXNET_CUDA_ARCH entry {item!r} is not X.Y, X.Y(Z.W), X.Y+PTX or a known name")
        for b in bins:
            if parse_cc(b) not in sass:
                sass.append(parse_cc(b))
        if add_ptx:
            for p in ptxs:
                if parse_cc(p) not in ptx:
                    ptx.append(parse_cc(p))
    return tuple(sass), tuple(ptx)


@dataclass(frozen=True)
class WheelArch:
    """The GPU code one MXNet 1.9.1 CUDA wheel carries."""

    dist: str                 # "mxnet-cu117"
    cuda: str                 # "11.7"
    mxnet_cuda_arch: str      # the MXNET_CUDA_ARCH value of its cmake config, verbatim
    source: str               # where that value was read
    published: bool = True    # a 1.9.1 wheel of this name exists on PyPI

    @property
    def sass(self) -> Tuple[CC, ...]:
        return parse_mxnet_cuda_arch(self.mxnet_cuda_arch)[0]

    @property
    def ptx(self) -> Tuple[CC, ...]:
        return parse_mxnet_cuda_arch(self.mxnet_cuda_arch)[1]

    @property
    def extra(self) -> str:
        return self.dist[len("mxnet-"):]

    def describe(self) -> str:
        """"sm_50, 60, 70, 80, 86 without PTX" (or "... + PTX compute_86")."""
        codes = [_arch_code(c) for c in self.sass]
        text = "sm_" + ", ".join(codes) if codes else "no SASS"
        if self.ptx:
            return text + " + PTX " + ", ".join("compute_" + _arch_code(c) for c in self.ptx)
        return text + " without PTX"


_TAG = "config/distribution/linux_{v}.cmake at tag 1.9.1 (3f8f3be)"
_BRANCH = "config/distribution/linux_{v}.cmake on branch v1.9.x (added in 71dab74, #21123)"
_CU10 = "3.0;5.0;6.0;7.0;7.5"
_CU110 = "5.0;6.0;7.0;8.0"
_CU111_PLUS = "5.0;6.0;7.0;8.0;8.6"

#: every CUDA variant with a 1.9.1-era cmake config, by distribution name
WHEELS: Dict[str, WheelArch] = {w.dist: w for w in (
    WheelArch("mxnet-cu100", "10.0", _CU10, _TAG.format(v="cu100"), published=False),
    WheelArch("mxnet-cu101", "10.1", _CU10, _TAG.format(v="cu101")),
    WheelArch("mxnet-cu102", "10.2", _CU10, _TAG.format(v="cu102")),
    WheelArch("mxnet-cu110", "11.0", _CU110, _TAG.format(v="cu110")),
    WheelArch("mxnet-cu111", "11.1", _CU111_PLUS, _BRANCH.format(v="cu111")),
    WheelArch("mxnet-cu112", "11.2", _CU111_PLUS, _TAG.format(v="cu112")),
    WheelArch("mxnet-cu113", "11.3", _CU111_PLUS, _BRANCH.format(v="cu113")),
    WheelArch("mxnet-cu114", "11.4", _CU111_PLUS, _BRANCH.format(v="cu114")),
    WheelArch("mxnet-cu115", "11.5", _CU111_PLUS, _BRANCH.format(v="cu115")),
    WheelArch("mxnet-cu116", "11.6", _CU111_PLUS, _BRANCH.format(v="cu116")),
    WheelArch("mxnet-cu117", "11.7", _CU111_PLUS, _BRANCH.format(v="cu117")),
)}

PUBLISHED_WHEELS: Tuple[str, ...] = tuple(d for d, w in WHEELS.items() if w.published)


def _normalize(dist_name: str) -> str:
    name = re.split(r"[=<>!~ \[;@]", dist_name.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_for(dist_name: str) -> Optional[WheelArch]:
    """The arch record of an MXNet distribution (``mxnet-cu117``, ``mxnet_cu117``,
    ``mxnet-cu117==1.9.1``); None for a CPU build (``mxnet``, ``mxnet-mkl``,
    ``mxnet-native``). ``mxnet-cuXXXmkl`` is the same CUDA build. ValueError (one line) for
    a CUDA variant that had no 1.9.1-era build."""
    name = _normalize(dist_name)
    if name in ("mxnet", "mxnet-mkl", "mxnet-native"):
        return None
    m = re.fullmatch(r"mxnet-(cu\d+)(?:mkl)?", name)
    if not m:
        raise ValueError(f"{dist_name!r} is not an MXNet distribution name")
    key = f"mxnet-{m.group(1)}"
    if key not in WHEELS:
        raise ValueError(f"{dist_name}: MXNet {MXNET_VERSION} has no {m.group(1)} build "
                         f"(1.9.1 CUDA wheels: {', '.join(PUBLISHED_WHEELS)})")
    return WHEELS[key]


def sass_runs_on(sass_cc, device_cc) -> bool:
    """SASS (cubin) for ``sm_XY`` runs on compute capability X.Z iff same X and Z >= Y."""
    s, d = parse_cc(sass_cc), parse_cc(device_cc)
    return s[0] == d[0] and d[1] >= s[1]


def ptx_runs_on(ptx_cc, device_cc) -> bool:
    """PTX for ``compute_XY`` JIT-compiles for any device of compute capability >= X.Y."""
    return parse_cc(device_cc) >= parse_cc(ptx_cc)


def best_kernel(cc, record: WheelArch) -> Optional[str]:
    """Which code of ``record`` a GPU of compute capability ``cc`` runs: "sm_XY" (the highest
    compatible SASS), "compute_XY" (PTX, JIT-compiled) or None."""
    sass = [s for s in record.sass if sass_runs_on(s, cc)]
    if sass:
        return "sm_" + _arch_code(max(sass))
    ptx = [p for p in record.ptx if ptx_runs_on(p, cc)]
    if ptx:
        return "compute_" + _arch_code(max(ptx))
    return None


def covers(cc, record: Optional[WheelArch]) -> Tuple[bool, Optional[str]]:
    """(True, "sass") when ``record`` has SASS that runs on ``cc``, (True, "ptx-jit") when only
    its PTX does, else (False, None). A CPU build (None) covers nothing."""
    if record is None:
        return False, None
    kernel = best_kernel(cc, record)
    if kernel is None:
        return False, None
    return True, ("sass" if kernel.startswith("sm_") else "ptx-jit")


def covering_wheels(cc, published_only: bool = True) -> List[Tuple[WheelArch, str]]:
    """(record, "sass"|"ptx-jit") of every wheel that runs on ``cc``, newest CUDA first."""
    out = []
    for w in sorted(WHEELS.values(), key=lambda w: parse_cc(w.cuda), reverse=True):
        if published_only and not w.published:
            continue
        ok, how = covers(cc, w)
        if ok:
            out.append((w, how))
    return out


def _extra_hint(record: WheelArch) -> str:
    try:
        from pytest_mxperf.proc.distributions import extra_for
        extra = extra_for(record.dist)
    except Exception:  # pragma: no cover - installs is part of this package
        extra = None
    return f" (extra {extra})" if extra else ""


#: the first CUDA toolkit whose nvcc compiles for each compute capability (CUDA Toolkit
#: release notes; only where it matters for a source build of 1.9.1: GPUs that some wheel
#: does not cover natively, 8.0 and later)
FIRST_CUDA_FOR_CC: Dict[CC, str] = {(8, 0): "11.0", (8, 6): "11.1", (8, 7): "11.4", (8, 9): "11.8", (9, 0): "11.8"}


def source_build_hint(ccs) -> str:
    """"build MXNet from source with MXNET_CUDA_ARCH=9.0 (CUDA 11.8 or newer: the first nvcc
    that knows sm_90)" for one compute capability or several."""
    single = isinstance(ccs, str) or (isinstance(ccs, tuple) and len(ccs) == 2 and isinstance(ccs[0], int))
    ccs = [parse_cc(c) for c in ([ccs] if single else ccs)]
    text = f"build MXNet from source with MXNET_CUDA_ARCH={';'.join(cc_str(c) for c in ccs)}"
    firsts = [(parse_cc(FIRST_CUDA_FOR_CC[c]), c) for c in ccs if c in FIRST_CUDA_FOR_CC]
    if not firsts:
        return text
    cuda, cc = max(firsts)
    return text + f" (CUDA {cuda[0]}.{cuda[1]} or newer: the first nvcc that knows sm_{_arch_code(cc)})"


def no_kernel_image_message(cc, gpu_name: str, dist_name: str) -> str:
    """One line for a GPU that ``dist_name`` (1.9.1) has no kernel image for, naming what
    would run on it: another 1.9.1 wheel, or a build from source."""
    c = cc_str(cc)
    record = wheel_for(dist_name)
    if record is not None and covers(c, record)[0]:
        kernel = best_kernel(c, record)
        return (f"{gpu_name} (compute capability {c}) reported no kernel image, yet {record.dist} "
                f"{MXNET_VERSION} (built for {record.describe()}) has {kernel} code that runs on it: the missing "
                "image is in a CUDA library it loads from this machine (cuDNN, cuBLAS, NCCL: one older than this GPU?) "
                "or in a runtime-compiled kernel (try MXNET_USE_FUSION=0)")
    where = (f"{record.dist} {MXNET_VERSION} (built for {record.describe()})" if record is not None
             else f"{_normalize(dist_name)} {MXNET_VERSION} (a CPU build)")
    head = f"{gpu_name} (compute capability {c}) has no kernel image in {where}"
    others = [(w, how) for w, how in covering_wheels(c) if record is None or w.dist != record.dist]
    if not others:
        return f"{head}: no MXNet {MXNET_VERSION} wheel supports it; {source_build_hint(c)}"
    best, how = others[0]
    kernel = best_kernel(c, best)
    runs = "natively" if kernel == "sm_" + _arch_code(parse_cc(c)) else \
        (f"via its {kernel} SASS" if how == "sass" else f"by JIT from its {kernel} PTX")
    also = [w.dist for w, _ in others[1:]]
    tail = f" (also: {', '.join(also)})" if also else ""
    return (f"{head}: use {best.dist}=={MXNET_VERSION}{_extra_hint(best)}, which runs on it {runs}{tail}; "
            f"or {source_build_hint(c)}")


_NO_KERNEL_RE = re.compile(
    r"no kernel image is available for execution on the device"
    r"|cudaErrorNoKernelImageForDevice"
    r"|CUDA_ERROR_NO_BINARY_FOR_GPU"
    r"|no binary for gpu"
    r"|invalid device function"
    r"|cudaErrorInvalidDeviceFunction",
    re.IGNORECASE)


def looks_like_no_kernel_image(text: str) -> bool:
    """Whether ``text`` (a worker's stderr, an MXNetError) carries CUDA's "this binary has
    no code for this GPU" error: "no kernel image is available for execution on the
    device" (cudaErrorNoKernelImageForDevice, CUDA >= 9), "invalid device function"
    (cudaErrorInvalidDeviceFunction, what older CUDA said), the driver API's
    CUDA_ERROR_NO_BINARY_FOR_GPU."""
    return bool(text) and bool(_NO_KERNEL_RE.search(text))


#: GPU generations of the README table: (GPUs, compute capability)
GENERATIONS: Tuple[Tuple[str, str], ...] = (
    ("K80", "3.7"),
    ("M40 / M60", "5.2"),
    ("P100", "6.0"),
    ("V100", "7.0"),
    ("T4", "7.5"),
    ("A100", "8.0"),
    ("A10 / RTX 30xx", "8.6"),
    ("L4 / RTX 40xx", "8.9"),
    ("H100", "9.0"),
)


def support(cc, record: WheelArch) -> str:
    """One table cell: "native" (SASS for exactly this GPU), "sm_XY SASS" (compatible SASS
    of an older minor version), "PTX JIT" or "none"."""
    kernel = best_kernel(cc, record)
    if kernel is None:
        return "none"
    if kernel.startswith("compute_"):
        return "PTX JIT"
    return "native" if parse_cc(kernel) == parse_cc(cc) else f"{kernel} SASS"


def wheel_groups(published_only: bool = True) -> List[Tuple[str, ...]]:
    """Wheels with identical arch lists, grouped (table columns), oldest CUDA first."""
    groups: Dict[Tuple, List[str]] = {}
    for w in sorted(WHEELS.values(), key=lambda w: parse_cc(w.cuda)):
        if published_only and not w.published:
            continue
        groups.setdefault((w.sass, w.ptx), []).append(w.dist)
    return [tuple(v) for v in groups.values()]


def _group_label(dists: Sequence[str]) -> str:
    extras = [d[len("mxnet-"):] for d in dists]
    return extras[0] if len(extras) == 1 else f"{extras[0]} ... {extras[-1]}" if len(extras) > 2 else \
        " / ".join(extras)


def _build_table() -> Tuple[Dict[str, object], ...]:
    rows = []
    for gpus, cc in GENERATIONS:
        wheels = {d: support(cc, w) for d, w in WHEELS.items() if w.published}
        rows.append({"gpus": gpus, "compute_capability": cc, "wheels": wheels})
    return tuple(rows)


#: one row per generation: {"gpus", "compute_capability", "wheels": {dist: cell}}
GENERATIONS_TABLE: Tuple[Dict[str, object], ...] = _build_table()


def generations_markdown() -> str:
    """GENERATIONS_TABLE as the README's markdown table, wheels of one arch list in one
    column."""
    groups = wheel_groups()
    head = ["GPU (compute capability)"] + [
        f"{_group_label(g)} ({WHEELS[g[0]].describe()})" for g in groups]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for row in GENERATIONS_TABLE:
        cells = [f"{row['gpus']} ({row['compute_capability']})"] + [row["wheels"][g[0]] for g in groups]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- which extra

def _cuda_tuple(text) -> Optional[CC]:
    try:
        return parse_cc(text) if text else None
    except ValueError:
        return None


def recommend_wheel(gpus: Sequence[Dict[str, object]]) -> Tuple[Optional[WheelArch], str]:
    """The 1.9.1 CUDA wheel for a machine's GPUs (``nvml`` static facts: compute_capability,
    cuda_driver_version) and why: of the published wheels whose code runs on every GPU, the
    newest whose CUDA version the driver supports (a driver runs CUDA up to its own
    version), else the newest of them. (None, reason) when no wheel runs on them all or a
    GPU's compute capability is unknown."""
    if not gpus or any(not g.get("compute_capability") for g in gpus):
        return None, ("the GPUs' compute capability is unknown (NVML not readable: nvidia-ml-py, which every CUDA "
                      "extra installs, is missing); see the README's GPU generations table")
    ccs = sorted({str(g["compute_capability"]) for g in gpus})
    fitting = [w for w, _ in covering_wheels(ccs[0]) if all(covers(c, w)[0] for c in ccs)]
    if not fitting:
        return None, (f"no MXNet {MXNET_VERSION} wheel runs on compute capability {', '.join(ccs)}; "
                      f"{source_build_hint(ccs)}")
    drivers = [_cuda_tuple(g.get("cuda_driver_version")) for g in gpus]
    driver = min((d for d in drivers if d), default=None)
    if driver is not None:
        supported = [w for w in fitting if parse_cc(w.cuda) <= driver]
        if supported:
            return supported[0], f"the newest that runs on compute capability {', '.join(ccs)} " \
                                 f"with this driver (CUDA {driver[0]}.{driver[1]})"
    return fitting[0], f"the newest that runs on compute capability {', '.join(ccs)}"


def cpu_build_message(dist_name: Optional[str], features: Optional[Sequence[str]],
                      gpus: Sequence[Dict[str, object]], python: str = "this interpreter") -> Optional[str]:
    """One line when the MXNet of ``python`` is a CPU build while the machine has GPUs
    (``gpus``: NVML static facts), naming the extra to install; None when the build has
    CUDA, when it is unknown, or when there are no GPUs. ``gpu_readiness.check`` says it
    when GPU tests were selected.

    A CPU build is one whose ``mx.runtime.Features`` lack CUDA (``features``) or, without
    features, a CPU distribution (``mxnet``, ``mxnet-mkl``, ``mxnet-native``)."""
    if not gpus:
        return None
    if features is not None:
        if "CUDA" in features:
            return None
    elif dist_name is None or wheel_for(dist_name) is not None:
        return None
    names: Dict[str, int] = {}
    for g in gpus:
        key = f"{g.get('name') or 'unknown GPU'}" + (
            f", compute capability {g['compute_capability']}" if g.get("compute_capability") else "")
        names[key] = names.get(key, 0) + 1
    seen = "; ".join(f"{n} x {k}" for k, n in names.items())
    build = f"{_normalize(dist_name)} (a CPU build)" if dist_name else "a CPU build of MXNet (no CUDA feature)"
    head = f"{python} has {build} while this machine has {len(gpus)} GPU(s) ({seen})"
    wheel, why = recommend_wheel(gpus)
    if wheel is None:
        return f"{head}: {why}"
    uninstall = _normalize(dist_name) if dist_name else "mxnet"
    return (f"{head}: pip uninstall -y {uninstall} && pip install -e '.[{wheel.extra}]' "
            f"({wheel.dist}=={MXNET_VERSION}, built for {wheel.describe()}; {why})")
