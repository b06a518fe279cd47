"""Which NVML GPU is MXNet's ``gpu:N`` in a worker, and the CUDA variables the suite gives
its GPU workers.

* ``map_visible(static_facts, env)`` / ``visible_gpus(nvml, env)``: MXNet's ``gpu:N`` is
  CUDA device N, after ``CUDA_DEVICE_ORDER`` and ``CUDA_VISIBLE_DEVICES``; matched to the
  NVML facts by PCI bus id.
* ``worker_gpu_env(base_env)`` / ``gpu_env_sources``: ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` and a
  persistent CUDA JIT cache, a value the user set kept and said to be theirs.

Pure: no NVML calls of its own (the facts come from ``nvml.NVML.static_facts``), no mxnet.
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from pytest_mxperf.machine.nvml import NVML, normalize_bus_id

#: the CUDA JIT cache's size the suite asks for (CUDA_CACHE_MAXSIZE)
CUDA_CACHE_MAXSIZE_BYTES = 2 * 2 ** 30


def bus_key(bus_id: Optional[str]) -> Tuple:
    norm = normalize_bus_id(bus_id) or ""
    m = re.fullmatch(r"([0-9A-F]{8}):([0-9A-F]{2}):([0-9A-F]{2})\.([0-7])", norm)
    if not m:
        return (1, norm)
    return (0,) + tuple(int(x, 16) for x in m.groups())


def map_visible(static_facts: Sequence[Mapping[str, Any]], env: Mapping[str, str]) -> List[Dict[str, Any]]:
    """Which NVML GPU is MXNet's ``gpu:N`` in a process started with ``env``.

    MXNet's ``gpu(N)`` is CUDA device N. CUDA enumerates the GPUs in ``CUDA_DEVICE_ORDER``
    (``PCI_BUS_ID``: ascending PCI bus id; unset or ``FASTEST_FIRST``: CUDA's own speed
    heuristic, which can differ from NVML's order) and then applies
    ``CUDA_VISIBLE_DEVICES``: unset = all; an empty string = none; else a comma list of
    indices into that enumeration or of GPU UUIDs (``GPU-...``, any unique prefix), kept in
    the order given. The list ends at the first entry that is invalid (an index out of
    range, an unknown or ambiguous UUID, anything else, e.g. a ``MIG-`` instance, which is
    not mapped here) or repeats an earlier device.

    The suite's workers get ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` (``worker_gpu_env``). Without
    it this function still assumes PCI bus order for indices and says so: each entry's
    ``order_certain`` is False unless the order is PCI_BUS_ID, the entries were all UUIDs,
    or only one GPU is visible. NVML's own index order is not used: NVML does not promise
    it is the PCI order.

    Returns one dict per visible GPU: ``mxnet_ctx`` ("gpu:0"), ``cuda_index``,
    ``nvml_index``, ``uuid``, ``name``, ``pci_bus_id``, ``order`` and ``order_certain``.
    """
    order = (env.get("CUDA_DEVICE_ORDER") or "FASTEST_FIRST").strip().upper()
    pci_order = order == "PCI_BUS_ID"
    enumerated = sorted(static_facts, key=lambda g: (bus_key(g.get("pci_bus_id")), g.get("index", 0)))
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    chosen: List[Mapping[str, Any]] = []
    by_uuid_only = cvd is not None
    if cvd is None:
        chosen = list(enumerated)
    else:
        for entry in cvd.split(","):
            token = entry.strip()
            device = None
            if re.fullmatch(r"\d+", token):
                k = int(token)
                device = enumerated[k] if k < len(enumerated) else None
                by_uuid_only = False
            elif token.upper().startswith("GPU-"):
                hits = [g for g in enumerated if str(g.get("uuid") or "").lower().startswith(token.lower())]
                device = hits[0] if len(hits) == 1 else None
            if device is None or any(device is c for c in chosen):
                break
            chosen.append(device)
    certain = pci_order or by_uuid_only or len(chosen) <= 1
    return [{"mxnet_ctx": f"gpu:{n}", "cuda_index": n, "nvml_index": g.get("index"), "uuid": g.get("uuid"),
             "name": g.get("name"), "pci_bus_id": g.get("pci_bus_id"), "order": order, "order_certain": certain}
            for n, g in enumerate(chosen)]


def gpu_env_sources(base_env: Mapping[str, str], cache_path: Optional[str] = None) -> Dict[str, Dict[str, str]]:
    """The CUDA variables a GPU worker gets: {name: {"value": ..., "set_by": "user"|"suite"}}.

    * ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that ``gpu:N`` is the N-th visible GPU in PCI
      order, the order ``map_visible`` reads from NVML. A value the user set is kept (and
      reported as theirs);
    * ``CUDA_CACHE_PATH``: a persistent CUDA JIT cache under the suite's cache dir
      (``spawn.cache_dir("cuda-jit")``), and ``CUDA_CACHE_MAXSIZE`` of 2 GiB, so that PTX
      compiled by the driver in one worker (MXNet's runtime-compiled fused operators,
      cuDNN / cuBLAS PTX on a GPU newer than their SASS) serves the next instead of
      being compiled again inside its first timed batches. A user's values are kept; a
      user's ``CUDA_CACHE_DISABLE`` is passed on untouched (and then nothing is cached).
    """
    out: Dict[str, Dict[str, str]] = {}

    def put(name: str, default: Callable[[], str]) -> None:
        if base_env.get(name) not in (None, ""):
            out[name] = {"value": base_env[name], "set_by": "user"}
        else:
            out[name] = {"value": default(), "set_by": "suite"}

    def default_cache() -> str:
        if cache_path is not None:
            return str(cache_path)
        from pytest_mxperf.proc import spawn
        return str(spawn.cache_dir("cuda-jit"))

    put("CUDA_DEVICE_ORDER", lambda: "PCI_BUS_ID")
    put("CUDA_CACHE_PATH", default_cache)
    put("CUDA_CACHE_MAXSIZE", lambda: str(CUDA_CACHE_MAXSIZE_BYTES))
    if base_env.get("CUDA_CACHE_DISABLE") not in (None, ""):
        out["CUDA_CACHE_DISABLE"] = {"value": base_env["CUDA_CACHE_DISABLE"], "set_by": "user"}
    return out


def worker_gpu_env(base_env: Mapping[str, str], cache_path: Optional[str] = None) -> Dict[str, str]:
    """A copy of ``base_env`` with the CUDA variables of ``gpu_env_sources`` filled in
    (a variable the user set is kept as it is)."""
    env = dict(base_env)
    for name, choice in gpu_env_sources(base_env, cache_path).items():
        env[name] = choice["value"]
    return env


def device_order_note(base_env: Mapping[str, str]) -> Optional[str]:
    """One line when the user's CUDA_DEVICE_ORDER makes ``gpu:N`` differ from NVML's PCI
    order, else None."""
    value = (base_env.get("CUDA_DEVICE_ORDER") or "").strip()
    if value and value.upper() != "PCI_BUS_ID":
        return (f"CUDA_DEVICE_ORDER={value} (set by you) is kept: gpu:N is CUDA's N-th device in that order, "
                "which may not be the N-th GPU by PCI bus id that NVML facts are matched with")
    return None


def visible_gpus(nvml: NVML, env: Optional[Mapping[str, str]] = None) -> List[Dict[str, Any]]:
    """``map_visible(nvml.static_facts(), env)`` (``env`` defaults to os.environ)."""
    return map_visible(nvml.static_facts(), os.environ if env is None else env)
