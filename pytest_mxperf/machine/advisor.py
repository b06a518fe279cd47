"""Environment advisor: what in the *user's* environment works against MXNet on this machine.

Parent side: pure functions and small data, no MXNet. The inputs are what the suite
already knows before (or after) a worker runs: the variables the user set, the ones the
suite filled in (``topology.worker_env``), the build features and OpenMP runtime a worker
reported (``workers.protocol.runtime_info`` / ``thread_pools``), the CPU topology
(``topology.describe()``), the cell's contexts and the number of GPUs.

Only what the user set is judged: a variable the suite filled in because the user left it
unset is the suite's choice (e.g. OpenMP threads = physical cores), never a warning.

The checks:

- ``OMP_NUM_THREADS`` below the physical cores available to the process (cores left idle),
  above them (oversubscription: threads wait for each other at every parallel region), or
  threads x CPU contexts above them (MXNet runs each CPU context's operators with their own
  OpenMP team).
- Two or more sockets and no thread pinning: MXNet's CPU performance guide says
  ``KMP_AFFINITY=granularity=fine,compact,1,0``, which only Intel's OpenMP (libiomp) and
  LLVM's (libomp) read. The PyPI wheels use GNU libgomp, which ignores every ``KMP_*``
  variable: there the advice is ``OMP_PROC_BIND=close OMP_PLACES=cores`` (OpenMP 4.0,
  read by all three runtimes).
- ``KMP_*`` set while the runtime is libgomp: no effect.
- ``MXNET_CUDNN_AUTOTUNE_DEFAULT=0`` on a GPU cell: cuDNN's algorithm search is off and
  convolutions run with its heuristic choice.
- A build without MKLDNN (oneDNN) for CPU cells, without CUDNN for GPU cells.
- ``MXNET_SUBGRAPH_BACKEND=NONE``: the oneDNN graph fusions (Convolution + BatchNorm +
  ReLU, FullyConnected + activation, ...) are off.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Union

from pytest_mxperf.machine import topology as _topology

PINNING_VARS = ("OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY", "GOMP_CPU_AFFINITY")
MXNET_DOCS_KMP_AFFINITY = "KMP_AFFINITY=granularity=fine,compact,1,0"
GOMP_PINNING = "OMP_PROC_BIND=close OMP_PLACES=cores"

# threadpoolctl's ``prefix`` of each OpenMP runtime
LIBGOMP, LIBIOMP, LIBOMP = "libgomp", "libiomp", "libomp"


@dataclasses.dataclass(frozen=True)
class Advice:
    """One finding: a stable ``code``, a one-line ``message``, and the setting seen
    (``setting_bad``) with the one advised instead (``setting_good``)."""

    code: str
    message: str
    setting_bad: str
    setting_good: str

    def to_dict(self) -> Dict[str, str]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------------- machine facts

def socket_count(cpus: Optional[Iterable[int]] = None, sysfs: Path = _topology.SYSFS_CPU) -> int:
    """Distinct ``physical_package_id`` among ``cpus`` (default: this process's affinity
    mask), read from ``/sys``; 1 when the kernel does not say."""
    cpus = list(_topology.affinity_cpus() if cpus is None else cpus)
    packages = set()
    for cpu in cpus:
        try:
            packages.add((sysfs / f"cpu{cpu}" / "topology" / "physical_package_id").read_text().strip())
        except OSError:
            return 1
    return max(1, len(packages))


def openmp_runtime(report: Union[None, Mapping, Sequence[Mapping]]) -> Optional[str]:
    """The OpenMP runtime in a worker's threadpoolctl report: "libgomp", "libiomp",
    "libomp", several joined with "+", or None when the report names none.

    ``report`` is ``workers.protocol.thread_pools()`` (``{"pools": [...]}``), its list of
    pools, or a single pool; a pool is recognised by ``prefix`` (or ``internal_api``)."""
    if report is None:
        return None
    if isinstance(report, Mapping):
        pools = report.get("pools") if "pools" in report else [report]
    else:
        pools = list(report)
    found = set()
    for pool in pools or ():
        if not isinstance(pool, Mapping):
            continue
        names = " ".join(str(pool.get(k) or "") for k in ("prefix", "internal_api", "filepath")).lower()
        if pool.get("user_api") not in (None, "openmp") and "omp" not in names:
            continue
        for runtime in (LIBGOMP, LIBIOMP, LIBOMP):
            if runtime in names:
                found.add(runtime)
                break
    return "+".join(sorted(found)) if found else None


def _physical_cores(topo: Mapping) -> Optional[int]:
    for key in ("default_threads", "physical_cores"):
        v = topo.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def _threads(value: str) -> Optional[int]:
    """The outer team size of an ``OMP_NUM_THREADS`` value ("4", "4,2"); None if not a
    positive integer."""
    head = str(value).split(",")[0].strip()
    return int(head) if head.isdigit() and int(head) > 0 else None


def user_settings(user_env: Mapping[str, str], suite_defaults: Mapping[str, str]) -> Dict[str, str]:
    """The variables the user set: ``user_env`` without the suite's own fill-ins (a key the
    suite filled, with the value it filled, is the suite's)."""
    return {k: v for k, v in user_env.items()
            if not (k in suite_defaults and str(suite_defaults[k]) == str(v))}


