"""Whether a float32 GPU cell ran its GEMMs and convolutions as TF32. Pure, from the GPU's
compute capability (NVML), the MXNet build's CUDA version and the worker's environment.

What MXNet 1.9.1 does (read from its sources at tag 1.9.1; no GPU ran this here):

* ``src/operator/linalg.h``: ``VERSION_ADJUSTED_TF32_MATH`` is ``CUBLAS_TF32_TENSOR_OP_MATH``
  when the build's ``CUDA_VERSION >= 11000`` (``CUBLAS_DEFAULT_MATH`` before), and
  ``linalg_impl.h`` sets it on the cuBLAS handle around every float32 ``linalg_gemm``
  (FullyConnected's forward and backward, ``linalg_batch_gemm``). It reads no MXNet
  variable: ``MXNET_CUDA_ALLOW_TENSOR_CORE`` (``docs/.../faq/env_var.md``: default 1) does not
  turn it off.
* ``src/operator/nn/cudnn/cudnn_convolution-inl.h``: a float32 convolution gets
  ``CUDNN_DEFAULT_MATH``, which cuDNN 8 (what the CUDA 11 wheels load) lets use TF32 kernels
  on compute capability 8.0 and newer; with ``MXNET_CUDA_ALLOW_TENSOR_CORE=1`` and
  ``MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION=1`` (env_var.md: default 0) it gets
  ``CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION`` instead: float32 inputs cast to float16 on tensor
  cores, from compute capability 7.0.
* NVIDIA's ``NVIDIA_TF32_OVERRIDE=0`` makes cuBLAS and cuDNN never use TF32 for float32,
  whatever the program asked for (NVIDIA, "Accelerating AI Training with NVIDIA TF32
  Tensor Cores" and the cuBLAS library documentation).

TF32 keeps float32's 8-bit exponent and a 10-bit mantissa (float32: 23): products of
inputs rounded to 10 bits, accumulated in float32.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

TF32_FROM_CC = (8, 0)           # Ampere: the first TF32 tensor cores
TENSOR_CORES_FROM_CC = (7, 0)   # Volta: the first (float16) tensor cores
TF32_FROM_CUDA = (11, 0)        # linalg.h: CUBLAS_TF32_TENSOR_OP_MATH when CUDA_VERSION >= 11000
TF32_MANTISSA_BITS = 10

_OFF_HOW = "NVIDIA_TF32_OVERRIDE=0 turns it off"


def _version(text) -> Optional[tuple]:
    try:
        parts = str(text).strip().split(".")
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except (ValueError, IndexError, AttributeError):
        return None


def env_flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    """A boolean MXNet variable as dmlc::GetEnv reads an optional<bool>: 0 / 1 / true / false
    (anything else: the default)."""
    v = str(env.get(name, "")).strip().lower()
    if v in ("1", "true"):
        return True
    if v in ("0", "false"):
        return False
    return default


def tf32_fact(cc: Optional[str], build_cuda: Optional[str], env: Mapping[str, str], *,
              gpu: str = "the GPU", cuda_from: str = "") -> Dict[str, Any]:
    """{"in_use": True / False / None (unknown), "why": one line, "compute_capability",
    "build_cuda", "nvidia_tf32_override", "fp16_conversion"} for float32 work on one GPU."""
    override = env.get("NVIDIA_TF32_OVERRIDE")
    conversion = (env_flag(env, "MXNET_CUDA_ALLOW_TENSOR_CORE", True)
                  and env_flag(env, "MXNET_CUDA_TENSOR_OP_MATH_ALLOW_CONVERSION", False))
    c, b = _version(cc) if cc else None, _version(build_cuda) if build_cuda else None
    fact = {"compute_capability": cc, "build_cuda": build_cuda, "nvidia_tf32_override": override,
            "fp16_conversion": bool(conversion and c is not None and c >= TENSOR_CORES_FROM_CC)}
    where = f"{gpu} (compute capability {cc})"
    built = f"an MXNet built with CUDA {build_cuda}{cuda_from}"
    if c is None:
        return dict(fact, in_use=None, why=f"the compute capability of {gpu} is unknown: whether float32 ran as "
                                           "TF32 is unknown")
    if c < TF32_FROM_CC:
        return dict(fact, in_use=False, why=f"{where} has no TF32 (it starts at compute capability 8.0)")
    if b is None:
        return dict(fact, in_use=None, why=f"{where} has TF32, but the MXNet build's CUDA version is unknown: "
                                           "whether float32 ran as TF32 is unknown (it does with CUDA 11 or newer)")
    if b < TF32_FROM_CUDA:
        return dict(fact, in_use=False, why=f"{where} with {built}: no TF32 (MXNet uses it from CUDA 11)")
    if str(override).strip() == "0":
        return dict(fact, in_use=False, why=f"{where} with {built}, but NVIDIA_TF32_OVERRIDE=0: float32 ran "
                                            "without TF32")
    return dict(fact, in_use=True, why=(f"{where} with {built}: float32 GEMMs use TF32 (10-bit mantissa) "
                                        "on tensor cores (MXNet 1.9.1 src/operator/linalg.h: "
                                        "CUBLAS_TF32_TENSOR_OP_MATH for CUDA >= 11; cuDNN 8 may pick TF32 "
                                        f"convolutions); MXNET_CUDA_ALLOW_TENSOR_CORE does not gate it, {_OFF_HOW}"))


def build_cuda_version(dist_name: Optional[str], worker_cuda_runtime: Optional[str]):
    """(CUDA version of the MXNet build, where it was read): the CUDA wheel's own version
    (``mxnet-cu117`` -> "11.7", what it was compiled with), else the CUDA runtime the worker
    loaded (a source build), else (None, "")."""
    from pytest_mxperf.machine import gpu_arch
    if dist_name:
        try:
            record = gpu_arch.wheel_for(dist_name)
        except ValueError:
            record = None
        if record is not None:
            return record.cuda, f" ({record.dist})"
    if worker_cuda_runtime:
        return str(worker_cuda_runtime), " (the CUDA runtime the worker loaded)"
    return None, ""


def for_contexts(contexts: Sequence[str], env: Mapping[str, str], dist_name: Optional[str],
                 worker_cuda_runtime: Optional[str] = None,
                 facts: Optional[Sequence[Mapping[str, Any]]] = None) -> Optional[Dict[str, Any]]:
    """The TF32 fact of a float32 cell on ``contexts`` in a worker started from ``env``
    (CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER say which GPU gpu:N is; NVML facts give its
    compute capability); None for a CPU cell. With several GPUs: in use when it is on any
    of them (the first such GPU's line), unknown when none has it and any is unknown."""
    from pytest_mxperf.machine import hardware
    gpus = [c for c in contexts if str(c).startswith("gpu")]
    if not gpus:
        return None
    build, cuda_from = build_cuda_version(dist_name, worker_cuda_runtime)
    per = []
    for ctx in gpus:
        g = hardware.gpu_for_context(ctx, env, facts) or {}
        name = f"{g['name']} ({ctx})" if g.get("name") else ctx
        per.append(tf32_fact(g.get("compute_capability"), build, env, gpu=name, cuda_from=cuda_from))
    for want in (True, None, False):
        hit = next((f for f in per if f["in_use"] is want), None)
        if hit is not None:
            return dict(hit, contexts=list(gpus))
    return None  # pragma: no cover - every fact is True, None or False
