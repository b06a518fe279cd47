"""Can this session use a GPU at all? One check before any worker, one line. Pure.

A session whose selected measuring tests need a GPU asks this once, when collection ends
(``plugin.pytest_collection_finish``), from facts it already has: the GPUs NVML sees
(``hardware.gpu_facts``), which of them a worker sees (``hardware.visible_gpus``), the
MXNet probe of the worker interpreter (``proc/worker.probe``: its status and message,
``mx.context.num_gpus()``, ``mx.runtime.Features``) and the installed MXNet distribution
(``hardware.mxnet_distribution``). ``check`` returns None when a GPU can be used, else a
``Finding``: its cause and one line naming the cause and the fix.

The causes, in the order they are decided:

* ``library``: ``import mxnet`` fails because a CUDA, cuDNN or NCCL library is missing
  ("OSError: libcudnn.so.8: cannot open shared object file"). The ``mxnet-cu11x`` wheels do
  not bundle them (MXNet's ``tools/pip/setup.py`` packs only libmxnet, libgfortran and
  libopenblas; apache/mxnet #20279, #20218, #21074): the line names the library and the
  package that provides it.
* ``import``: ``import mxnet`` fails for another reason (its message).
* ``no-kernel``: MXNet sees GPUs, but the installed 1.9.1 wheel has no code for any GPU a
  worker sees (its arch list against NVML's compute capability: ``gpu_arch``), e.g. an H100
  (9.0) with ``mxnet-cu112``: what to install, or to build (and with which CUDA).
* with ``mx.context.num_gpus()`` 0:
  ``no-gpu`` (NVML sees no GPU: no driver, no device, or NVML not readable),
  ``cpu-build`` (NVML sees GPUs, MXNet is a CPU build: the extra to install),
  ``hidden`` (``CUDA_VISIBLE_DEVICES`` hides every GPU NVML sees),
  ``driver`` (the driver's CUDA version, ``nvmlSystemGetCudaDriverVersion``, is older than
  the wheel's: MXNet counts no GPU on ``cudaErrorInsufficientDriver``),
  ``unseen`` (none of these: what to check).

``decide`` turns a finding into what the session does (``Decision``): GPU tests asked for
by name (``-m gpu``, ``--perf-ctx gpu:...``) skip with the finding's line and fail the
session unless the failure policy drops ``no-gpu``; GPU tests that came with the default
contexts (``pytest perf_tests`` on a machine without GPUs) skip with the same line without
failing, and only when NVML sees no GPU at all (any other finding leaves them to fail
cell by cell, as before).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.machine import gpu_arch, nvml

#: the failure-policy name (``--perf-fail-on``) of a session whose GPU tests can use no GPU
POLICY = "no-gpu"

CAUSES = ("library", "import", "no-kernel", "no-gpu", "cpu-build", "hidden", "driver", "unseen")

HEAD = "no GPU can be used"


@dataclass(frozen=True)
class Finding:
    """Why no GPU can be used here: ``cause`` (one of CAUSES) and ``line``, one line that
    names the cause and the fix."""

    cause: str
    line: str


@dataclass(frozen=True)
class Decision:
    """What a session does with a finding: its GPU tests skip with ``finding.line``; the
    session fails when ``fails``; ``line`` is what it prints, once."""

    finding: Finding
    fails: bool
    line: str


# --------------------------------------------------------------------------- libraries

@dataclass(frozen=True)
class Library:
    what: str                 # "cuDNN 8"
    pip: Optional[str]        # the CUDA 11 pip package that provides it
    pip_dir: Optional[str]    # where that package puts it, under site-packages


#: soname prefix -> the library and what provides it. The nvidia-*-cu11 packages on PyPI
#: hold the CUDA 11 sonames the 1.9.1 cu11x wheels load (libcudart.so.11.0,
#: libcublas.so.11, libcudnn.so.8, libnccl.so.2, libnvrtc.so.11.2, ...), each under
#: site-packages/nvidia/<dir>/lib, which is not on the loader's path by itself.
LIBRARIES: Tuple[Tuple[str, Library], ...] = (
    ("libcuda", Library("the NVIDIA driver's CUDA library", None, None)),
    ("libcudart", Library("the CUDA runtime", "nvidia-cuda-runtime-cu11", "cuda_runtime")),
    ("libcublasLt", Library("cuBLAS", "nvidia-cublas-cu11", "cublas")),
    ("libcublas", Library("cuBLAS", "nvidia-cublas-cu11", "cublas")),
    ("libcudnn", Library("cuDNN", "nvidia-cudnn-cu11<9", "cudnn")),
    ("libnccl", Library("NCCL", "nvidia-nccl-cu11", "nccl")),
    ("libcufft", Library("cuFFT", "nvidia-cufft-cu11", "cufft")),
    ("libcurand", Library("cuRAND", "nvidia-curand-cu11", "curand")),
    ("libcusolver", Library("cuSOLVER", "nvidia-cusolver-cu11", "cusolver")),
    ("libcusparse", Library("cuSPARSE", "nvidia-cusparse-cu11", "cusparse")),
    ("libnvrtc", Library("NVRTC (runtime compilation)", "nvidia-cuda-nvrtc-cu11", "cuda_nvrtc")),
    ("libnvToolsExt", Library("NVTX", "nvidia-nvtx-cu11", "nvtx")),
)

_MISSING_RE = re.compile(r"(lib[\w+-]+?\.so(?:\.[\d.]*\d)?): cannot open shared object file")


def missing_library(message: str) -> Optional[Tuple[str, Optional[Library]]]:
    """(soname, Library or None when not a CUDA one) of the library an import error names
    ("OSError: libcudnn.so.8: cannot open shared object file: No such file or directory"),
    or None."""
    m = _MISSING_RE.search(message or "")
    if not m:
        return None
    soname = m.group(1)
    base = soname.split(".so")[0]
    for prefix, lib in LIBRARIES:
        # libcuda is the driver's, named exactly; the others by prefix (cuDNN 8 is split into
        # libcudnn_ops_infer.so.8, libcudnn_cnn_infer.so.8, ...)
        if base == prefix or (prefix != "libcuda" and base.startswith(prefix)):
            return soname, lib
    return soname, None


def _major(soname: str) -> Optional[str]:
    m = re.search(r"\.so\.(\d+)", soname)
    return m.group(1) if m else None


def _library_line(soname: str, lib: Optional[Library], python: str, build: str,
                  record: Optional[gpu_arch.WheelArch]) -> str:
    where = f"import mxnet fails in {python} ({build})"
    if lib is None:
        return (f"{HEAD}: {where}: {soname} cannot be found: install what provides it and put its directory "
                "on LD_LIBRARY_PATH")
    if soname.split(".so")[0] == "libcuda":
        return (f"{HEAD}: {where}: {soname}, {lib.what}, cannot be found: install the NVIDIA driver "
                "(nvidia-smi must list the GPU); on a machine without an NVIDIA GPU, install the cpu extra instead")
    what = lib.what + (f" {_major(soname)}" if lib.what == "cuDNN" and _major(soname) else "")
    cuda = record.cuda if record is not None else None
    loads = (f"{record.dist} {gpu_arch.MXNET_VERSION} loads it from this machine; the wheel does not bundle it"
             if record is not None else "MXNet loads it from this machine")
    if lib.pip and (cuda is None or cuda.startswith("11.")):
        fix = (f"pip install '{lib.pip}' and add that environment's site-packages/nvidia/{lib.pip_dir}/lib to "
               f"LD_LIBRARY_PATH, or install {what} for CUDA 11 (the CUDA toolkit or NVIDIA's distro packages) "
               "and add its lib directory")
    else:
        fix = (f"install {what} for CUDA {cuda or 'of this build'} (the CUDA toolkit or NVIDIA's distro packages) "
               "and add its lib directory to LD_LIBRARY_PATH")
    return f"{HEAD}: {where}: {soname} ({what}) cannot be found ({loads}): {fix}"


# --------------------------------------------------------------------------- the driver

#: the Linux driver branch each CUDA toolkit needs (CUDA Toolkit release notes, "CUDA
#: Toolkit and Corresponding Driver Versions"); nvidia-smi prints the newest CUDA version
#: its driver supports ("CUDA Version"), nvmlSystemGetCudaDriverVersion returns it. The
#: branch is the one of each toolkit's first release (10.0.130 >= 410.48, 10.1.105 >= 418.39,
#: 10.2.89 >= 440.33, ...). CUDA 11's minor version compatibility lets an R450 driver
#: (>= 450.80.02) run any 11.x build, but not PTX it has to JIT-compile for a newer toolkit,
#: which MXNet's runtime-compiled fusion (NVRTC) produces: so the fix named is the branch
#: of the wheel's own CUDA
DRIVER_BRANCH_FOR_CUDA = {"10.0": "R410", "10.1": "R418", "10.2": "R440", "11.0": "R450", "11.1": "R455",
                          "11.2": "R460", "11.3": "R465", "11.4": "R470", "11.5": "R495", "11.6": "R510",
                          "11.7": "R515", "11.8": "R520"}


def _cuda_version(text: Any) -> Optional[Tuple[int, int]]:
    try:
        return gpu_arch.parse_cc(text) if text else None
    except ValueError:
        return None


def _seen(gpus: Sequence[Mapping[str, Any]]) -> str:
    names: dict = {}
    for g in gpus:
        key = f"{g.get('name') or 'unknown GPU'}" + (
            f", compute capability {g['compute_capability']}" if g.get("compute_capability") else "")
        names[key] = names.get(key, 0) + 1
    return "; ".join(f"{n} x {k}" for k, n in names.items())


# --------------------------------------------------------------------------- the check

def _wheel(dist_name: Optional[str]) -> Optional[gpu_arch.WheelArch]:
    if not dist_name:
        return None
    try:
        return gpu_arch.wheel_for(dist_name)
    except ValueError:
        return None


def _build(dist_name: Optional[str], probe: Mapping[str, Any]) -> str:
    version = probe.get("mxnet_version") or (gpu_arch.MXNET_VERSION if dist_name else None)
    text = " ".join(x for x in (dist_name or "MXNet", version) if x)
    features = probe.get("features")
    if features is not None and "CUDA" not in features:
        text += ", a CPU build"
    return text


def check(gpus: Sequence[Mapping[str, Any]], visible: Sequence[Mapping[str, Any]], probe: Mapping[str, Any],
          dist_name: Optional[str], *, python: str = "this interpreter", nvml_note: Optional[str] = None,
          cuda_visible_devices: Optional[str] = None) -> Optional[Finding]:
    """Why no GPU can be used by the workers of ``python``, or None when one can (or when
    nothing says otherwise).

    ``gpus``: NVML's static facts of every GPU (``nvml.NVML.static_facts``); ``visible``:
    the ones a worker sees, with their compute capability (``hardware.visible_gpus``);
    ``probe``: the worker interpreter's MXNet probe; ``dist_name``: its MXNet distribution
    ("mxnet-cu117"; None when unknown); ``nvml_note``: why NVML gave no facts, if it did
    not; ``cuda_visible_devices``: the workers' ``CUDA_VISIBLE_DEVICES`` (None: unset)."""
    record = _wheel(dist_name)
    build = _build(dist_name, probe)
    if probe.get("status") not in (None, "ok"):
        message = str(probe.get("message") or probe.get("status"))
        lib = missing_library(message)
        if lib is not None:
            return Finding("library", _library_line(lib[0], lib[1], python, build, record))
        return Finding("import", f"{HEAD}: the MXNet probe of {python} failed: {message}")
    n = int(probe.get("num_gpus") or 0)
    if n > 0:
        known = [g for g in visible if g.get("compute_capability")]
        if record is not None and known and not any(gpu_arch.covers(g["compute_capability"], record)[0]
                                                     for g in known):
            g = known[0]
            return Finding("no-kernel", f"{HEAD}: " + gpu_arch.no_kernel_image_message(
                g["compute_capability"], g.get("name") or "gpu:0", dist_name))
        return None
    if not gpus:
        why = nvml_note or "it lists no device"
        if why == nvml.NOT_INSTALLED:  # and nvidia-smi, asked instead, gave nothing
            why += ", nor does nvidia-smi list any"
        return Finding("no-gpu", f"{HEAD}: NVML sees no GPU ({why}) and mx.context.num_gpus() is 0 in {python} "
                                 f"({build}): run on a machine with an NVIDIA GPU and its driver (nvidia-smi lists it), "
                                 "or deselect the GPU tests (-m 'not gpu')")
    cpu = gpu_arch.cpu_build_message(dist_name, probe.get("features"), [dict(g) for g in gpus], python)
    if cpu:
        return Finding("cpu-build", f"{HEAD}: {cpu}")
    seen = _seen(gpus)
    if not visible and cuda_visible_devices is not None:
        return Finding("hidden", f"{HEAD}: CUDA_VISIBLE_DEVICES={cuda_visible_devices!r} hides the {len(gpus)} GPU(s) "
                                 f"NVML sees ({seen}): unset it or list the GPUs the tests may use")
    drivers = [(v, g.get("driver_version")) for g in gpus for v in [_cuda_version(g.get("cuda_driver_version"))] if v]
    driver = min(drivers, default=None)
    if record is not None and driver is not None and driver[0] < gpu_arch.parse_cc(record.cuda):
        have = f"{driver[0][0]}.{driver[0][1]}"
        branch = DRIVER_BRANCH_FOR_CUDA.get(record.cuda)
        upgrade = (f"upgrade the NVIDIA driver to {branch} or newer (nvidia-smi's 'CUDA Version' {record.cuda} or higher)"
                   if branch else f"upgrade the NVIDIA driver to one for CUDA {record.cuda} or newer")
        wheel, _ = gpu_arch.recommend_wheel([dict(g) for g in gpus])
        other = ""
        if wheel is not None and wheel.dist != record.dist and gpu_arch.parse_cc(wheel.cuda) <= driver[0]:
            other = (f", or pip uninstall -y {record.dist} && pip install -e '.[{wheel.extra}]' "
                     f"({wheel.dist}=={gpu_arch.MXNET_VERSION}, which this driver runs)")
        the_driver = f"the driver {driver[1]}" if driver[1] else "the driver"
        return Finding("driver", f"{HEAD}: NVML sees {seen} but mx.context.num_gpus() is 0 in {python} ({build}): "
                                 f"{the_driver} supports CUDA up to {have}, older than the CUDA {record.cuda} this "
                                 f"wheel needs (MXNet counts no GPU when the driver is insufficient): {upgrade}{other}")
    about = f"driver {driver[1]}, CUDA {driver[0][0]}.{driver[0][1]}" if driver else "driver unknown"
    return Finding("unseen", f"{HEAD}: NVML sees {seen} ({about}) but mx.context.num_gpus() is 0 in {python} "
                             f"({build}): check that this user can open /dev/nvidia* and that CUDA_VISIBLE_DEVICES "
                             f"({cuda_visible_devices if cuda_visible_devices is not None else 'unset'}) names them; "
                             f"{python} -c 'import mxnet as mx; mx.nd.zeros(1, ctx=mx.gpu(0))' shows CUDA's own error")


def decide(finding: Optional[Finding], gpu_asked_for: bool, fail_on: Iterable[str]) -> Optional[Decision]:
    """What the session does with ``finding`` (see the module doc); None: nothing, its GPU
    tests run (and fail or skip) cell by cell."""
    if finding is None:
        return None
    if not gpu_asked_for:
        if finding.cause != "no-gpu":
            return None
        return Decision(finding, False, f"mxperf: {finding.line} (GPU tests skipped; not failing: "
                                        "no GPU was asked for by -m gpu or --perf-ctx gpu)")
    fails = POLICY in set(fail_on)
    tail = (f"failing the session; --perf-fail-on=-{POLICY} to let it pass" if fails
            else f"GPU tests skipped; not failing: --perf-fail-on without {POLICY}")
    return Decision(finding, fails, f"mxperf: {finding.line} ({tail})")
