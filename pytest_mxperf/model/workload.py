"""Workload: the frozen, hashable spec of one measurement cell.

A cell's identity is what is measured (model, mode, batch size, contexts, dtype,
threading profile, optimizer, kvstore), never the environment it ran in: a user's
``OMP_NUM_THREADS`` or ``MXNET_SUBGRAPH_BACKEND`` changes the *result* of the same cell.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, Optional, Tuple

from pytest_mxperf.model import kinds
from pytest_mxperf.model.kinds import INFERENCE_MODES, MODES  # noqa: F401 (read from here too)

# A cell's mode is its kind (score: forward only, as benchmark_score.py; train: forward,
# backward, update; latency: batch by batch, each one synchronised; kvstore, dist,
# convergence, io: their own worker modules), declared with its worker and figures in
# model/kinds.py; MODES and INFERENCE_MODES are the registry's live views.
DTYPES = ("float32", "float16", "bfloat16", "int8")
# bfloat16 (AMP) and int8 (oneDNN quantization) are CPU inference cells: the worker converts
# the float32 network (workers/precision.py); whether this CPU and build run them is the
# worker's to say (an "unsupported" cell with the reason).
CPU_INFERENCE_DTYPES = ("bfloat16", "int8")
# How the suite fills OpenMP threads that the user left unset:
#   "auto"        physical cores available to the process, shared by all contexts
#   "per-context" physical cores divided evenly between the CPU contexts
#   "<n>"         exactly n threads
THREAD_PROFILES = ("auto", "per-context")

_CTX_RE = re.compile(r"^(cpu|gpu):(\d+)$")


class WorkloadError(ValueError):
    """A workload spec that cannot be measured (one-line message)."""


def parse_contexts(text: str) -> Tuple[str, ...]:
    """Parse ``cpu``, ``cpu:0,1``, ``gpu:0,1`` or ``cpu:0,cpu:1`` into ('cpu:0', ...)."""
    text = (text or "").strip().lower()
    if not text:
        raise WorkloadError("empty context list (expected e.g. 'cpu', 'cpu:0,1', 'gpu:0')")
    out = []
    kind = None
    for part in text.split(","):
        part = part.strip()
        if part in ("cpu", "gpu"):
            kind = part
            out.append(part + ":0")
            continue
        if ":" in part:
            kind, _, idx = part.partition(":")
        elif part.isdigit() and kind is not None:
            idx = part
        else:
            raise WorkloadError(f"bad context {part!r} (expected e.g. 'cpu', 'cpu:0,1', 'gpu:0,1')")
        ctx = f"{kind}:{idx}"
        if not _CTX_RE.match(ctx):
            raise WorkloadError(f"bad context {part!r} (expected e.g. 'cpu', 'cpu:0,1', 'gpu:0,1')")
        out.append(f"{kind}:{int(idx)}")
    kinds = {c.split(":")[0] for c in out}
    if len(kinds) > 1:
        raise WorkloadError(f"mixed cpu and gpu contexts in {text!r}")
    if len(set(out)) != len(out):
        raise WorkloadError(f"duplicate context in {text!r}")
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class Workload:
    model: str
    mode: str = "score"
    batch_size: int = 1  # per device: total batch = batch_size * len(contexts)
    contexts: Tuple[str, ...] = ("cpu:0",)
    dtype: str = "float32"
    threads: str = "auto"
    optimizer: str = "sgd"
    kvstore: Optional[str] = None
    # A user's own network: JSON of {"ref", "inputs", "loss", "params"} (see usermodel.py).
    # Not part of the key: ``model`` already names it with the digest of its graph.
    source: str = ""

    def __post_init__(self):
        if self.mode not in MODES:
            raise WorkloadError(f"unknown mode {self.mode!r} (known: {', '.join(MODES)}; a kind of cell is declared "
                                "with pytest_mxperf.model.kinds.register)")
        if not isinstance(self.batch_size, int) or isinstance(self.batch_size, bool) or self.batch_size < 1:
            raise WorkloadError(f"batch size must be a positive integer, got {self.batch_size!r}")
        if self.dtype not in DTYPES:
            raise WorkloadError(f"unknown dtype {self.dtype!r} (known: {', '.join(DTYPES)})")
        if not self.contexts:
            raise WorkloadError("a workload needs at least one context")
        for c in self.contexts:
            if not _CTX_RE.match(c):
                raise WorkloadError(f"bad context {c!r}")
        if len({c.split(':')[0] for c in self.contexts}) != 1:
            raise WorkloadError("mixed cpu and gpu contexts")
        if self.dtype in CPU_INFERENCE_DTYPES:
            if self.mode not in INFERENCE_MODES:
                raise WorkloadError(f"{self.dtype} cells are inference cells (modes: {', '.join(INFERENCE_MODES)}), "
                                    f"not {self.mode!r}")
            if self.contexts[0].startswith("gpu"):
                raise WorkloadError(f"{self.dtype} cells are CPU cells (oneDNN); use float16 on GPUs")
        if self.threads not in THREAD_PROFILES and not (self.threads.isdigit() and int(self.threads) > 0):
            raise WorkloadError(
                f"unknown threading profile {self.threads!r} (known: auto, per-context, or a positive integer)")

    @property
    def device(self) -> str:
        return self.contexts[0].split(":")[0]

    @property
    def num_devices(self) -> int:
        return len(self.contexts)

    @property
    def total_batch(self) -> int:
        return self.batch_size * len(self.contexts)

    def key(self) -> str:
        """A stable, readable id of the cell, e.g. ``score/resnet50_v2/b8/cpu:0/float32/threads=auto``."""
        known = self.__dict__.get("_key")  # made once: a workload never changes
        if known is None:
            known = self._make_key()
            object.__setattr__(self, "_key", known)
        return known

    def _make_key(self) -> str:
        parts = [self.mode, self.model, f"b{self.batch_size}", ",".join(self.contexts), self.dtype,
                 f"threads={self.threads}"]
        named = kinds.kind(self.mode).key_fields
        if "optimizer" in named:
            parts.append(f"opt={self.optimizer}")
        if self.kvstore and "kvstore" in named:
            parts.append(f"kv={self.kvstore}")
        return "/".join(parts)

    def to_dict(self) -> Dict[str, Any]:
        # its fields are strings, numbers and a tuple of strings: what dataclasses.asdict
        # gives, without its recursive deep copy (a replayed study writes many thousands)
        d = {f.name: getattr(self, f.name) for f in _FIELDS}
        d["contexts"] = list(self.contexts)
        if not d["source"]:
            del d["source"]  # keeps recorded workloads of zoo cells as they were
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Workload":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise WorkloadError(f"unknown workload fields: {sorted(unknown)}")
        d = dict(d)
        if "contexts" in d:
            d["contexts"] = tuple(d["contexts"])
        return cls(**d)


_FIELDS = dataclasses.fields(Workload)