# ------------------------------------------------------------------------- the advisor

def advise(user_env: Mapping[str, str], suite_defaults: Mapping[str, str],
           build_features: Optional[Iterable[str]], topology: Mapping, contexts: Sequence[str],
           num_gpus: int, openmp_runtime: Optional[str] = None) -> List[Advice]:
    """Advice on the user's environment for a cell on ``contexts`` (e.g. ["cpu:0"]).

    ``build_features``: MXNet's enabled build features (None: unknown, no build check);
    ``topology``: as ``topology.describe()``, optionally with "sockets" (else read from
    /sys for its "affinity_cpus"); ``openmp_runtime``: see :func:`openmp_runtime` (None:
    unknown)."""
    env = user_settings(user_env, suite_defaults)
    cpu_ctx = [c for c in contexts if str(c).startswith("cpu")]
    gpu_ctx = [c for c in contexts if str(c).startswith("gpu")]
    features = None if build_features is None else {str(f).upper() for f in build_features}
    runtime = openmp_runtime
    out: List[Advice] = []

    cores = _physical_cores(topology)
    if "OMP_NUM_THREADS" in env and cpu_ctx and cores:
        out += _thread_advice(env["OMP_NUM_THREADS"], cores, len(cpu_ctx))

    sockets = topology.get("sockets")
    if not isinstance(sockets, int) or isinstance(sockets, bool):
        sockets = socket_count(topology.get("affinity_cpus"))
    if cpu_ctx and sockets >= 2 and not any(v in env for v in PINNING_VARS):
        out.append(_pinning_advice(sockets, runtime))

    kmp = sorted(k for k in env if k.startswith("KMP_"))
    if kmp and runtime == LIBGOMP:
        shown = " ".join(f"{k}={env[k]}" for k in kmp)
        good = GOMP_PINNING if "KMP_AFFINITY" in kmp else "unset " + " ".join(kmp)
        out.append(Advice(
            "kmp-ignored-by-libgomp",
            f"{shown}: KMP_* variables are read only by Intel's and LLVM's OpenMP; this MXNet uses GNU "
            f"libgomp, which ignores them" + (f" (pin threads with {GOMP_PINNING})" if "KMP_AFFINITY" in kmp else ""),
            shown, good))

    if gpu_ctx and num_gpus > 0 and str(env.get("MXNET_CUDNN_AUTOTUNE_DEFAULT", "")).strip() == "0":
        out.append(Advice(
            "cudnn-autotune-off",
            "MXNET_CUDNN_AUTOTUNE_DEFAULT=0 turns off cuDNN's convolution algorithm search: convolutions run "
            "with its heuristic choice, often slower; unset it (default 1) or set 1",
            "MXNET_CUDNN_AUTOTUNE_DEFAULT=0", "MXNET_CUDNN_AUTOTUNE_DEFAULT unset (1)"))

    if features is not None:
        if cpu_ctx and not ({"MKLDNN", "ONEDNN", "DNNL"} & features):
            out.append(Advice(
                "build-without-mkldnn",
                "this MXNet build has no MKLDNN (oneDNN): CPU convolutions run MXNet's own im2col + BLAS "
                "kernels, several times slower; install a build with MKLDNN (PyPI mxnet>=1.7, or mxnet-mkl "
                "for older releases)",
                "build features without MKLDNN", "a build with the MKLDNN feature"))
        if gpu_ctx and not ({"CUDNN"} & features):
            out.append(Advice(
                "build-without-cudnn",
                "this MXNet build has no CUDNN: GPU convolutions run MXNet's fallback kernels; install a CUDA "
                "build with cuDNN (PyPI mxnet-cuXXX)",
                "build features without CUDNN", "a build with the CUDNN feature"))

    backend = env.get("MXNET_SUBGRAPH_BACKEND")
    if cpu_ctx and backend is not None and backend.strip().upper() == "NONE":
        out.append(Advice(
            "subgraph-backend-off",
            "MXNET_SUBGRAPH_BACKEND=NONE turns off the oneDNN graph fusions (Convolution + BatchNorm + "
            "ReLU, FullyConnected + activation, ...); unset it (MXNet 1.9 uses MKLDNN by default)",
            "MXNET_SUBGRAPH_BACKEND=NONE", "MXNET_SUBGRAPH_BACKEND unset (MKLDNN)"))
    return out


def _thread_advice(value: str, cores: int, n_cpu_ctx: int) -> List[Advice]:
    threads = _threads(value)
    bad = f"OMP_NUM_THREADS={value}"
    per_ctx = max(1, cores // n_cpu_ctx)
    good = (f"OMP_NUM_THREADS={per_ctx}" if n_cpu_ctx > 1 else f"OMP_NUM_THREADS={cores}") + \
        " (or unset: the suite uses the physical cores)"
    if threads is None:
        return [Advice("omp-threads-invalid",
                       f"{bad} is not a positive number of threads; OpenMP falls back to its own default",
                       bad, good)]
    ctx_note = f" x {n_cpu_ctx} CPU contexts" if n_cpu_ctx > 1 else ""
    total = threads * n_cpu_ctx
    if threads > cores:
        return [Advice("omp-threads-oversubscribed",
                       f"{bad}{ctx_note} is more than the {cores} physical cores available: threads of one "
                       f"parallel region wait for each other (oversubscription)", bad, good)]
    if total > cores:
        return [Advice("omp-threads-per-context",
                       f"{bad} x {n_cpu_ctx} CPU contexts = {total} threads on {cores} physical cores: each "
                       f"context runs its own OpenMP team; use {per_ctx} per context", bad, good)]
    if total < cores:
        return [Advice("omp-threads-underused",
                       f"{bad}{ctx_note} uses {total} of the {cores} physical cores available; the rest stay "
                       f"idle", bad, good)]
    return []


def _pinning_advice(sockets: int, runtime: Optional[str]) -> Advice:
    bad = "no thread pinning (" + ", ".join(PINNING_VARS) + " unset)"
    if runtime == LIBIOMP:
        return Advice("pinning-unset",
                      f"{sockets} sockets and no thread pinning: threads migrate between sockets and away from "
                      f"their memory; with Intel's OpenMP set {MXNET_DOCS_KMP_AFFINITY} (MXNet's guide)",
                      bad, MXNET_DOCS_KMP_AFFINITY)
    which = {LIBGOMP: "this MXNet uses GNU libgomp, which ignores it",
             LIBOMP: "LLVM's libomp reads it too, but the OpenMP standard variables are portable",
             None: "the OpenMP runtime is unknown"}.get(runtime, f"this MXNet uses {runtime}")
    return Advice("pinning-unset",
                  f"{sockets} sockets and no thread pinning: threads migrate between sockets and away from their "
                  f"memory; MXNet's guide says {MXNET_DOCS_KMP_AFFINITY}, which only Intel's OpenMP reads "
                  f"({which}): set {GOMP_PINNING}",
                  bad, GOMP_PINNING)


def format_advice(advice: Iterable[Advice]) -> List[str]:
    """One line per finding, for a report."""
    return [f"[{a.code}] {a.message} (seen: {a.setting_bad}; advised: {a.setting_good})" for a in advice]
